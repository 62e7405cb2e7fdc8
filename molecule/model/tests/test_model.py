# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model once per fleet, after converge and side_effect: what is on the hosts, and what the hub saw.

The hub is molecule/resources/hf_hub/hf_hub_standin.py; its log has one JSON line per request.
"""

from __future__ import annotations

import json
import os

import pytest
import testinfra

HOSTS = ["sm120-model-1", "sm120-model-2", "sm120-model-3"]
MODEL = "/srv/models/glm-5-nvfp4"
# side_effect's deploy.yml --tags model.
AHEAD = "/srv/models/ahead"
REPO_DIR = "/srv/hub/standin/GLM-5-NVFP4-tiny"
FILES = ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
         "tokenizer_config.json"]
CUT = "model-00001-of-00002.safetensors"


def _host(name):
    return testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, os.environ["MOLECULE_INVENTORY_FILE"]))


def _hub_log():
    lines = _host("sm120-model-hub").file("/var/log/hf-hub.log").content_string.splitlines()
    return [json.loads(line) for line in lines]


def _downloads(log):
    return [entry for entry in log if entry["method"] == "GET" and "/resolve/" in entry["path"]]


@pytest.mark.parametrize("model", [MODEL, AHEAD])
def test_every_host_has_the_hubs_bytes_and_the_manifest_and_no_partial_left(model):
    hub = _host("sm120-model-hub")
    expected = {name: hub.file("%s/%s" % (REPO_DIR, name)).sha256sum for name in FILES}
    for name in HOSTS:
        host = _host(name)
        assert {f: host.file("%s/%s" % (model, f)).sha256sum for f in FILES} == expected, name
        manifest = json.loads(host.file("%s/.sm120-model.json" % model).content_string)
        assert sorted(f["path"] for f in manifest["files"]) == FILES
        assert not host.file(model + ".partial").exists


def test_only_the_source_downloaded_from_the_hub():
    clients = {entry["client"] for entry in _downloads(_hub_log())}
    assert clients == {"172.28.8.11"}


def test_the_cut_transfer_resumed_from_its_last_whole_block_not_from_the_start():
    gets = [entry for entry in _downloads(_hub_log()) if entry["path"].endswith("/" + CUT)]
    cut, resumed = gets[0], gets[1]
    assert (cut["status"], cut["range"], cut["bytes"]) == (200, None, 15000000)
    # The CLI writes in 10 MiB blocks: it asks for the rest from the last whole one it wrote.
    assert (resumed["status"], resumed["range"], resumed["bytes"]) == (206, "bytes=10485760-", 24000000 - 10485760)


def test_each_file_came_from_the_hub_once_in_converge():
    # converge fetched every file once (the cut one twice, resumed); side_effect fetched them into another
    # directory and the refused one again, so the first four whole downloads and the resumption are converge's.
    files = [entry["path"].rsplit("/", 1)[1] for entry in _downloads(_hub_log())]
    assert sorted(files[:5]) == sorted(FILES + [CUT])


def test_the_share_is_stopped_and_its_configuration_gone():
    source = _host("sm120-model-1")
    assert not source.service("sm120-model-share").is_running
    assert not source.file("/run/sm120-model-share.conf").exists

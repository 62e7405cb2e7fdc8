# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""model_files through main(), against the stand-in hub of the model scenario over HTTP.

molecule/resources/hf_hub/hf_hub_standin.py stands in for huggingface.co, which cannot be reached here; it
computes each file's git blob id and sha256 itself, so the listing's hashes are not the test's own.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.sm120.sglang.plugins.modules import model_files
from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail

ROOT = pathlib.Path(__file__).resolve().parents[4]
HUB = ROOT / "molecule" / "resources" / "hf_hub" / "hf_hub_standin.py"
REPO = "standin/tiny"
FILES = {"config.json": b'{"architectures": ["GlmMoeDsaForCausalLM"]}\n', "sub/tokenizer.json": b"{}\n",
         "model.safetensors": bytes(range(256)) * 64}


@pytest.fixture
def hub(tmp_path):
    root = tmp_path / "hub" / REPO
    for path, data in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "hub.log"
    proc = subprocess.Popen([sys.executable, str(HUB), "--root", str(tmp_path / "hub"), "--bind", "127.0.0.1",
                             "--port", str(port), "--log", str(log)], stderr=subprocess.DEVNULL)
    for _attempt in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield "http://127.0.0.1:%d" % port, log
    proc.terminate()
    proc.wait(timeout=10)


def _logged_paths(log, count):
    """The paths of the hub's log, once it holds ``count`` lines: the hub writes a line after its answer is sent."""
    for _attempt in range(100):
        lines = log.read_text().splitlines() if log.exists() else []
        if len(lines) >= count:
            break
        time.sleep(0.05)
    return [json.loads(line)["path"] for line in lines]


def _copy(directory):
    for path, data in FILES.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)
    return directory


def test_it_lists_the_hub_files_at_the_revisions_commit_and_checks_a_copy(run_module, hub, tmp_path):
    endpoint, log = hub
    listed = run_module(model_files.main, {"repo": REPO, "endpoint": endpoint})
    listing = listed["listing"]
    assert listed["changed"] is False and "verified" not in listed
    assert sorted(f["path"] for f in listing["files"]) == sorted(FILES)
    weights = next(f for f in listing["files"] if f["path"] == "model.safetensors")
    assert weights["sha256"] == hashlib.sha256(FILES["model.safetensors"]).hexdigest()
    # The tree is read at the commit the revision resolved to, not at the branch.
    assert _logged_paths(log, 2) == ["/api/models/%s/revision/main" % REPO,
                                     "/api/models/%s/tree/%s" % (REPO, listing["commit"])]

    checked = run_module(model_files.main, {"listing": listing, "path": str(_copy(tmp_path / "copy"))})
    assert checked["complete"] and checked["problem"] is None and len(checked["verified"]) == 3


def test_a_changed_copy_is_named_with_both_hashes(run_module, hub, tmp_path):
    endpoint, _log = hub
    listing = run_module(model_files.main, {"repo": REPO, "endpoint": endpoint})["listing"]
    copy = _copy(tmp_path / "copy")
    (copy / "model.safetensors").write_bytes(b"\1" + FILES["model.safetensors"][1:])
    checked = run_module(model_files.main, {"listing": listing, "path": str(copy)})
    assert not checked["complete"] and [m["path"] for m in checked["mismatched"]] == ["model.safetensors"]
    assert "model.safetensors: sha256 %s expected" % hashlib.sha256(FILES["model.safetensors"]).hexdigest() \
        in checked["problem"]


def test_an_unknown_repository_names_the_fix(run_module, hub):
    endpoint, _log = hub
    with pytest.raises(ModuleFail, match="answered 404 .* check the name, the revision and the endpoint"):
        run_module(model_files.main, {"repo": "standin/absent", "endpoint": endpoint})


def test_an_unreachable_hub_names_the_endpoint(run_module):
    with pytest.raises(ModuleFail, match="Check that this host reaches http://127.0.0.1:9"):
        run_module(model_files.main, {"repo": REPO, "endpoint": "http://127.0.0.1:9", "timeout": 2})


def test_a_listing_that_is_none_is_refused(run_module, tmp_path):
    with pytest.raises(ModuleFail, match="not a model listing: .*leaves the model directory"):
        run_module(model_files.main, {"listing": {"files": [{"path": "../x", "size": 1, "git_oid": "a"}]},
                                      "path": str(tmp_path)})


def test_a_file_where_the_model_goes_is_refused(run_module, hub, tmp_path):
    endpoint, _log = hub
    listing = run_module(model_files.main, {"repo": REPO, "endpoint": endpoint})["listing"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModuleFail, match="is not a directory: the model goes there"):
        run_module(model_files.main, {"listing": listing, "path": str(tmp_path / "file")})

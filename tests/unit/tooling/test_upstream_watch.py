# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""scripts/upstream-watch.py on the real wheels: a skipped release fails, a new one is drafted with a warning.

The release list is given (--versions) and the data is the collection's with
releases taken out, so the test does not depend on what PyPI lists today.
"""

from __future__ import annotations

import copy
import importlib.util
import pathlib

import yaml

from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases
from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import CACHE, sglang_wheel

ROOT = pathlib.Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("upstream_watch", ROOT / "scripts" / "upstream-watch.py")
watch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(watch)


def _data_without(tmp_path, *versions):
    data = copy.deepcopy(sglang_releases.load())
    for version in versions:
        del data["releases"][version]
    path = tmp_path / "releases.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _run(capsys, data, versions):
    for version in versions.split(","):
        sglang_wheel(version)  # into the cache the script reads
    status = watch.main(["--data", data, "--versions", versions, "--wheels", CACHE])
    return status, capsys.readouterr().out


def test_a_brand_new_release_is_tried_drafted_and_only_warned_about(tmp_path, capsys):
    status, out = _run(capsys, _data_without(tmp_path, "0.5.23"), "0.5.21,0.5.22,0.5.23")
    assert status == 0
    assert "not described: 0.5.23" in out and "== SGLang 0.5.23 (new)" in out
    assert "flashinfer_allreduce_fusion: entry >=0.5.22 (source) anchors and takes effect" in out
    assert "pcie_ipc_allreduce: entry >=0.5.22 (option) anchors and takes effect" in out
    assert ('packages: [sglang==0.5.23, "flashinfer-python[cu13]==0.7.2", sglang-kernel==0.4.10, torch==2.14.1]'
            in out)
    assert 'requires_python: ">=3.11"' in out and "glm5: true" in out
    assert "WARNING SGLang 0.5.23 is new on the index" in out


def test_a_skipped_release_is_a_hole_that_fails(tmp_path, capsys):
    status, out = _run(capsys, _data_without(tmp_path, "0.5.12"), "0.5.11,0.5.12,0.5.13")
    assert status == 1
    assert "== SGLang 0.5.12 (a hole: older than 0.5.23" in out
    assert "ERROR the data skips 0.5.12" in out


def test_an_entry_whose_anchors_moved_is_reported_broken(tmp_path, capsys):
    # As if 0.5.8.post1 were not described and the entry written for 0.5.9 covered it: 0.5.8.post1 still
    # imports SGLang's helpers on one line, so that entry's import edit does not anchor there.
    data = copy.deepcopy(sglang_releases.load())
    del data["releases"]["0.5.8.post1"]
    entries = data["gates"]["custom_allreduce_pcie"]["entries"]
    entries[0]["versions"], entries[1]["versions"] = "==0.5.8", ">=0.5.8.post1,<0.5.10"
    path = tmp_path / "releases.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    sglang_wheel("0.5.8.post1")
    status = watch.main(["--data", str(path), "--versions", "0.5.8,0.5.8.post1,0.5.9", "--wheels", CACHE])
    out = capsys.readouterr().out
    assert status == 1
    assert "custom_allreduce_pcie: entry >=0.5.8.post1,<0.5.10 (source) BROKEN" in out
    assert "edit 'import_is_sm120_supported' on sglang/srt/distributed/device_communicators/custom_all_reduce.py" in out
    assert "flashinfer_allreduce_fusion: entry >=0.5.8,<0.5.14 (source) anchors and takes effect" in out

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_facts through main(), on a site directory laid out as pip lays it out.

The interpreter is a test double: a script that answers the module's question
(where do your packages live) the way a venv's python would, pointing at the site
directory the test builds with real dist-info metadata and RECORD lines.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from ansible_collections.sm120.sglang.plugins.modules import sglang_facts
from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail

GATE = "sglang/srt/layers/communicator.py"


def _digest(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _dist(site, name, version, files=None, extra=None):
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    record = []
    for path, data in (files or {}).items():
        target = site / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        record.append("%s,sha256=%s,%d" % (path, _digest(data), len(data)))
    (info / "RECORD").write_text("\n".join(record) + "\n")
    for file_name, text in (extra or {}).items():
        (info / file_name).write_text(text)


@pytest.fixture
def venv(tmp_path):
    """A venv stand-in: bin/python answers with this site directory; SGLang 0.5.23, torch CUDA 13.0, flashinfer."""
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    _dist(site, "sglang", "0.5.23", {GATE: b"shipped\n"},
          {"direct_url.json": json.dumps({"url": "git+https://x/sglang.git", "vcs_info": {"requested_revision": "v0.5.23",
                                                                                          "commit_id": "abc"},
                                          "subdirectory": "python"})})
    _dist(site, "torch", "2.14.1", {"torch/version.py": b"cuda: Optional[str] = '13.0'\n"})
    _dist(site, "flashinfer_python", "0.7.2")
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    answer = {"python_version": "3.11.2", "purelib": str(site), "platlib": str(site), "sys_path": [str(site)]}
    python.write_text("#!/bin/sh\necho '%s'\n" % json.dumps(answer))
    python.chmod(0o755)
    return tmp_path, site


def test_it_reads_the_release_versions_cuda_build_source_and_shipped_hash(run_module, venv):
    root, site = venv
    result = run_module(sglang_facts.main, {"python": str(root / "bin" / "python"), "files": [GATE, "sglang/missing.py"],
                                            "packages": ["Flashinfer_Python", "torch", "sglang-kernel"]})
    facts = result["ansible_facts"]["sglang_facts"]
    assert result["changed"] is False
    assert facts["installed"] is True and facts["version"] == "0.5.23" and facts["location"] == str(site)
    assert facts["packages"] == {"sglang": "0.5.23", "flashinfer-python": "0.7.2", "torch": "2.14.1", "sglang-kernel": None}
    assert facts["torch_cuda"] == "13.0" and facts["python_version"] == "3.11.2"
    assert facts["sglang_source"] == {"url": "git+https://x/sglang.git", "ref": "v0.5.23", "commit": "abc",
                                      "subdirectory": "python"}
    assert facts["files"][GATE] == {"path": str(site / GATE), "record_sha256": hashlib.sha256(b"shipped\n").hexdigest()}
    assert facts["files"]["sglang/missing.py"]["record_sha256"] is None


def test_a_missing_interpreter_and_one_without_sglang_are_facts_not_failures(run_module, venv, tmp_path):
    gone = run_module(sglang_facts.main, {"python": str(tmp_path / "nowhere" / "python")})["ansible_facts"]["sglang_facts"]
    assert gone["installed"] is False and gone["reason"].endswith("does not exist") and gone["python_version"] is None
    root, site = venv
    for info in site.glob("sglang-*.dist-info"):
        for child in info.iterdir():
            child.unlink()
        info.rmdir()
    empty = run_module(sglang_facts.main, {"python": str(root / "bin" / "python")})["ansible_facts"]["sglang_facts"]
    assert empty["installed"] is False and "sglang is not installed for" in empty["reason"]
    assert empty["python_version"] == "3.11.2" and empty["location"] == str(site)


def test_an_interpreter_that_does_not_run_is_named_with_its_error(run_module, tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'libpython3.11.so.1.0: cannot open shared object file' >&2\nexit 127\n")
    python.chmod(0o755)
    facts = run_module(sglang_facts.main, {"python": str(python)})["ansible_facts"]["sglang_facts"]
    assert facts["installed"] is False and "does not run (rc 127): libpython3.11.so.1.0" in facts["reason"]


def test_state_files_read_as_objects_and_empty_when_absent_without_an_interpreter(run_module, tmp_path):
    ledger = tmp_path / "ledger.json"
    ledger.write_text(json.dumps({"gates": ["pcie_ipc_allreduce"]}))
    result = run_module(sglang_facts.main, {"state_files": {"ledger": str(ledger), "rejected": str(tmp_path / "none.json")}})
    assert result["ansible_facts"] == {"sglang_state": {"ledger": {"gates": ["pcie_ipc_allreduce"]}, "rejected": {}}}


def test_the_service_s_environment_file_reads_as_its_variables_as_systemd_reads_them(run_module, tmp_path):
    env = tmp_path / "glm-5-nvfp4.env"
    env.write_text('# Managed by Ansible\n\nSM120_TUNING_LIVE=max_running_requests_64,nccl_min_nchannels_8\n'
                   'SM120_PATCHES_LIVE=\nQUOTED="a \\"b\\" \\$c"\n')
    result = run_module(sglang_facts.main, {"state_files": {"service_env": str(env),
                                                            "none": str(tmp_path / "none.env")}})
    assert result["ansible_facts"]["sglang_state"] == {
        "service_env": {"SM120_TUNING_LIVE": "max_running_requests_64,nccl_min_nchannels_8", "SM120_PATCHES_LIVE": "",
                        "QUOTED": 'a "b" $c'},
        "none": {}}


@pytest.mark.parametrize("text,message", [("{broken", "is not JSON"), ("[1, 2]", "holds list, not a JSON object")])
def test_a_state_file_that_is_not_a_json_object_fails_naming_it_and_the_fix(run_module, tmp_path, text, message):
    ledger = tmp_path / "ledger.json"
    ledger.write_text(text)
    with pytest.raises(ModuleFail) as failure:
        run_module(sglang_facts.main, {"state_files": {"ledger": str(ledger)}})
    assert message in failure.value.result["msg"] and str(ledger) in failure.value.result["msg"]
    assert "Move it away" in failure.value.result["msg"]

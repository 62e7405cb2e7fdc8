"""After --tags rollback: every gate file of three releases is the shipped file again, no ledger, no option left."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "resources", "tests"))
from sglang_host import gate_files, installed_version, record_sha256  # noqa: E402
from phase import rolled_back_only  # noqa: E402

pytestmark = rolled_back_only

VENVS = {"sm120-bookworm": {"/opt/sglang": "0.5.23", "/opt/sglang-0.5.16": "0.5.16"},
         "sm120-trixie": {"/opt/sglang": "0.5.9"}}


def test_every_gate_file_of_every_release_equals_its_record_sha256(host):
    for venv, release in VENVS[host.backend.get_hostname()].items():
        assert installed_version(host, venv) == release
        site, hashes = record_sha256(host, venv)
        paths = sorted({path for _gate, path, _edits in gate_files(release)})
        assert paths, release
        for path in paths:
            assert host.file(os.path.join(site, path)).sha256sum == hashes[path], (release, path)


def test_no_ledger_is_left(host):
    for ledger in ("/var/lib/sm120-sglang/patch-ledger.json", "/var/lib/sm120-sglang/ledger-0.5.16.json"):
        assert not host.file(ledger).exists, ledger


def test_no_option_gate_is_left_in_the_unit_or_the_environment(host):
    unit = host.file("/etc/systemd/system/sglang-glm-5-nvfp4.service").content_string
    env = host.file("/etc/sglang/glm-5-nvfp4.env").content_string
    for option in ("--flashinfer-allreduce-fusion-backend", "--enable-flashinfer-allreduce-fusion", "--moe-runner-backend"):
        assert option not in unit, option
    assert "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE" not in env
    assert "SM120_PATCHES_LIVE=\n" in env
    assert host.service("sglang-glm-5-nvfp4").is_running

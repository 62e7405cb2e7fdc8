"""After converge: every gate live in the real SGLang files of three releases, recorded, and in the service."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "resources", "tests"))
from sglang_host import API_KEY, gate_files, installed_version, processes_holding, record_sha256  # noqa: E402
from phase import converged_only  # noqa: E402

pytestmark = converged_only

LEDGERS = {"/opt/sglang": "/var/lib/sm120-sglang/patch-ledger.json",
           "/opt/sglang-0.5.16": "/var/lib/sm120-sglang/ledger-0.5.16.json"}
# venv -> (release, the source gates live there) per host, as molecule.yml enables them.
LIVE = {
    "sm120-bookworm": {"/opt/sglang": ("0.5.23", ["flashinfer_allreduce_fusion"]),
                       "/opt/sglang-0.5.16": ("0.5.16", ["custom_allreduce_pcie", "flashinfer_allreduce_fusion"])},
    "sm120-trixie": {"/opt/sglang": ("0.5.9", ["custom_allreduce_pcie"])},
}
GATES = {"sm120-bookworm": ["flashinfer_allreduce_fusion", "pcie_ipc_allreduce"],
         "sm120-trixie": ["custom_allreduce_pcie", "moe_runner_sm120"]}
UNIT = "/etc/systemd/system/sglang-glm-5-nvfp4.service"
ENV = "/etc/sglang/glm-5-nvfp4.env"


def venvs(host):
    return LIVE[host.backend.get_hostname()].items()


def test_the_expected_releases_are_installed(host):
    for venv, (release, _gates) in venvs(host):
        assert installed_version(host, venv) == release


def test_every_edit_of_a_live_gate_is_in_place_once_and_every_other_file_is_as_shipped(host):
    for venv, (release, gates) in venvs(host):
        site, hashes = record_sha256(host, venv)
        live_paths = set()
        for _gate, path, edits in gate_files(release, gates):
            live_paths.add(path)
            content = host.file(os.path.join(site, path)).content_string
            for edit in edits:
                assert content.count(edit["new"]) == 1, (venv, path, edit["id"])
        for _gate, path, _edits in gate_files(release):
            if path not in live_paths:
                assert host.file(os.path.join(site, path)).sha256sum == hashes[path], (venv, path)


def test_patched_files_compile_with_the_venv_python(host):
    for venv, (release, gates) in venvs(host):
        site, _hashes = record_sha256(host, venv)
        paths = sorted({os.path.join(site, path) for _gate, path, _edits in gate_files(release, gates)})
        host.check_output("%s/bin/python -m py_compile %s" % (venv, " ".join(paths)))


def test_the_ledger_records_gates_hashes_and_options(host):
    for venv, (release, gates) in venvs(host):
        site, hashes = record_sha256(host, venv)
        ledger = json.loads(host.file(LEDGERS[venv]).content_string)
        assert ledger["sglang_version"] == release and ledger["package_dir"] == site
        assert set(gates) <= set(ledger["gates"])
        assert len(ledger["files"]) == len({path for _gate, path, _edits in gate_files(release, gates)})
        for entry in ledger["files"]:
            assert entry["record_sha256"] == hashes[entry["relative_path"]]
            assert host.file(entry["path"]).sha256sum == entry["sha256"] != entry["record_sha256"]
            assert entry["patched_at"].endswith("Z") and entry["edits"]


def test_the_service_runs_with_the_option_gates_and_records_the_live_set(host):
    name = host.backend.get_hostname()
    unit, env = host.file(UNIT).content_string, host.file(ENV).content_string
    assert "SM120_PATCHES_LIVE=%s\n" % ",".join(GATES[name]) in env
    if name == "sm120-bookworm":
        # 0.5.23: the option's switch in the environment, the fusion's flag on the command line,
        # and no MoE flag: SGLang picks the runner itself.
        assert "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1\n" in env
        assert "--flashinfer-allreduce-fusion-backend auto" in unit and "--moe-runner-backend" not in unit
    else:
        # 0.5.9 picks no MoE runner for SM120: the gate's flag does.
        assert "--moe-runner-backend flashinfer_cutlass" in unit and "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE" not in env
    assert host.service("sglang-glm-5-nvfp4").is_running


def test_the_api_key_is_in_the_config_file_only_and_on_no_command_line(host):
    config = host.file("/etc/sglang/glm-5-nvfp4.yaml")
    assert config.user == "root" and config.group == "sglang" and config.mode == 0o640
    assert json.loads(config.content_string) == {"api-key": API_KEY}
    assert API_KEY not in host.file(UNIT).content_string and API_KEY not in host.file(ENV).content_string
    assert processes_holding(host, API_KEY) == []
    assert processes_holding(host, "/opt/standin/sglang_standin.py") != []


def test_nothing_is_left_in_the_package_directory(host):
    for venv, _release in venvs(host):
        site, _hashes = record_sha256(host, venv)
        leftovers = host.run("find %s/sglang -name '*.lock' -o -name '.source_patch.*' -o -name '*~'" % site)
        assert leftovers.stdout.strip() == ""

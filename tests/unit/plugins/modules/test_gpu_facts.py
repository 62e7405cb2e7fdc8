# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.module_utils import basic

from ansible_collections.sm120.sglang.plugins.module_utils.gpu_facts import GPU_KEYS, QUERY_GPU_FIELDS, build_facts
from ansible_collections.sm120.sglang.plugins.modules import gpu_facts
from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail

FIXTURES = pathlib.Path(__file__).parents[1] / "module_utils" / "fixtures" / "gpu"
NVIDIA_SMI = "/usr/bin/nvidia-smi"
QUERY = (NVIDIA_SMI, "--query-gpu=" + ",".join(QUERY_GPU_FIELDS), "--format=csv,noheader,nounits")
BANNER = (NVIDIA_SMI,)
TOPO = (NVIDIA_SMI, "topo", "-m")


def read(folder, name):
    return (FIXTURES / folder / name).read_text()


def outputs_of(folder, query_folder=None):
    """What nvidia-smi prints on the host a fixture folder was taken from."""
    return {
        BANNER: (0, read(folder, "nvidia-smi.txt"), ""),
        QUERY: (0, read(query_folder or folder, "query-gpu.csv"), ""),
        TOPO: (0, read(folder, "topo.txt"), ""),
    }


class Host:
    """A fake target: the commands it answers, its PATH, its /proc file, its pynvml."""

    def __init__(self, monkeypatch, tmp_path, outputs, on_path=True, driver_file=None, nvml=None):
        self.outputs = outputs
        self.commands = []
        self.warnings = []
        driver_version_file = tmp_path / "version"
        if driver_file is not None:
            driver_version_file.write_text(driver_file)
        monkeypatch.setattr(gpu_facts, "DRIVER_VERSION_FILE", str(driver_version_file))
        monkeypatch.setattr(gpu_facts, "pynvml", nvml)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                            lambda module, name, *args, **kwargs: NVIDIA_SMI if on_path and name == "nvidia-smi" else None)
        monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda module, args, **kwargs: self.run_command(args))
        monkeypatch.setattr(basic.AnsibleModule, "warn", lambda module, warning, **kwargs: self.warnings.append(warning))

    def run_command(self, args):
        assert isinstance(args, list), "commands go to run_command as argv lists"
        self.commands.append(tuple(args))
        return self.outputs[tuple(args)]


@pytest.fixture
def host(monkeypatch, tmp_path):
    def _host(outputs=None, **kwargs):
        return Host(monkeypatch, tmp_path, outputs or {}, **kwargs)
    return _host


def facts_of(run_module, **args):
    result = run_module(gpu_facts.main, args)
    assert result["changed"] is False
    return result["ansible_facts"]


def test_eight_rtx_pro_6000_on_pcie(run_module, host):
    target = host(outputs_of("rtx-pro-6000-server-x8"), driver_file=read("rtx-pro-6000-server-x8", "driver-version.txt"))
    facts = facts_of(run_module)
    assert facts["nvidia_gpu_facts_reason"] is None
    assert (facts["nvidia_driver_version"], facts["nvidia_cuda_version"]) == ("580.159.04", "13.0")
    assert facts["nvidia_kernel_module"] == "open"
    assert facts["nvidia_nvml_available"] is False
    gpus = facts["nvidia_gpus"]
    assert len(gpus) == 8
    assert {gpu["compute_capability"] for gpu in gpus} == {"12.0"}
    assert {gpu["power_max_limit_w"] for gpu in gpus} == {600.0}
    assert all(gpu["persistence_mode"] is True for gpu in gpus)
    topology = facts["nvidia_topology"]
    assert topology["interconnect"] == "pcie"
    assert topology["matrix"]["GPU0"] == {
        "GPU1": "PIX", "GPU2": "NODE", "GPU3": "NODE", "GPU4": "SYS", "GPU5": "SYS", "GPU6": "SYS", "GPU7": "SYS"}
    assert {aff["numa_affinity"] for aff in topology["affinity"].values()} == {"0", "1"}
    assert target.commands == [BANNER, QUERY, TOPO]
    assert target.warnings == []


def test_check_mode_reads_the_same_facts(run_module, host):
    host(outputs_of("rtx-pro-6000-server-x8"), driver_file=read("rtx-pro-6000-server-x8", "driver-version.txt"))
    assert facts_of(run_module, _ansible_check_mode=True) == facts_of(run_module)


def test_h200_from_real_captures(run_module, host):
    folder = "h200-driver-580.159.04"
    host(outputs_of(folder, query_folder="h200-device-run"), driver_file=read(folder, "driver-version.txt"))
    facts = facts_of(run_module)
    assert facts["nvidia_gpu_facts_reason"] is None
    assert (facts["nvidia_driver_version"], facts["nvidia_cuda_version"]) == ("580.159.04", "13.0")
    assert facts["nvidia_kernel_module"] == "open"
    (gpu,) = facts["nvidia_gpus"]
    assert (gpu["index"], gpu["name"], gpu["compute_capability"]) == (0, "NVIDIA H200", "9.0")
    assert gpu["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert gpu["pci_bus_id"] == "00000000:00:06.0"
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"]) == (143771, 0)
    assert gpu["power_min_limit_w"] == 200.0
    assert (gpu["power_limit_w"], gpu["power_default_limit_w"], gpu["power_max_limit_w"]) == (700.0, 700.0, 700.0)
    assert 0 < gpu["power_draw_w"] < gpu["power_limit_w"]
    assert gpu["persistence_mode"] is True
    assert facts["nvidia_topology"] == {
        "interconnect": "single",
        "matrix": {"GPU0": {}},
        "affinity": {"GPU0": {"cpu_affinity": "0-15", "numa_affinity": "0", "gpu_numa_id": None}},
    }


def test_one_gpu_is_single(run_module, host):
    host(outputs_of("rtx-pro-6000-workstation-x1"))
    facts = facts_of(run_module)
    assert facts["nvidia_topology"]["interconnect"] == "single"
    assert facts["nvidia_gpus"][0]["name"] == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    # No /proc/driver/nvidia/version readable (a container, say): flavour unknown, version from nvidia-smi.
    assert facts["nvidia_kernel_module"] is None
    assert facts["nvidia_driver_version"] == "580.159.04"


def test_no_nvidia_smi_on_path(run_module, host):
    target = host(on_path=False)
    assert facts_of(run_module) == build_facts(reason="nvidia-smi not found on PATH")
    assert target.commands == []


def test_no_nvidia_smi_but_a_loaded_kernel_module(run_module, host):
    host(on_path=False, driver_file=read("h200-driver-580.159.04", "driver-version.txt"))
    facts = facts_of(run_module)
    assert facts["nvidia_gpus"] == [] and facts["nvidia_gpu_facts_reason"] == "nvidia-smi not found on PATH"
    assert (facts["nvidia_kernel_module"], facts["nvidia_driver_version"]) == ("open", "580.159.04")


def test_nvidia_smi_path_that_is_not_there(run_module, host, tmp_path):
    target = host()
    missing = str(tmp_path / "nvidia-smi")
    facts = facts_of(run_module, nvidia_smi=missing)
    assert facts["nvidia_gpus"] == []
    assert facts["nvidia_gpu_facts_reason"] == "nvidia-smi not found at %s" % missing
    assert target.commands == []


def test_nvidia_smi_path_given(run_module, host, tmp_path):
    program = tmp_path / "nvidia-smi"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    outputs = {(str(program),) + argv[1:]: answer for argv, answer in outputs_of("rtx-pro-6000-workstation-x1").items()}
    target = host(outputs, on_path=False)
    assert len(facts_of(run_module, nvidia_smi=str(program))["nvidia_gpus"]) == 1
    assert [argv[0] for argv in target.commands] == [str(program)] * 3


def test_driver_not_loaded(run_module, host):
    target = host({BANNER: (9, read("failures", "driver-not-loaded.txt"), "")})
    facts = facts_of(run_module)
    assert facts["nvidia_gpus"] == []
    assert facts["nvidia_gpu_facts_reason"].startswith(
        "nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert facts["nvidia_gpu_facts_reason"].endswith("(exit code 9)")
    assert facts["nvidia_topology"]["interconnect"] is None
    assert target.commands == [BANNER]


def test_no_devices_found(run_module, host):
    host({BANNER: (6, read("failures", "no-devices.txt"), "")})
    facts = facts_of(run_module)
    assert facts["nvidia_gpus"] == []
    assert facts["nvidia_gpu_facts_reason"] == "nvidia-smi: No devices were found (exit code 6)"


def test_query_that_fails(run_module, host):
    outputs = outputs_of("rtx-pro-6000-server-x8")
    outputs[QUERY] = (2, "", 'Field "power.min_limit" is not a valid field to query.\n')
    host(outputs)
    facts = facts_of(run_module)
    assert facts["nvidia_gpus"] == []
    assert facts["nvidia_gpu_facts_reason"] == (
        'nvidia-smi --query-gpu: Field "power.min_limit" is not a valid field to query. (exit code 2)')
    assert facts["nvidia_driver_version"] == "580.159.04"


def test_query_that_lists_nothing(run_module, host):
    outputs = outputs_of("rtx-pro-6000-server-x8")
    outputs[QUERY] = (0, "", "")
    host(outputs)
    facts = facts_of(run_module)
    assert facts["nvidia_gpus"] == [] and facts["nvidia_gpu_facts_reason"] == "nvidia-smi lists no GPU"


def test_unreadable_query_output_fails(run_module, host):
    outputs = outputs_of("rtx-pro-6000-server-x8")
    outputs[QUERY] = (0, "0, NVIDIA RTX PRO 6000 Blackwell Server Edition\n", "")
    host(outputs)
    with pytest.raises(ModuleFail) as failed:
        run_module(gpu_facts.main, {})
    result = failed.value.result
    assert result["msg"].startswith("cannot read the output of %s: expected 13 columns" % " ".join(QUERY))
    assert result["cmd"] == list(QUERY)
    assert result["stdout"] == outputs[QUERY][1]


def test_unreadable_topology_fails(run_module, host):
    outputs = outputs_of("rtx-pro-6000-server-x8")
    outputs[TOPO] = (0, "Topology not available\n", "")
    host(outputs)
    with pytest.raises(ModuleFail) as failed:
        run_module(gpu_facts.main, {})
    assert failed.value.result["msg"] == (
        "cannot read the output of %s topo -m: no header line with GPU0 in nvidia-smi topo -m output" % NVIDIA_SMI)
    assert failed.value.result["cmd"] == list(TOPO)


@pytest.mark.parametrize("folder, interconnect", [("rtx-pro-6000-server-x8", None), ("rtx-pro-6000-workstation-x1", "single")])
def test_topology_that_fails_warns_and_keeps_the_gpus(run_module, host, folder, interconnect):
    outputs = outputs_of(folder)
    outputs[TOPO] = (3, "", "topo is not supported here\n")
    target = host(outputs)
    facts = facts_of(run_module)
    assert facts["nvidia_gpus"] and facts["nvidia_gpu_facts_reason"] is None
    assert facts["nvidia_topology"] == {"interconnect": interconnect, "matrix": {}, "affinity": {}}
    assert target.warnings == ["GPU links unknown: nvidia-smi topo -m: topo is not supported here (exit code 3)"]


class FakeNvml:
    """pynvml that reads 412.5 W for every GPU and answers nothing else."""

    NVML_FEATURE_ENABLED = 1

    class NVMLError(Exception):
        pass

    def __init__(self):
        self.initialised = 0

    def nvmlInit(self):
        self.initialised += 1

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetPowerUsage(self, handle):
        return 412500

    def __getattr__(self, name):
        def not_supported(*args):
            raise self.NVMLError(name)
        return not_supported


def outputs_without_power_draw():
    outputs = outputs_of("rtx-pro-6000-server-x8")
    rows = [row.split(", ") for row in outputs[QUERY][1].splitlines()]
    for row in rows:
        row[QUERY_GPU_FIELDS.index("power.draw")] = "[N/A]"
    outputs[QUERY] = (0, "".join(", ".join(row) + "\n" for row in rows), "")
    return outputs


def test_nvml_reads_what_nvidia_smi_left_unavailable(run_module, host):
    nvml = FakeNvml()
    host(outputs_without_power_draw(), nvml=nvml)
    facts = facts_of(run_module)
    assert facts["nvidia_nvml_available"] is True
    assert {gpu["power_draw_w"] for gpu in facts["nvidia_gpus"]} == {412.5}
    assert nvml.initialised == 1


def test_use_nvml_false_leaves_nvml_alone(run_module, host):
    nvml = FakeNvml()
    host(outputs_without_power_draw(), nvml=nvml)
    facts = facts_of(run_module, use_nvml=False)
    assert facts["nvidia_nvml_available"] is False
    assert {gpu["power_draw_w"] for gpu in facts["nvidia_gpus"]} == {None}
    assert nvml.initialised == 0


def test_without_pynvml_values_stay_unavailable(run_module, host):
    host(outputs_without_power_draw(), nvml=None)
    facts = facts_of(run_module)
    assert facts["nvidia_nvml_available"] is False
    assert {gpu["power_draw_w"] for gpu in facts["nvidia_gpus"]} == {None}


def _documented(node):
    return set(node["contains"])


def test_return_documents_every_fact_key():
    returned = yaml.safe_load(gpu_facts.RETURN)["ansible_facts"]
    assert _documented(returned) == set(build_facts())
    assert _documented(returned["contains"]["nvidia_gpus"]) == set(GPU_KEYS)
    topology = returned["contains"]["nvidia_topology"]
    assert _documented(topology) == set(build_facts()["nvidia_topology"])
    assert _documented(topology["contains"]["affinity"]) == {"cpu_affinity", "numa_affinity", "gpu_numa_id"}

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.module_utils import basic

from ansible_collections.sm120.sglang.plugins.module_utils import gpu_p2p
from ansible_collections.sm120.sglang.plugins.module_utils.gpu_facts import GPU_KEYS, QUERY_GPU_FIELDS, build_facts
from ansible_collections.sm120.sglang.plugins.modules import gpu_facts
from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail

FIXTURES = pathlib.Path(__file__).parents[1] / "module_utils" / "fixtures" / "gpu"
NVIDIA_SMI = "/usr/bin/nvidia-smi"
QUERY = (NVIDIA_SMI, "--query-gpu=" + ",".join(QUERY_GPU_FIELDS), "--format=csv,noheader,nounits")
BANNER = (NVIDIA_SMI,)
TOPO = (NVIDIA_SMI, "topo", "-m")
MEMORY = (NVIDIA_SMI, "-q", "-d", "MEMORY")
P2P_READ = (NVIDIA_SMI, "topo", "-p2p", "r")
P2P_WRITE = (NVIDIA_SMI, "topo", "-p2p", "w")
LSPCI = "/usr/bin/lspci"
NOT_ANSWERED = (2, "", "this fake host does not answer it")


def read(folder, name):
    return (FIXTURES / folder / name).read_text()


def outputs_of(folder, query_folder=None):
    """What nvidia-smi prints on the host a fixture folder was taken from."""
    return {
        BANNER: (0, read(folder, "nvidia-smi.txt"), ""),
        QUERY: (0, read(query_folder or folder, "query-gpu.csv"), ""),
        TOPO: (0, read(folder, "topo.txt"), ""),
    }


def p2p_outputs_of(folder, overlay=None):
    """nvidia-smi's and lspci's P2P answers on a P2P fixture host; ``overlay``'s files win where it has them."""
    def pick(name):
        return read(overlay, name) if overlay and (FIXTURES / overlay / name).exists() else read(folder, name)
    return {
        MEMORY: (0, pick("q-memory.txt"), ""),
        P2P_READ: (0, pick("topo-p2p-r.txt"), ""),
        P2P_WRITE: (0, pick("topo-p2p-w.txt"), ""),
        (LSPCI, "-vvv"): (0, pick("lspci-vvv.txt"), ""),
    }, pick


def lay_out_host_files(root, pick):
    """The host's /proc and /sys files of a P2P fixture under ``root``; returns gpu_p2p's paths to point there."""
    for sysfs_path in pick("pci-paths.txt").split():
        device = root / sysfs_path.lstrip("/")
        device.mkdir(parents=True, exist_ok=True)
        link = root / "sys/bus/pci/devices" / device.name
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(device)
    for line in pick("iommu-groups.txt").split():
        group, kind = line.split("/type:")
        (root / group.lstrip("/")).mkdir(parents=True, exist_ok=True)
        (root / group.lstrip("/") / "type").write_text(kind + "\n")
    files = {}
    for attribute, name in (("PROC_CMDLINE", "cmdline.txt"), ("UVM_DISABLE_HMM", "uvm_disable_hmm.txt"),
                            ("NVIDIA_PARAMS", "nvidia-params.txt"), ("ASPM_POLICY", "aspm-policy.txt")):
        files[attribute] = root / name
        files[attribute].write_text(pick(name))
    files["PCI_DEVICES"] = root / "sys/bus/pci/devices"
    files["IOMMU_GROUPS"] = root / "sys/kernel/iommu_groups"
    return files


class Host:
    """A fake target: the commands it answers, its PATH, its /proc and /sys files, its pynvml.

    Stands in for a GPU host: commands not in ``outputs`` fail as a driver that lacks them would.
    """

    def __init__(self, monkeypatch, tmp_path, outputs, on_path=True, driver_file=None, nvml=None, p2p=None,
                 lspci=True):
        self.outputs = dict(outputs)
        self.commands = []
        self.warnings = []
        driver_version_file = tmp_path / "version"
        if driver_file is not None:
            driver_version_file.write_text(driver_file)
        monkeypatch.setattr(gpu_facts, "DRIVER_VERSION_FILE", str(driver_version_file))
        monkeypatch.setattr(gpu_facts, "pynvml", nvml)
        # Without a P2P fixture, every host file gpu_p2p reads is missing, as in a container.
        for attribute in ("PROC_CMDLINE", "UVM_DISABLE_HMM", "NVIDIA_PARAMS", "ASPM_POLICY", "PCI_DEVICES", "IOMMU_GROUPS"):
            monkeypatch.setattr(gpu_p2p, attribute, str(tmp_path / "absent" / attribute))
        if p2p is not None:
            answers, pick = p2p_outputs_of(*p2p)
            self.outputs.update(answers)
            for attribute, path in lay_out_host_files(tmp_path / "host", pick).items():
                monkeypatch.setattr(gpu_p2p, attribute, str(path))
        binaries = {"nvidia-smi": NVIDIA_SMI if on_path else None, "lspci": LSPCI if lspci else None}
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda module, name, *args, **kwargs: binaries.get(name))
        monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda module, args, **kwargs: self.run_command(args))
        monkeypatch.setattr(basic.AnsibleModule, "warn", lambda module, warning, **kwargs: self.warnings.append(warning))

    def run_command(self, args):
        assert isinstance(args, list), "commands go to run_command as argv lists"
        self.commands.append(tuple(args))
        return self.outputs.get(tuple(args), NOT_ANSWERED)


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
    # No P2P fixture: a driver that answers neither -q -d MEMORY nor topo -p2p leaves them unknown, with a warning each.
    assert target.commands == [BANNER, QUERY, TOPO, MEMORY, P2P_READ, P2P_WRITE]
    assert target.warnings == [
        "BAR1 size unknown: -q -d MEMORY: this fake host does not answer it (exit code 2)",
        "P2P read capability unknown: topo -p2p r: this fake host does not answer it (exit code 2)",
        "P2P write capability unknown: topo -p2p w: this fake host does not answer it (exit code 2)",
    ]
    assert {(gpu["bar1_total_mib"], gpu["numa_node"], tuple(gpu["pcie_path"])) for gpu in gpus[:4]} == {(None, 0, ())}
    assert (topology["p2p_read"], topology["p2p_write"]) == ({}, {})
    assert facts["nvidia_host_p2p"] == {"cmdline": None, "iommu_group_types": None, "uvm_disable_hmm": None,
                                        "registry_dwords": None, "aspm_policy": None, "bridges": [], "acs": None}


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
        # One GPU: no pair to ask topo -p2p about.
        "p2p_read": {},
        "p2p_write": {},
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
    # One GPU: BAR1 (-q -d MEMORY) is asked for, no P2P matrix.
    assert [argv[0] for argv in target.commands] == [str(program)] * 4


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
    assert facts["nvidia_topology"] == {"interconnect": interconnect, "matrix": {}, "affinity": {}, "p2p_read": {},
                                        "p2p_write": {}}
    assert target.warnings[0] == "GPU links unknown: nvidia-smi topo -m: topo is not supported here (exit code 3)"


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
    assert _documented(returned["contains"]["nvidia_gpus"]) == set(GPU_KEYS) | set(gpu_p2p.P2P_GPU_KEYS)
    assert _documented(returned["contains"]["nvidia_host_p2p"]) == set(build_facts()["nvidia_host_p2p"])
    topology = returned["contains"]["nvidia_topology"]
    assert _documented(topology) == set(build_facts()["nvidia_topology"])
    assert _documented(topology["contains"]["affinity"]) == {"cpu_affinity", "numa_affinity", "gpu_numa_id"}


def p2p_host_outputs(folder):
    """The banner of the hand-written RTX PRO 6000 host, the GPUs and links of a P2P fixture host."""
    outputs = outputs_of("rtx-pro-6000-server-x8", query_folder=folder)
    outputs[TOPO] = (0, read(folder, "topo.txt"), "")
    return outputs


def test_p2p_facts_of_the_single_socket_switch_host(run_module, host):
    folder = "rtx-pro-6000-switch-1socket-x8"
    target = host(p2p_host_outputs(folder), p2p=(folder,))
    facts = facts_of(run_module)
    gpus = facts["nvidia_gpus"]
    assert {gpu["bar1_total_mib"] for gpu in gpus} == {98304}
    assert {gpu["numa_node"] for gpu in gpus} == {0}
    assert gpus[4]["pcie_path"] == ["0000:40:01.1", "0000:41:00.0", "0000:42:00.0", "0000:43:00.0"]
    topology = facts["nvidia_topology"]
    assert topology["p2p_read"]["GPU3"]["GPU4"] == "OK" and topology["p2p_write"]["GPU7"]["GPU0"] == "OK"
    p2p = facts["nvidia_host_p2p"]
    assert p2p["cmdline"][-3:] == ["iommu=pt", "pcie_aspm=off", "pcie_port_pm=off"]
    assert set(p2p["iommu_group_types"].values()) == {"identity"}
    assert (p2p["uvm_disable_hmm"], p2p["registry_dwords"]["ForceP2P"], p2p["aspm_policy"]) == (True, "0x11", "default")
    assert len(p2p["bridges"]) == 12 and set(p2p["acs"]) == set(p2p["bridges"])
    assert not any(flags["ReqRedir"] for flags in p2p["acs"].values())
    assert (LSPCI, "-vvv") in target.commands
    assert target.warnings == []


def test_p2p_facts_of_the_two_socket_host_as_shipped(run_module, host):
    folder = "rtx-pro-6000-direct-2socket-x8"
    host(p2p_host_outputs(folder), p2p=(folder, folder + "-as-shipped"))
    facts = facts_of(run_module)
    assert [gpu["numa_node"] for gpu in facts["nvidia_gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert {gpu["bar1_total_mib"] for gpu in facts["nvidia_gpus"]} == {256}
    assert facts["nvidia_topology"]["p2p_read"]["GPU0"]["GPU4"] == "CNS"
    p2p = facts["nvidia_host_p2p"]
    assert p2p["uvm_disable_hmm"] is False and set(p2p["iommu_group_types"].values()) == {"DMA-FQ"}
    assert all(flags["ReqRedir"] and flags["CmpltRedir"] for flags in p2p["acs"].values())


def test_acs_is_unknown_without_lspci_or_as_a_user(run_module, host):
    folder = "rtx-pro-6000-switch-1socket-x8"
    target = host(p2p_host_outputs(folder), p2p=(folder,), lspci=False)
    assert facts_of(run_module)["nvidia_host_p2p"]["acs"] is None
    assert target.warnings == ["ACS on the GPUs' bridges unknown: lspci not found (install pciutils)"]

    target = host(p2p_host_outputs(folder), p2p=(folder,))
    # What lspci -vvv prints to a user who is not root: no capabilities.
    target.outputs[(LSPCI, "-vvv")] = (0, "20:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Device 14ab\n", "")
    assert facts_of(run_module)["nvidia_host_p2p"]["acs"] is None
    assert target.warnings == ["ACS on the GPUs' bridges unknown: lspci -vvv shows no capabilities (run as root)"]


def test_unreadable_p2p_matrix_fails(run_module, host):
    folder = "rtx-pro-6000-switch-1socket-x8"
    target = host(p2p_host_outputs(folder), p2p=(folder,))
    target.outputs[P2P_READ] = (0, "P2P status unavailable\n", "")
    with pytest.raises(ModuleFail) as failed:
        run_module(gpu_facts.main, {})
    assert failed.value.result["msg"].startswith("cannot read the output of %s topo -p2p r: no header line" % NVIDIA_SMI)


def test_documentation_and_examples_are_yaml_ansible_doc_reads():
    # A colon in a plain scalar once broke ansible-doc while RETURN still parsed.
    documentation = yaml.safe_load(gpu_facts.DOCUMENTATION)
    assert documentation["module"] == "gpu_facts"
    assert any("nvidia_host_p2p" in line for line in documentation["description"])
    assert yaml.safe_load(gpu_facts.EXAMPLES)

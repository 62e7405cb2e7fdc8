# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The P2P preflight on the composed RTX PRO 6000 hosts (fixtures/gpu/README.md: what is composed, from which source)."""

from __future__ import annotations

import copy
import pathlib

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.module_utils import gpu_facts, gpu_p2p
from ansible_collections.sm120.sglang.plugins.plugin_utils import p2p_prerequisites as p2p

FIXTURES = pathlib.Path(__file__).parents[1] / "module_utils" / "fixtures" / "gpu"
SWITCH = "rtx-pro-6000-switch-1socket-x8"
DIRECT = "rtx-pro-6000-direct-2socket-x8"
SHIPPED = DIRECT + "-as-shipped"
DRIVER_PARAMETERS = ["iommu=pt", "pcie_aspm=off", "pcie_port_pm=off"]
TP8 = {"tp_size": 8, "kernel_parameters": DRIVER_PARAMETERS}


def host_facts(folder, overlay=None):
    """The facts gpu_facts builds on a fixture host, from the same parsers, without the module."""
    def read(name):
        path = FIXTURES / overlay / name if overlay and (FIXTURES / overlay / name).exists() else FIXTURES / folder / name
        return path.read_text()
    gpus = gpu_facts.parse_query_gpu_csv(read("query-gpu.csv"))
    topology = gpu_facts.build_topology(len(gpus), gpu_facts.parse_topology(read("topo.txt")))
    topology["p2p_read"] = gpu_p2p.parse_p2p_matrix(read("topo-p2p-r.txt"))
    topology["p2p_write"] = gpu_p2p.parse_p2p_matrix(read("topo-p2p-w.txt"))
    bar1 = gpu_p2p.parse_bar1_total(read("q-memory.txt"))
    for gpu, path in zip(gpus, read("pci-paths.txt").split()):
        gpu["bar1_total_mib"] = bar1[gpu_p2p.normalize_bdf(gpu["pci_bus_id"])]
        gpu["numa_node"] = gpu_p2p.numa_node(topology["affinity"], gpu["index"])
        gpu["pcie_path"] = gpu_p2p.parse_pci_path(path)
    bridges = gpu_p2p.gpu_bridges(gpus)
    host = gpu_p2p.build_host_p2p(
        cmdline=gpu_p2p.parse_cmdline(read("cmdline.txt")),
        iommu_group_types=gpu_p2p.parse_iommu_group_types(read("iommu-groups.txt")),
        uvm_disable_hmm=gpu_p2p.parse_module_bool(read("uvm_disable_hmm.txt")),
        nvidia_params=gpu_p2p.parse_nvidia_params(read("nvidia-params.txt")),
        aspm_policy=gpu_p2p.parse_aspm_policy(read("aspm-policy.txt")),
        acs=gpu_p2p.parse_lspci_acs(read("lspci-vvv.txt")), bridges=bridges)
    return gpu_facts.build_facts(gpus=gpus, topology=topology, host_p2p=host)


def verdicts(facts, expected=None):
    return {check["name"]: check["verdict"] for check in p2p.checks(facts, TP8 if expected is None else expected)}


ALL_MET = {name: "met" for name in p2p.CHECKS}


def test_the_single_socket_switch_host_as_recommended_meets_every_prerequisite():
    facts = host_facts(SWITCH)
    assert verdicts(facts) == ALL_MET
    assert p2p.problems(facts, TP8, "require") == [] and p2p.warnings(facts, TP8) == []
    found = {check["name"]: check["found"] for check in p2p.checks(facts, TP8)}
    assert found["acs"] == "no redirect on the 12 bridges with ACS of the 12 on the GPUs' paths"
    assert found["force_p2p"] == "ForceP2P=0x11 for the NODE pairs"
    assert found["p2p_capability"] == "OK both ways between all 28 pairs of the TP groups"


def test_the_switch_hosts_cross_switch_node_pairs_need_force_p2p():
    facts = host_facts(SWITCH)
    facts["nvidia_host_p2p"]["registry_dwords"] = {}
    force = next(check for check in p2p.checks(facts, TP8) if check["name"] == "force_p2p")
    assert (force["verdict"], force["found"]) == ("not met", "16 NODE pairs in a TP group and no ForceP2P in RegistryDwords")
    # At TP 4 each group stays behind one switch (PIX): not needed.
    assert verdicts(facts, dict(TP8, tp_size=4))["force_p2p"] == "met"


def test_the_two_socket_direct_attach_host_as_recommended_meets_every_prerequisite():
    facts = host_facts(DIRECT)
    assert verdicts(facts) == ALL_MET
    force = next(check for check in p2p.checks(facts, TP8) if check["name"] == "force_p2p")
    assert force["found"].startswith("not needed: no pair of a TP group meets only at a host bridge")


def test_the_two_socket_host_as_shipped_misses_every_prerequisite_but_force_p2p():
    facts = host_facts(DIRECT, SHIPPED)
    assert verdicts(facts) == dict({name: "not met" for name in p2p.CHECKS}, force_p2p="met")


def test_acs_on_hmm_on_and_a_256_mib_bar1_name_all_three_fixes_in_one_message():
    facts = host_facts(DIRECT)
    shipped = host_facts(DIRECT, SHIPPED)
    facts["nvidia_host_p2p"]["acs"] = shipped["nvidia_host_p2p"]["acs"]
    facts["nvidia_host_p2p"]["uvm_disable_hmm"] = False
    for gpu in facts["nvidia_gpus"]:
        gpu["bar1_total_mib"] = 256
    assert verdicts(facts) == dict(ALL_MET, acs="not met", uvm_hmm="not met", bar1="not met")
    (message,) = p2p.problems(facts, TP8, "require")
    assert message.startswith("P2P prerequisites not met (3): (1) ACS request and completion redirect off")
    assert "ReqRedir/CmpltRedir on 8 of the GPUs' bridges: 0000:00:01.1, 0000:10:01.1" in message
    assert "setpci -s BDF ECAP_ACS+6.w=0000" in message and "the collection only checks it" in message
    assert "(2) nvidia_uvm's HMM off" in message and "options nvidia_uvm uvm_disable_hmm=1" in message
    assert "the collection sets it (gpu_driver_uvm_disable_hmm), effective after a reboot" in message
    assert "(3) BAR1 as large as the GPU's memory" in message and "GPU0 256 MiB for 97887 MiB of memory" in message
    assert "Above 4G decoding and Resizable BAR" in message and "only the BIOS can" in message
    assert "same-switch pairs at half speed" in message  # the reported cost of leaving ACS on
    # warn shows the same message without failing: the host is never passed silently.
    assert p2p.problems(facts, TP8, "warn") == [] and p2p.warnings(facts, TP8, "warn") == [message]


def test_tp_8_on_gpus_without_p2p_across_the_sockets_is_refused_naming_the_fixes():
    facts = host_facts(DIRECT, SHIPPED)
    for mode in ("warn", "require"):
        (message,) = p2p.problems(facts, TP8, mode)
        assert message.startswith("Refused before the server start: the profile runs TP 8 and no P2P between "
                                  "GPU0-GPU4 read CNS write CNS, ")
        assert "NCCL would hang or crawl after a 7-8 minute start" in message
        assert "(1) IOMMU in passthrough or off" in message and "iommu=pt" in message
    assert p2p.problems(facts, TP8, "skip") == []
    # TP 4 keeps each group on one socket, where the GPUs report OK: no refusal, the other fixes still named.
    tp4 = dict(TP8, tp_size=4)
    assert verdicts(facts, tp4)["p2p_capability"] == "met"
    assert p2p.problems(facts, tp4, "warn") == []
    assert p2p.warnings(facts, tp4)[0].startswith("P2P prerequisites not met (6): (1) IOMMU")


def test_a_host_it_cannot_judge_says_so():
    facts = host_facts(SWITCH)
    facts["nvidia_host_p2p"] = gpu_p2p.build_host_p2p()
    facts["nvidia_topology"]["p2p_read"] = {}
    for gpu in facts["nvidia_gpus"]:
        gpu["bar1_total_mib"] = None
        gpu["pcie_path"] = []
    assert verdicts(facts) == dict({name: "unknown" for name in p2p.CHECKS})
    (message,) = p2p.warnings(facts, TP8)
    assert message.startswith("P2P prerequisites this host cannot be judged on (8): P2P between the GPUs")
    assert "nvidia-smi topo -p2p r not read" in message and "nvidia_uvm not loaded" in message
    (failed,) = p2p.problems(facts, TP8, "require")
    assert failed == message


def test_no_gpu_leaves_every_prerequisite_unknown():
    facts = gpu_facts.build_facts(reason="nvidia-smi not found on PATH")
    assert {check["found"] for check in p2p.checks(facts, TP8)} == {"no GPU answers (nvidia-smi not found on PATH)"}


def test_kernel_parameters_written_but_not_booted_are_a_pending_reboot():
    facts = host_facts(DIRECT)
    facts["nvidia_host_p2p"]["cmdline"] = ["BOOT_IMAGE=/boot/vmlinuz", "ro", "iommu=pt"]
    check = next(check for check in p2p.checks(facts, TP8) if check["name"] == "kernel_command_line")
    assert check["verdict"] == "not met"
    assert check["found"] == "pcie_aspm=off pcie_port_pm=off not active (reboot pending, or written for another boot entry)"
    assert verdicts(facts, dict(TP8, kernel_parameters=[]))["kernel_command_line"] == "met"


def test_iommu_without_type_files_is_unknown_and_off_is_met():
    facts = host_facts(DIRECT)
    facts["nvidia_host_p2p"]["iommu_group_types"] = {"0": None}
    assert verdicts(facts)["iommu"] == "unknown"
    facts["nvidia_host_p2p"]["iommu_group_types"] = {}
    assert verdicts(facts)["iommu"] == "met"


def test_one_gpu_needs_no_p2p():
    facts = host_facts(DIRECT, SHIPPED)
    tp1 = dict(TP8, tp_size=1)
    assert verdicts(facts, tp1)["p2p_capability"] == "met" and p2p.refusal(p2p.checks(facts, tp1), 1) is None


def test_tp_groups_are_consecutive_from_gpu_0():
    assert p2p.tp_groups(8, 8) == [list(range(8))]
    assert p2p.tp_groups(8, 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert p2p.tp_groups(8, 3) == [[0, 1, 2], [3, 4, 5]]
    assert p2p.tp_groups(4, 8) == [[0, 1, 2, 3]]
    with pytest.raises(p2p.PrerequisiteError, match="1 or more"):
        p2p.tp_groups(8, 0)


def test_nccl_p2p_level_from_the_numa_split():
    assert p2p.nccl_p2p_level(host_facts(DIRECT)["nvidia_gpus"], 8) == "SYS"
    assert p2p.nccl_p2p_level(host_facts(DIRECT)["nvidia_gpus"], 4) == "PHB"
    assert p2p.nccl_p2p_level(host_facts(SWITCH)["nvidia_gpus"], 8) == "PHB"
    unknown = copy.deepcopy(host_facts(DIRECT)["nvidia_gpus"])
    unknown[5]["numa_node"] = None
    assert p2p.nccl_p2p_level(unknown, 8) == "" and p2p.nccl_p2p_level([], 8) == ""


def test_an_unknown_mode_is_refused_naming_the_choices():
    with pytest.raises(p2p.PrerequisiteError, match="preflight_p2p_prerequisites is 'strict'; it is one of warn, require, skip"):
        p2p.problems(host_facts(SWITCH), TP8, "strict")


@pytest.mark.parametrize("broken, message", [
    ({}, "must map each prerequisite"),
    ({"iommu": {"title": "t"}}, "iommu has no set_by"),
    ({"iommu": {"title": "t", "set_by": "vendor", "setting": "s", "reboot": True, "cost": "c"}}, "set_by is 'vendor'"),
    ({"iommu": {"title": "t", "set_by": "collection", "setting": "s", "reboot": True, "cost": "c"}}, "names no variable"),
])
def test_prerequisite_data_that_does_not_fit_is_an_error(tmp_path, broken, message):
    path = tmp_path / "p2p.yml"
    path.write_text(yaml.safe_dump(broken))
    with pytest.raises(p2p.PrerequisiteError, match=message):
        p2p.load(str(path))


def test_the_data_has_every_check_and_says_who_sets_it():
    data = p2p.load()
    assert set(data) == set(p2p.CHECKS)
    assert {name for name, entry in data.items() if entry["set_by"] == "bios"} == {"bar1", "p2p_capability"}

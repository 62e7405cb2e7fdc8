# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The P2P parsers on the H200 capture and on the composed RTX PRO 6000 hosts (fixtures/gpu/README.md says which is which)."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils import gpu_p2p
from ansible_collections.sm120.sglang.plugins.module_utils.gpu_facts import parse_topology

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "gpu"
SWITCH = FIXTURES / "rtx-pro-6000-switch-1socket-x8"
DIRECT = FIXTURES / "rtx-pro-6000-direct-2socket-x8"
SHIPPED = FIXTURES / "rtx-pro-6000-direct-2socket-x8-as-shipped"


def fixture(path):
    return path.read_text()


def test_bar1_of_the_real_h200_capture():
    # nvidia-smi -q prints the same BAR1 section that -q -d MEMORY prints alone.
    assert gpu_p2p.parse_bar1_total(fixture(FIXTURES / "h200-driver-580.159.04" / "q.txt")) == {"0000:00:06.0": 262144}


def test_bar1_per_gpu_with_and_without_resizable_bar():
    large = gpu_p2p.parse_bar1_total(fixture(SWITCH / "q-memory.txt"))
    assert list(large) == ["0000:%s:00.0" % bus for bus in ("23", "24", "25", "26", "43", "44", "45", "46")]
    assert set(large.values()) == {98304}
    assert set(gpu_p2p.parse_bar1_total(fixture(SHIPPED / "q-memory.txt")).values()) == {256}


def test_bar1_that_nvidia_smi_cannot_read_is_none_and_no_gpu_is_an_error():
    assert gpu_p2p.parse_bar1_total("GPU 00000000:01:00.0\n    BAR1 Memory Usage\n        Total   : N/A\n") == {
        "0000:01:00.0": None}
    with pytest.raises(ValueError, match="no GPU section"):
        gpu_p2p.parse_bar1_total("No devices were found\n")


def test_p2p_matrices_of_both_hosts():
    for folder in (SWITCH, DIRECT):
        for name in ("topo-p2p-r.txt", "topo-p2p-w.txt"):
            matrix = gpu_p2p.parse_p2p_matrix(fixture(folder / name))
            assert sorted(matrix) == ["GPU%d" % i for i in range(8)]
            assert {cell for peers in matrix.values() for cell in peers.values()} == {"OK"}
            assert "GPU0" not in matrix["GPU0"]
    shipped = gpu_p2p.parse_p2p_matrix(fixture(SHIPPED / "topo-p2p-r.txt"))
    assert shipped["GPU0"] == {"GPU1": "OK", "GPU2": "OK", "GPU3": "OK", "GPU4": "CNS", "GPU5": "CNS", "GPU6": "CNS",
                               "GPU7": "CNS"}


def test_p2p_matrix_with_ansi_header_and_published_spacing():
    # The layout a two-GPU host published (spaces), and one with the underline codes topo -m uses.
    assert gpu_p2p.parse_p2p_matrix("        GPU0    GPU1\n GPU0   X       CNS\n GPU1   CNS     X\n") == {
        "GPU0": {"GPU1": "CNS"}, "GPU1": {"GPU0": "CNS"}}
    assert gpu_p2p.parse_p2p_matrix("\t\x1b[4mGPU0\tGPU1\x1b[0m\n GPU0\tX\tOK\n GPU1\tOK\tX\n\nLegend:\n") == {
        "GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}


@pytest.mark.parametrize("text, message", [
    ("Topology not available\n", "no header line"),
    ("\tGPU0\tGPU1\n GPU0\tX\n", "row GPU0 has 1 cells for 2 GPUs"),
])
def test_p2p_matrix_it_cannot_read_is_an_error(text, message):
    with pytest.raises(ValueError, match=message):
        gpu_p2p.parse_p2p_matrix(text)


def test_p2p_argv_asks_read_or_write_only():
    assert gpu_p2p.p2p_argv("nvidia-smi", "w") == ["nvidia-smi", "topo", "-p2p", "w"]
    with pytest.raises(ValueError, match="r .read. or w .write."):
        gpu_p2p.p2p_argv("nvidia-smi", "n")


def test_pci_path_from_sysfs_through_a_switch_and_direct():
    switch = fixture(SWITCH / "pci-paths.txt").split()
    assert gpu_p2p.parse_pci_path(switch[0]) == ["0000:20:01.1", "0000:21:00.0", "0000:22:00.0", "0000:23:00.0"]
    direct = fixture(DIRECT / "pci-paths.txt").split()
    assert gpu_p2p.parse_pci_path(direct[7]) == ["0000:b0:01.1", "0000:b1:00.0"]


def test_gpu_bridges_are_every_bridge_once_without_the_gpus():
    gpus = [{"pcie_path": gpu_p2p.parse_pci_path(path)} for path in fixture(SWITCH / "pci-paths.txt").split()]
    bridges = gpu_p2p.gpu_bridges(gpus)
    assert len(bridges) == 2 + 2 + 8  # two root ports, two upstream ports, eight downstream ports
    assert "0000:23:00.0" not in bridges and bridges[:3] == ["0000:20:01.1", "0000:21:00.0", "0000:22:00.0"]


def test_acs_control_of_the_bridges():
    off = gpu_p2p.parse_lspci_acs(fixture(SWITCH / "lspci-vvv.txt"))
    assert len(off) == 12 and not any(flags["ReqRedir"] or flags["CmpltRedir"] for flags in off.values())
    on = gpu_p2p.parse_lspci_acs(fixture(SHIPPED / "lspci-vvv.txt"))
    assert on["0000:00:01.1"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                                  "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}


def test_lspci_with_a_domain_and_devices_without_acs():
    text = ("0001:c0:01.0 PCI bridge: Intel Corporation Device 352a (rev 04)\n\tControl: I/O+ Mem+\n\n"
            "0001:c1:00.0 3D controller: NVIDIA Corporation Device 2bb5 (rev a1)\n\tCapabilities: [60] Power Management\n")
    assert gpu_p2p.parse_lspci_acs(text) == {}
    text += "\tCapabilities: [2a0 v1] Access Control Services\n\t\tACSCtl:\tSrcValid- ReqRedir+ CmpltRedir-\n"
    assert gpu_p2p.parse_lspci_acs(text) == {"0001:c1:00.0": {"SrcValid": False, "ReqRedir": True, "CmpltRedir": False}}


def test_host_files():
    assert gpu_p2p.parse_cmdline(fixture(SWITCH / "cmdline.txt"))[-3:] == ["iommu=pt", "pcie_aspm=off", "pcie_port_pm=off"]
    assert gpu_p2p.parse_cmdline(None) is None
    groups = gpu_p2p.parse_iommu_group_types(fixture(SHIPPED / "iommu-groups.txt"))
    assert len(groups) == 64 and set(groups.values()) == {"DMA-FQ"}
    assert gpu_p2p.parse_iommu_group_types("") == {}
    assert gpu_p2p.parse_iommu_group_types("/sys/kernel/iommu_groups/3\n") == {"3": None}
    assert gpu_p2p.parse_module_bool(fixture(DIRECT / "uvm_disable_hmm.txt")) is True
    assert gpu_p2p.parse_module_bool(fixture(SHIPPED / "uvm_disable_hmm.txt")) is False
    assert gpu_p2p.parse_module_bool(None) is None
    with pytest.raises(ValueError, match="expected Y, N"):
        gpu_p2p.parse_module_bool("maybe")
    assert gpu_p2p.parse_aspm_policy(fixture(DIRECT / "aspm-policy.txt")) == "default"
    assert gpu_p2p.parse_aspm_policy("default [performance] powersave\n") == "performance"


def test_registry_dwords():
    params = gpu_p2p.parse_nvidia_params(fixture(DIRECT / "nvidia-params.txt"))
    assert params["EnableResizableBar"] == "0" and params["RegistryDwords"] == ""
    assert gpu_p2p.parse_registry_dwords(params) == {}
    forced = dict(params, RegistryDwords="ForceP2P=0x11;RMForceP2PType=1;RMPcieP2PType=2")
    assert gpu_p2p.parse_registry_dwords(forced) == {"ForceP2P": "0x11", "RMForceP2PType": "1", "RMPcieP2PType": "2"}
    assert gpu_p2p.parse_registry_dwords(None) is None


def test_numa_node_of_each_gpu_from_topo_m():
    affinity = parse_topology(fixture(DIRECT / "topo.txt"))["affinity"]
    assert [gpu_p2p.numa_node(affinity, index) for index in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpu_p2p.numa_node({"GPU0": {"numa_affinity": None}}, 0) is None
    assert gpu_p2p.numa_node({"GPU0": {"numa_affinity": "0-1"}}, 0) is None


def test_bdf_spellings():
    assert gpu_p2p.normalize_bdf("00000000:3B:00.0") == "0000:3b:00.0"
    assert gpu_p2p.normalize_bdf("3b:00.0") == "0000:3b:00.0"
    with pytest.raises(ValueError, match="not a PCI address"):
        gpu_p2p.normalize_bdf("pci0000:20")


def test_acs_fact_keeps_only_the_gpus_bridges():
    acs = {"0000:00:01.1": {"ReqRedir": True}, "0000:99:00.0": {"ReqRedir": True}}
    host = gpu_p2p.build_host_p2p(acs=acs, bridges=["0000:00:01.1", "0000:10:01.1"])
    assert host["acs"] == {"0000:00:01.1": {"ReqRedir": True}}
    assert gpu_p2p.build_host_p2p()["acs"] is None

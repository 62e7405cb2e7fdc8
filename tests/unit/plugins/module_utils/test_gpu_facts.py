# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pathlib
from collections import namedtuple

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils import gpu_facts

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "gpu"
H200 = FIXTURES / "h200-driver-580.159.04"
RTX_X8 = FIXTURES / "rtx-pro-6000-server-x8"
RTX_X1 = FIXTURES / "rtx-pro-6000-workstation-x1"

# The fields of the second command in the H200 capture's README (query-gpu.csv, last line).
H200_CAPTURED_FIELDS = ("index", "name", "compute_cap", "driver_version", "power.draw", "power.limit")


def fixture(path):
    return path.read_text()


def test_the_query_asks_nvidia_smi_for_every_gpu_key_without_units():
    argv = gpu_facts.query_gpu_argv("/usr/bin/nvidia-smi")
    assert argv[0] == "/usr/bin/nvidia-smi"
    assert argv[1] == "--query-gpu=" + ",".join(gpu_facts.QUERY_GPU_FIELDS)
    assert argv[2] == "--format=csv,noheader,nounits"
    assert gpu_facts.topology_argv("nvidia-smi") == ["nvidia-smi", "topo", "-m"]


def test_h200_capture_query_row():
    row = fixture(H200 / "query-gpu.csv").splitlines()[-1]
    assert gpu_facts.parse_query_gpu_csv(row, H200_CAPTURED_FIELDS) == [{
        "index": 0,
        "name": "NVIDIA H200",
        "compute_capability": "9.0",
        "driver_version": "580.159.04",
        "power_draw_w": 116.47,
        "power_limit_w": 700.0,
    }]


def test_h200_capture_banner_driver_file_and_topology():
    assert gpu_facts.parse_smi_banner(fixture(H200 / "nvidia-smi.txt")) == ("580.159.04", "13.0")
    assert gpu_facts.parse_driver_version_file(fixture(H200 / "driver-version.txt")) == ("open", "580.159.04")

    parsed = gpu_facts.parse_topology(fixture(H200 / "topo.txt"))
    assert parsed == {
        "matrix": {"GPU0": {}},
        "affinity": {"GPU0": {"cpu_affinity": "0-15", "numa_affinity": "0", "gpu_numa_id": None}},
    }
    assert gpu_facts.build_topology(1, parsed)["interconnect"] == "single"


def test_h200_topology_header_really_carries_ansi_codes():
    # Guards the fixture: the parser is only proven if the escape codes are there.
    assert "\x1b[4mGPU0" in fixture(H200 / "topo.txt")


def test_eight_rtx_pro_6000_gpus():
    gpus = gpu_facts.parse_query_gpu_csv(fixture(RTX_X8 / "query-gpu.csv"))
    assert [gpu["index"] for gpu in gpus] == list(range(8))
    assert {gpu["name"] for gpu in gpus} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert {gpu["compute_capability"] for gpu in gpus} == {"12.0"}
    assert all(set(gpu) == set(gpu_facts.GPU_KEYS) for gpu in gpus)
    first = gpus[0]
    assert first["uuid"] == "GPU-3f1c9a52-7d0e-4b8a-9c61-5e2d8f0a1b00"
    assert first["pci_bus_id"] == "00000000:18:00.0"
    assert first["memory_total_mib"] == 97887 and first["memory_used_mib"] == 0
    assert first["power_draw_w"] == 34.12
    assert (first["power_limit_w"], first["power_default_limit_w"], first["power_max_limit_w"]) == (600.0, 600.0, 600.0)
    assert first["power_min_limit_w"] == 150.0
    assert first["persistence_mode"] is True


def test_eight_rtx_pro_6000_topology_is_pcie_over_two_numa_nodes():
    parsed = gpu_facts.parse_topology(fixture(RTX_X8 / "topo.txt"))
    matrix = parsed["matrix"]
    assert sorted(matrix) == ["GPU%d" % i for i in range(8)]
    assert all(len(peers) == 7 and "NIC0" not in peers for peers in matrix.values())
    assert matrix["GPU0"]["GPU1"] == "PIX"
    assert matrix["GPU0"]["GPU2"] == "NODE"
    assert matrix["GPU0"]["GPU4"] == "SYS"
    assert matrix["GPU6"]["GPU7"] == "PIX"
    assert all(matrix[a][b] == matrix[b][a] for a in matrix for b in matrix[a])
    assert parsed["affinity"]["GPU3"] == {"cpu_affinity": "0-47,96-143", "numa_affinity": "0", "gpu_numa_id": None}
    assert parsed["affinity"]["GPU4"] == {"cpu_affinity": "48-95,144-191", "numa_affinity": "1", "gpu_numa_id": None}
    assert gpu_facts.build_topology(8, parsed)["interconnect"] == "pcie"


def test_one_workstation_gpu():
    (gpu,) = gpu_facts.parse_query_gpu_csv(fixture(RTX_X1 / "query-gpu.csv"))
    assert gpu["name"] == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert gpu["persistence_mode"] is False
    assert gpu["memory_used_mib"] == 512
    assert gpu_facts.build_topology(1, gpu_facts.parse_topology(fixture(RTX_X1 / "topo.txt")))["interconnect"] == "single"


@pytest.mark.parametrize("folder, gpu_count, interconnect", [
    ("hgx-h100-nvlink-x8", 8, "nvlink"),
    ("pcie-nvlink-bridge-x4", 4, "mixed"),
    ("rtx-pro-6000-server-x8", 8, "pcie"),
])
def test_interconnect_from_link_matrix(folder, gpu_count, interconnect):
    parsed = gpu_facts.parse_topology(fixture(FIXTURES / folder / "topo.txt"))
    assert len(parsed["matrix"]) == gpu_count
    assert gpu_facts.classify_interconnect(gpu_count, parsed["matrix"]) == interconnect


def test_nvlink_matrix_keeps_link_widths():
    matrix = gpu_facts.parse_topology(fixture(FIXTURES / "hgx-h100-nvlink-x8" / "topo.txt"))["matrix"]
    assert {link for peers in matrix.values() for link in peers.values()} == {"NV18"}
    bridged = gpu_facts.parse_topology(fixture(FIXTURES / "pcie-nvlink-bridge-x4" / "topo.txt"))["matrix"]
    assert bridged["GPU0"] == {"GPU1": "NV4", "GPU2": "NODE", "GPU3": "NODE"}


def test_interconnect_is_unknown_without_gpus_or_links():
    assert gpu_facts.classify_interconnect(0, {}) is None
    assert gpu_facts.classify_interconnect(4, {}) is None
    assert gpu_facts.classify_interconnect(1, {}) == "single"
    # NODE starts with N but is no NVLink.
    assert gpu_facts.classify_interconnect(2, {"GPU0": {"GPU1": "NODE"}, "GPU1": {"GPU0": "NODE"}}) == "pcie"


def test_topology_without_a_gpu_header_is_an_error():
    with pytest.raises(ValueError, match="GPU0"):
        gpu_facts.parse_topology("Failed to run topology\n")


@pytest.mark.parametrize("unavailable", ["[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"])
def test_values_nvidia_smi_cannot_read_are_none(unavailable):
    row = "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-x, 00000000:18:00.0, 12.0, 97887, 0, %s, 600.00, " \
          "600.00, %s, 600.00, %s\n" % (unavailable, unavailable, unavailable)
    (gpu,) = gpu_facts.parse_query_gpu_csv(row)
    assert gpu["power_draw_w"] is None and gpu["power_min_limit_w"] is None and gpu["persistence_mode"] is None
    assert gpu["power_limit_w"] == 600.0


@pytest.mark.parametrize("row, message", [
    ("0, NVIDIA H200, 9.0\n", "expected 13 columns"),
    ("zero, a, b, c, 12.0, 1, 0, 1.0, 1.0, 1.0, 1.0, 1.0, Enabled\n", "column index"),
    ("0, a, b, c, 12.0, 1, 0, 1.0, 1.0, 1.0, 1.0, 1.0, On\n", "column persistence_mode: expected Enabled or Disabled"),
])
def test_rows_that_do_not_fit_the_query_are_errors(row, message):
    with pytest.raises(ValueError, match=message):
        gpu_facts.parse_query_gpu_csv(row)


def test_empty_query_output_lists_no_gpu():
    assert gpu_facts.parse_query_gpu_csv("") == []
    assert gpu_facts.parse_query_gpu_csv("\n") == []


@pytest.mark.parametrize("text, expected", [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U16)  Thu\n"
     "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n", ("open", "580.159.04")),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  575.57.08  Release Build  (dvs-builder@U16)\n",
     ("open", "575.57.08")),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
     "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n", ("proprietary", "550.54.15")),
    (None, (None, None)),
    ("", (None, None)),
    ("something else\n", (None, None)),
])
def test_kernel_module_flavour_and_version(text, expected):
    assert gpu_facts.parse_driver_version_file(text) == expected


def test_banner_without_versions():
    assert gpu_facts.parse_smi_banner("") == (None, None)
    assert gpu_facts.parse_smi_banner("Driver Version: 580.159.04     CUDA Version: N/A") == ("580.159.04", None)


def test_failure_reasons_quote_what_nvidia_smi_said():
    not_loaded = fixture(FIXTURES / "failures" / "driver-not-loaded.txt")
    assert gpu_facts.failure_reason("nvidia-smi", 9, not_loaded, "") == (
        "nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running. (exit code 9)"
    )
    no_devices = fixture(FIXTURES / "failures" / "no-devices.txt")
    assert gpu_facts.failure_reason("nvidia-smi", 6, no_devices, "") == "nvidia-smi: No devices were found (exit code 6)"
    assert gpu_facts.failure_reason("nvidia-smi", 2, "", "  \nbad option\n") == "nvidia-smi: bad option (exit code 2)"
    assert gpu_facts.failure_reason("nvidia-smi topo -m", 255, "", "") == "nvidia-smi topo -m exited with code 255"


MemoryInfo = namedtuple("MemoryInfo", "total free used")
MIB = 1024 * 1024


class FakeNvml:
    """The parts of pynvml the module uses, answering from a dict per GPU index."""

    NVML_FEATURE_ENABLED = 1

    class NVMLError(Exception):
        pass

    def __init__(self, devices, init_error=False):
        self.nvmlMemory_v2 = "v2"
        self.devices = devices
        self.init_error = init_error
        self.calls = []

    def nvmlInit(self):
        self.calls.append("init")
        if self.init_error:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByIndex(self, index):
        self.calls.append("handle %d" % index)
        if index not in self.devices:
            raise self.NVMLError("Invalid Argument")
        return self.devices[index]

    def _read(self, handle, name):
        if name not in handle:
            raise self.NVMLError("Not Supported")
        return handle[name]

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._read(handle, "power_mw")

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return self._read(handle, "limit_mw")

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return self._read(handle, "default_limit_mw")

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle):
        return self._read(handle, "limit_constraints_mw")

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        self.calls.append("memory v2" if version == "v2" else "memory v1")
        return self._read(handle, "memory" if version == "v2" else "memory_v1")

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return self._read(handle, "compute_capability")

    def nvmlDeviceGetPersistenceMode(self, handle):
        return self._read(handle, "persistence")


RTX_NVML = {
    "power_mw": 34120,
    "limit_mw": 600000,
    "default_limit_mw": 600000,
    "limit_constraints_mw": [150000, 600000],
    # As NVML answered on an idle H200 (143771 MiB there): v1 counts the driver's reservation as used.
    "memory": MemoryInfo(total=97887 * MIB, free=97887 * MIB, used=0),
    "memory_v1": MemoryInfo(total=97887 * MIB, free=97272 * MIB, used=615 * MIB),
    "compute_capability": (12, 0),
    "persistence": 1,
}


def unreadable_gpu(index=0):
    return dict({key: None for key in gpu_facts.GPU_KEYS}, index=index, name="NVIDIA RTX PRO 6000 Blackwell Server Edition")


def test_nvml_fills_what_nvidia_smi_could_not_read():
    nvml = FakeNvml({0: RTX_NVML})
    (gpu,), answered = gpu_facts.fill_missing_from_nvml(nvml, [unreadable_gpu()])
    assert answered is True
    assert gpu["compute_capability"] == "12.0"
    assert gpu["memory_total_mib"] == 97887 and gpu["memory_used_mib"] == 0
    assert gpu["power_draw_w"] == 34.12
    assert (gpu["power_limit_w"], gpu["power_default_limit_w"]) == (600.0, 600.0)
    assert (gpu["power_min_limit_w"], gpu["power_max_limit_w"]) == (150.0, 600.0)
    assert gpu["persistence_mode"] is True
    assert nvml.calls[0:2] == ["init", "handle 0"] and nvml.calls[-1] == "shutdown"
    assert "memory v1" not in nvml.calls


def test_nvml_power_is_rounded_like_nvidia_smi():
    nvml = FakeNvml({0: dict(RTX_NVML, power_mw=79613)})
    (gpu,), answered = gpu_facts.fill_missing_from_nvml(nvml, [unreadable_gpu()])
    assert answered and gpu["power_draw_w"] == 79.61


def test_older_nvidia_ml_py_reads_memory_through_v1():
    nvml = FakeNvml({0: RTX_NVML})
    del nvml.nvmlMemory_v2
    (gpu,), answered = gpu_facts.fill_missing_from_nvml(nvml, [unreadable_gpu()])
    assert answered and gpu["memory_used_mib"] == 615
    assert "memory v2" not in nvml.calls


def test_nvml_never_overrides_nvidia_smi():
    gpus = gpu_facts.parse_query_gpu_csv(fixture(RTX_X8 / "query-gpu.csv"))
    nvml = FakeNvml({index: dict(RTX_NVML, power_mw=1) for index in range(8)})
    filled, answered = gpu_facts.fill_missing_from_nvml(nvml, gpus)
    assert answered and filled == gpus
    assert nvml.calls == ["init", "shutdown"]


def test_nvml_errors_leave_values_unknown():
    partial = {"power_mw": 250000}
    nvml = FakeNvml({0: partial})
    gpus = [unreadable_gpu(0), unreadable_gpu(1)]
    (first, second), answered = gpu_facts.fill_missing_from_nvml(nvml, gpus)
    assert answered is True
    assert first["power_draw_w"] == 250.0 and first["power_limit_w"] is None
    assert second == gpus[1]
    assert nvml.calls[-1] == "shutdown"


def test_nvml_that_does_not_initialise_changes_nothing():
    nvml = FakeNvml({0: RTX_NVML}, init_error=True)
    gpus = [unreadable_gpu()]
    assert gpu_facts.fill_missing_from_nvml(nvml, gpus) == (gpus, False)
    assert nvml.calls == ["init"]


def test_facts_always_carry_every_key():
    facts = gpu_facts.build_facts(reason="nvidia-smi not found on PATH")
    assert facts == {
        "nvidia_gpu_facts_reason": "nvidia-smi not found on PATH",
        "nvidia_driver_version": None,
        "nvidia_cuda_version": None,
        "nvidia_kernel_module": None,
        "nvidia_nvml_available": False,
        "nvidia_gpus": [],
        "nvidia_topology": {"interconnect": None, "matrix": {}, "affinity": {}, "p2p_read": {}, "p2p_write": {}},
        "nvidia_host_p2p": {"cmdline": None, "iommu_group_types": None, "uvm_disable_hmm": None,
                            "registry_dwords": None, "aspm_policy": None, "bridges": [], "acs": None},
    }

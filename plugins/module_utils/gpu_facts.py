# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn what nvidia-smi, NVML and the kernel module print into GPU facts.

Pure functions: they take text (or an NVML binding) and return plain data, so the
unit tests call them with real captures and no Ansible. The module
``sm120.sglang.gpu_facts`` runs the commands and hands their output here. How
power draw and limits are read, from either, is gpu_power's, which
serving_benchmark's sampler reads them through too.
"""

from __future__ import annotations

import csv
import re

from ansible_collections.sm120.sglang.plugins.module_utils.gpu_p2p import build_host_p2p
from ansible_collections.sm120.sglang.plugins.module_utils.gpu_power import (
    nvidia_smi_query_argv,
    nvml_power_default_limit_w,
    nvml_power_draw_w,
    nvml_power_limit_range_w,
    nvml_power_limit_w,
    parse_watts,
    unavailable,
)

MIB = 1024 * 1024


def _enabled_to_bool(value):
    if value not in ("Enabled", "Disabled"):
        raise ValueError("expected Enabled or Disabled, got %r" % value)
    return value == "Enabled"


# nvidia-smi query field -> (fact key, conversion of its nounits text).
_QUERY_GPU_COLUMNS = {
    "index": ("index", int),
    "name": ("name", str),
    "uuid": ("uuid", str),
    "pci.bus_id": ("pci_bus_id", str),
    "compute_cap": ("compute_capability", str),
    "driver_version": ("driver_version", str),
    "memory.total": ("memory_total_mib", int),
    "memory.used": ("memory_used_mib", int),
    "power.draw": ("power_draw_w", parse_watts),
    "power.limit": ("power_limit_w", parse_watts),
    "power.default_limit": ("power_default_limit_w", parse_watts),
    "power.min_limit": ("power_min_limit_w", parse_watts),
    "power.max_limit": ("power_max_limit_w", parse_watts),
    "persistence_mode": ("persistence_mode", _enabled_to_bool),
}

# What the module asks for, in this order: every key of an nvidia_gpus entry.
QUERY_GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "compute_cap",
    "memory.total",
    "memory.used",
    "power.draw",
    "power.limit",
    "power.default_limit",
    "power.min_limit",
    "power.max_limit",
    "persistence_mode",
)

GPU_KEYS = tuple(_QUERY_GPU_COLUMNS[field][0] for field in QUERY_GPU_FIELDS)

# Between the device columns and the affinity columns of `nvidia-smi topo -m`.
_TOPO_AFFINITY_KEYS = {
    "CPU Affinity": "cpu_affinity",
    "NUMA Affinity": "numa_affinity",
    "GPU NUMA ID": "gpu_numa_id",
}

# The header line of `topo -m` is underlined with ANSI codes even when stdout is a pipe.
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_NVLINK = re.compile(r"NV\d+")
_GPU_LABEL = re.compile(r"GPU\d+")


def query_gpu_argv(nvidia_smi, fields=QUERY_GPU_FIELDS):
    """The nvidia-smi command line that prints one CSV row per GPU."""
    return nvidia_smi_query_argv(nvidia_smi, fields)


def topology_argv(nvidia_smi):
    """The nvidia-smi command line that prints the GPU link matrix."""
    return [nvidia_smi, "topo", "-m"]


def parse_query_gpu_csv(text, fields=QUERY_GPU_FIELDS):
    """GPUs from ``--query-gpu=FIELDS --format=csv,noheader,nounits`` output.

    One dict per row, keyed by fact name; a value nvidia-smi cannot read is None.
    Raises ValueError on a row that does not fit the fields asked for.
    """
    gpus = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row:
            continue
        if len(row) != len(fields):
            raise ValueError("expected %d columns (%s), got %d: %r" % (len(fields), ",".join(fields), len(row), row))
        gpu = {}
        for field, raw in zip(fields, row):
            key, convert = _QUERY_GPU_COLUMNS[field]
            value = raw.strip()
            try:
                gpu[key] = None if unavailable(value) else convert(value)
            except ValueError as exc:
                raise ValueError("column %s: %s" % (field, exc)) from exc
        gpus.append(gpu)
    return gpus


def parse_smi_banner(text):
    """(driver version, CUDA version) from the header box of plain ``nvidia-smi``."""
    driver = re.search(r"Driver Version:\s*(\S+)", text)
    cuda = re.search(r"CUDA Version:\s*(\S+)", text)
    return (
        driver.group(1) if driver and not unavailable(driver.group(1)) else None,
        cuda.group(1) if cuda and not unavailable(cuda.group(1)) else None,
    )


def parse_driver_version_file(text):
    """(kernel module flavour, version) from /proc/driver/nvidia/version.

    The flavour is ``open`` for the open GPU kernel modules, whose banner says
    "Open Kernel Module", ``proprietary`` for the closed ones; None when unknown.
    """
    banner = next((line for line in (text or "").splitlines() if line.startswith("NVRM version:")), "")
    if "Open Kernel Module" in banner:
        flavour = "open"
    elif "Kernel Module" in banner:
        flavour = "proprietary"
    else:
        flavour = None
    version = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", banner)
    return flavour, version.group(1) if version else None


def failure_reason(command, rc, stdout, stderr):
    """One line that says why a command gave no usable output."""
    said = next((line.strip() for line in (stdout + "\n" + stderr).splitlines() if line.strip()), "")
    if said:
        return "%s: %s (exit code %d)" % (command, said, rc)
    return "%s exited with code %d" % (command, rc)


def _split_topo_line(line):
    return [cell.strip() for cell in _ANSI_ESCAPE.sub("", line).split("\t")]


def parse_topology(text):
    """GPU link matrix and affinity from ``nvidia-smi topo -m`` output.

    Returns ``{"matrix": {"GPU0": {"GPU1": "NV18", ...}}, "affinity": {"GPU0": {...}}}``.
    Only GPU-to-GPU links are kept; NIC rows and columns and the legend are skipped.
    Raises ValueError when no header with GPU columns is found.
    """
    lines = text.splitlines()
    header_at = next((i for i, line in enumerate(lines) if "GPU0" in _ANSI_ESCAPE.sub("", line)), None)
    if header_at is None:
        raise ValueError("no header line with GPU0 in nvidia-smi topo -m output")
    header = [name for name in _split_topo_line(lines[header_at]) if name]
    devices = [name for name in header if name not in _TOPO_AFFINITY_KEYS]
    affinity_keys = [_TOPO_AFFINITY_KEYS[name] for name in header if name in _TOPO_AFFINITY_KEYS]
    gpus = [name for name in devices if _GPU_LABEL.fullmatch(name)]

    matrix, affinity = {}, {}
    for line in lines[header_at + 1:]:
        cells = _split_topo_line(line)
        if not cells[0]:
            break  # the blank line before "Legend:"
        if cells[0] not in gpus:
            continue
        links = dict(zip(devices, cells[1:1 + len(devices)]))
        matrix[cells[0]] = {peer: links[peer] for peer in gpus if peer != cells[0] and peer in links}
        # nvidia-smi pads before "GPU NUMA ID" with an extra tab: skip empty cells.
        values = [cell for cell in cells[1 + len(devices):] if cell]
        affinity[cells[0]] = {key: (None if unavailable(value) else value) for key, value in zip(affinity_keys, values)}
    return {"matrix": matrix, "affinity": affinity}


def classify_interconnect(gpu_count, matrix):
    """``single``, ``nvlink`` (every GPU pair over NVLink), ``pcie`` (none), ``mixed``; None if unknown."""
    if gpu_count == 1:
        return "single"
    links = [link for peers in matrix.values() for link in peers.values()]
    if gpu_count == 0 or not links:
        return None
    over_nvlink = [bool(_NVLINK.fullmatch(link)) for link in links]
    if all(over_nvlink):
        return "nvlink"
    if not any(over_nvlink):
        return "pcie"
    return "mixed"


def build_topology(gpu_count, parsed=None):
    """The ``nvidia_topology`` fact from parse_topology's result, or without one when topo -m was not read."""
    parsed = parsed or {"matrix": {}, "affinity": {}}
    return {
        "interconnect": classify_interconnect(gpu_count, parsed["matrix"]),
        "matrix": parsed["matrix"],
        "affinity": parsed["affinity"],
        # nvidia-smi topo -p2p r / w, filled in by the module where it read them.
        "p2p_read": {},
        "p2p_write": {},
    }


def _nvml_memory(nvml, handle):
    # nvidia-smi's "used" leaves out what the driver reserves, as NVML's v2 struct does; the v1 struct counts it
    # (615 MiB used on an idle H200 where nvidia-smi says 0). Older nvidia-ml-py has only v1.
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is None:
        return nvml.nvmlDeviceGetMemoryInfo(handle)
    return nvml.nvmlDeviceGetMemoryInfo(handle, version=version)


def _as_nvidia_smi_prints(watts):
    # Facts are the same figures whichever tool read them: nvidia-smi prints watts to two decimals.
    return round(watts, 2)


# fact key -> how to read it from NVML for one device handle.
_NVML_READERS = {
    "compute_capability": lambda nvml, handle: "%d.%d" % tuple(nvml.nvmlDeviceGetCudaComputeCapability(handle)),
    "memory_total_mib": lambda nvml, handle: _nvml_memory(nvml, handle).total // MIB,
    "memory_used_mib": lambda nvml, handle: _nvml_memory(nvml, handle).used // MIB,
    "power_draw_w": lambda nvml, handle: _as_nvidia_smi_prints(nvml_power_draw_w(nvml, handle)),
    "power_limit_w": lambda nvml, handle: _as_nvidia_smi_prints(nvml_power_limit_w(nvml, handle)),
    "power_default_limit_w": lambda nvml, handle: _as_nvidia_smi_prints(nvml_power_default_limit_w(nvml, handle)),
    "power_min_limit_w": lambda nvml, handle: _as_nvidia_smi_prints(nvml_power_limit_range_w(nvml, handle)[0]),
    "power_max_limit_w": lambda nvml, handle: _as_nvidia_smi_prints(nvml_power_limit_range_w(nvml, handle)[1]),
    "persistence_mode": lambda nvml, handle: nvml.nvmlDeviceGetPersistenceMode(handle) == nvml.NVML_FEATURE_ENABLED,
}


def _fill_gpu_from_nvml(nvml, gpu):
    missing = [key for key in _NVML_READERS if gpu.get(key) is None]
    if not missing:
        return gpu
    filled = dict(gpu)
    try:
        # nvidia-smi numbers GPUs the way NVML enumerates them.
        handle = nvml.nvmlDeviceGetHandleByIndex(gpu["index"])
    except nvml.NVMLError:
        return filled
    for key in missing:
        try:
            filled[key] = _NVML_READERS[key](nvml, handle)
        except nvml.NVMLError:
            continue
    return filled


def fill_missing_from_nvml(nvml, gpus):
    """(gpus with the values nvidia-smi left null read from NVML, whether NVML answered).

    ``nvml`` is the ``pynvml`` module of nvidia-ml-py. NVML errors never raise:
    a value NVML cannot read stays None.
    """
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return list(gpus), False
    try:
        return [_fill_gpu_from_nvml(nvml, gpu) for gpu in gpus], True
    finally:
        nvml.nvmlShutdown()


def build_facts(
    reason=None,
    driver_version=None,
    cuda_version=None,
    kernel_module=None,
    gpus=(),
    topology=None,
    nvml_available=False,
    host_p2p=None,
):
    """All ``ansible_facts`` keys of the module, every one always present."""
    gpus = list(gpus)
    return {
        "nvidia_gpu_facts_reason": reason,
        "nvidia_driver_version": driver_version,
        "nvidia_cuda_version": cuda_version,
        "nvidia_kernel_module": kernel_module,
        "nvidia_nvml_available": nvml_available,
        "nvidia_gpus": gpus,
        "nvidia_topology": topology if topology is not None else build_topology(len(gpus)),
        # Read only where GPUs answered: what decides their P2P (module_utils/gpu_p2p.py).
        "nvidia_host_p2p": host_p2p if host_p2p is not None else build_host_p2p(),
    }

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn what the host says about GPU peer-to-peer into facts: pure parsers of captured text.

What decides whether eight PCIe GPUs can talk is partly the GPUs' (BAR1 size, the P2P
capability nvidia-smi reports) and partly the host's (IOMMU, ACS on the bridges between
the GPUs, nvidia_uvm's HMM, the driver's registry dwords, PCIe power management on the
kernel command line). The module ``sm120.sglang.gpu_facts`` reads each source and hands
its text here; the preflight's verdicts on them are ``plugin_utils/p2p_prerequisites.py``.
Each parser takes text and returns plain data, None for a source that was not read.
"""

from __future__ import annotations

import re

from ansible_collections.sm120.sglang.plugins.module_utils.gpu_power import unavailable

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_GPU_LABEL = re.compile(r"GPU\d+")
_BDF = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_MIB = re.compile(r"^(\d+)\s*MiB$")

# The files the module reads on the host, beside nvidia-smi.
PROC_CMDLINE = "/proc/cmdline"
IOMMU_GROUPS = "/sys/kernel/iommu_groups"
UVM_DISABLE_HMM = "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm"
NVIDIA_PARAMS = "/proc/driver/nvidia/params"
ASPM_POLICY = "/sys/module/pcie_aspm/parameters/policy"
PCI_DEVICES = "/sys/bus/pci/devices"

# What the module adds to every nvidia_gpus entry.
P2P_GPU_KEYS = ("bar1_total_mib", "numa_node", "pcie_path")


def p2p_argv(nvidia_smi, capability):
    """``nvidia-smi topo -p2p r`` (read) or ``w`` (write): the capability matrix between every GPU pair."""
    if capability not in ("r", "w"):
        raise ValueError("P2P capability is r (read) or w (write), not %r" % capability)
    return [nvidia_smi, "topo", "-p2p", capability]


def memory_argv(nvidia_smi):
    """``nvidia-smi -q -d MEMORY``: per GPU, FB and BAR1 memory."""
    return [nvidia_smi, "-q", "-d", "MEMORY"]


def normalize_bdf(text):
    """``0000:23:00.0`` from nvidia-smi's ``00000000:23:00.0``, lspci's ``23:00.0`` or sysfs's name."""
    found = _BDF.match((text or "").strip())
    if not found:
        raise ValueError("not a PCI address (domain:bus:device.function): %r" % text)
    domain, bus, device, function = found.groups()
    return "%04x:%s:%s.%s" % (int(domain or "0", 16), bus.lower(), device.lower(), function)


def parse_p2p_matrix(text):
    """``{"GPU0": {"GPU1": "OK", ...}}`` from ``nvidia-smi topo -p2p r|w``.

    Cells are nvidia-smi's legend codes: OK, CNS (chipset not supported), GNS (GPU not
    supported), TNS (topology not supported), NS (not supported), DR (disabled by regkey),
    U (unknown). Raises ValueError when no header line with GPU0 is found.
    """
    lines = [_ANSI_ESCAPE.sub("", line) for line in (text or "").splitlines()]
    header_at = next((i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"] or
                      (line.split() and all(_GPU_LABEL.fullmatch(cell) for cell in line.split()))), None)
    if header_at is None:
        raise ValueError("no header line of GPU columns in nvidia-smi topo -p2p output")
    gpus = lines[header_at].split()
    matrix = {}
    for line in lines[header_at + 1:]:
        cells = line.split()
        if not cells or not _GPU_LABEL.fullmatch(cells[0]):
            break  # the blank line before "Legend:"
        if len(cells) != len(gpus) + 1:
            raise ValueError("row %s has %d cells for %d GPUs: %r" % (cells[0], len(cells) - 1, len(gpus), line))
        matrix[cells[0]] = {peer: cell for peer, cell in zip(gpus, cells[1:]) if peer != cells[0]}
    if not matrix:
        raise ValueError("no GPU rows in nvidia-smi topo -p2p output")
    return matrix


def parse_bar1_total(text):
    """``{"0000:17:00.0": 98304}``: each GPU's BAR1 total in MiB from ``nvidia-smi -q`` (or ``-q -d MEMORY``).

    A total nvidia-smi prints as N/A is None. Raises ValueError when no GPU section is found.
    """
    totals, gpu, section = {}, None, None
    for line in (text or "").splitlines():
        indent = len(line) - len(line.lstrip(" "))
        stripped = line.strip()
        if indent == 0 and re.match(r"^GPU [0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$", stripped):
            gpu, section = normalize_bdf(stripped.split()[1]), None
            totals[gpu] = None
        elif gpu is not None and indent == 4:
            section = stripped
        elif gpu is not None and indent == 8 and section == "BAR1 Memory Usage":
            key, _sep, value = stripped.partition(":")
            if key.strip() == "Total":
                mib = _MIB.match(value.strip())
                totals[gpu] = int(mib.group(1)) if mib else None
    if not totals:
        raise ValueError("no GPU section (GPU 00000000:BB:DD.F) in nvidia-smi -q output")
    return totals


def parse_pci_path(realpath):
    """The PCI addresses from the root port down to the device, from the sysfs path of the device.

    ``/sys/devices/pci0000:20/0000:20:01.1/0000:21:00.0/0000:22:00.0/0000:23:00.0`` gives
    ``["0000:20:01.1", "0000:21:00.0", "0000:22:00.0", "0000:23:00.0"]``: the root port,
    a switch's upstream and downstream port, the GPU. The host bridge (``pci0000:20``) is left out.
    """
    path = []
    for part in (realpath or "").split("/"):
        try:
            path.append(normalize_bdf(part))
        except ValueError:
            continue
    return path


def parse_cmdline(text):
    """The kernel command line's parameters, in order; None when it was not read."""
    if text is None:
        return None
    return text.split()


def parse_iommu_group_types(text):
    """``{"0": "identity", "1": "DMA-FQ"}`` from ``grep . /sys/kernel/iommu_groups/*/type``.

    Empty when the IOMMU is off (no groups); None when the directory was not read. A group
    whose type file is missing (older kernels) is ``None``.
    """
    if text is None:
        return None
    types = {}
    for line in text.splitlines():
        found = re.match(r"^.*/iommu_groups/(\d+)(?:/type:(.*))?$", line.strip())
        if found:
            types[found.group(1)] = found.group(2).strip() if found.group(2) else None
    return types


def parse_module_bool(text):
    """A kernel module's bool parameter as sysfs prints it (``Y``/``N``, or ``1``/``0``); None when unread."""
    if text is None:
        return None
    value = text.strip()
    if value in ("Y", "1"):
        return True
    if value in ("N", "0"):
        return False
    raise ValueError("expected Y, N, 1 or 0 for a module parameter, got %r" % value)


def parse_nvidia_params(text):
    """``/proc/driver/nvidia/params`` as a dict, ``Key: value`` per line, the quotes of strings removed."""
    if text is None:
        return None
    params = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            params[key.strip()] = value.strip().strip('"')
    return params


def parse_registry_dwords(params):
    """``{"ForceP2P": "0x11", ...}`` from the RegistryDwords entry of parse_nvidia_params; None when unread."""
    if params is None:
        return None
    dwords = {}
    for entry in (params.get("RegistryDwords") or "").split(";"):
        key, sep, value = entry.partition("=")
        if sep and key.strip():
            dwords[key.strip()] = value.strip()
    return dwords


def parse_aspm_policy(text):
    """The active ASPM policy, the bracketed word of ``/sys/module/pcie_aspm/parameters/policy``; None if unread."""
    if text is None:
        return None
    found = re.search(r"\[(\w+)\]", text)
    return found.group(1) if found else None


def parse_lspci_acs(text):
    """``{"0000:20:01.1": {"ReqRedir": True, "CmpltRedir": True, ...}}``: ACSCtl of every device that has one.

    From ``lspci -vvv`` (run as root: without, lspci prints no capabilities). Devices
    without an Access Control Services capability are left out.
    """
    acs = {}
    device = None
    for line in (text or "").splitlines():
        if line and not line[0].isspace():
            head = line.split(" ", 1)[0]
            try:
                device = normalize_bdf(head)
            except ValueError:
                device = None
            continue
        stripped = line.strip()
        if device and stripped.startswith("ACSCtl:"):
            flags = {}
            for flag in stripped[len("ACSCtl:"):].split():
                if flag[-1:] in "+-":
                    flags[flag[:-1]] = flag[-1] == "+"
            acs[device] = flags
    return acs


def gpu_bridges(gpus):
    """Every bridge on a GPU's PCI path (root ports, switch ports), in order, each once."""
    bridges = []
    for gpu in gpus:
        for bdf in (gpu.get("pcie_path") or [])[:-1]:
            if bdf not in bridges:
                bridges.append(bdf)
    return bridges


def numa_node(affinity, gpu_index):
    """The GPU's NUMA node as an int from topo -m's NUMA Affinity; None when N/A or several."""
    value = (affinity.get("GPU%s" % gpu_index) or {}).get("numa_affinity")
    if value is None or unavailable(str(value)) or not str(value).strip().isdigit():
        return None
    return int(value)


def build_host_p2p(cmdline=None, iommu_group_types=None, uvm_disable_hmm=None, nvidia_params=None,
                   aspm_policy=None, acs=None, bridges=()):
    """The ``nvidia_host_p2p`` fact: each key None where its source could not be read.

    ``acs`` holds only the bridges on the GPUs' paths; a bridge lspci showed no ACS
    capability for is left out (it cannot redirect).
    """
    return {
        "cmdline": cmdline,
        "iommu_group_types": iommu_group_types,
        "uvm_disable_hmm": uvm_disable_hmm,
        "registry_dwords": parse_registry_dwords(nvidia_params),
        "aspm_policy": aspm_policy,
        "bridges": list(bridges),
        "acs": None if acs is None else {bdf: acs[bdf] for bdf in bridges if bdf in acs},
    }

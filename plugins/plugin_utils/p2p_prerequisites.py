# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Can the host's GPUs talk peer to peer? Each prerequisite's verdict from the gpu_facts, pure.

In: the facts of sm120.sglang.gpu_facts (nvidia_gpus, nvidia_topology, nvidia_host_p2p) and
what the run expects (the tensor-parallel size, the kernel parameters the driver phase writes).
Out: one check per prerequisite of data/p2p_prerequisites.yml, each ``met``, ``not met`` or
``unknown`` with what was found; and the messages the preflight shows or fails with. A source
gpu_facts could not read is ``unknown``, never ``met``.
"""

from __future__ import annotations

import os

from ansible_collections.sm120.sglang.plugins.plugin_utils.data_files import read_checked

DATA_PATH = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "data", "p2p_prerequisites.yml"))

MET, NOT_MET, UNKNOWN = "met", "not met", "unknown"
SET_BY = ("collection", "operator", "bios")
MODES = ("warn", "require", "skip")
ASPM_PARAMETERS = ("pcie_aspm=off", "pcie_port_pm=off")
# ACSCtl flags that send peer-to-peer requests or completions up to the root instead of across.
ACS_REDIRECTS = ("ReqRedir", "CmpltRedir")
TRANSLATING = ("DMA", "DMA-FQ")


class PrerequisiteError(ValueError):
    pass


def _check_data(data):
    if not isinstance(data, dict) or not data:
        raise PrerequisiteError("data/p2p_prerequisites.yml must map each prerequisite to its entry")
    for name, entry in data.items():
        for key in ("title", "set_by", "setting", "reboot", "cost"):
            if not isinstance(entry, dict) or key not in entry:
                raise PrerequisiteError("data/p2p_prerequisites.yml: %s has no %s" % (name, key))
        if entry["set_by"] not in SET_BY:
            raise PrerequisiteError("data/p2p_prerequisites.yml: %s set_by is %r, not one of %s"
                                    % (name, entry["set_by"], ", ".join(SET_BY)))
        if entry["set_by"] == "collection" and not entry.get("variable"):
            raise PrerequisiteError("data/p2p_prerequisites.yml: %s is set by the collection but names no variable" % name)
    missing = [name for name in CHECKS if name not in data]
    if missing:
        raise PrerequisiteError("data/p2p_prerequisites.yml has no entry for %s" % ", ".join(missing))
    return data


def load(path=DATA_PATH):
    return read_checked(path, _check_data, PrerequisiteError, "P2P prerequisites")


def tp_groups(gpu_count, tp_size):
    """The GPU indices of each tensor-parallel group: consecutive, as SGLang hands them out from GPU 0."""
    tp_size = int(tp_size)
    if tp_size < 1:
        raise PrerequisiteError("the tensor-parallel size must be 1 or more, not %d" % tp_size)
    if tp_size >= gpu_count:
        return [list(range(gpu_count))]
    return [list(range(start, start + tp_size)) for start in range(0, gpu_count - tp_size + 1, tp_size)]


def _pairs(groups):
    return [(i, j) for group in groups for i in group for j in group if i < j]


def _verdict(verdict, found):
    return {"verdict": verdict, "found": found}


def _p2p_capability(gpus, topology, host, expected):
    if int(expected["tp_size"]) < 2:
        return _verdict(MET, "TP %d: no GPU pair to talk" % int(expected["tp_size"]))
    pairs = _pairs(tp_groups(len(gpus), expected["tp_size"]))
    read, write = topology.get("p2p_read") or {}, topology.get("p2p_write") or {}
    if not read or not write:
        return _verdict(UNKNOWN, "nvidia-smi topo -p2p %s not read" % "/".join(
            name for name, matrix in (("r", read), ("w", write)) if not matrix))
    bad, unknown = [], []
    for i, j in pairs:
        cells = [(matrix.get("GPU%d" % i) or {}).get("GPU%d" % j) for matrix in (read, write)]
        if None in cells:
            unknown.append("GPU%d-GPU%d" % (i, j))
        elif cells != ["OK", "OK"]:
            bad.append("GPU%d-GPU%d read %s write %s" % (i, j, cells[0], cells[1]))
    if bad:
        return _verdict(NOT_MET, "no P2P between %s" % ", ".join(bad))
    if unknown:
        return _verdict(UNKNOWN, "nvidia-smi topo -p2p does not list %s" % ", ".join(unknown))
    return _verdict(MET, "OK both ways between all %d pairs of the TP groups" % len(pairs))


def _iommu(gpus, topology, host, expected):
    types = host.get("iommu_group_types")
    if types is None:
        return _verdict(UNKNOWN, "/sys/kernel/iommu_groups not read")
    if not types:
        return _verdict(MET, "IOMMU off (no IOMMU groups)")
    translating = sorted({kind for kind in types.values() if kind in TRANSLATING})
    if translating:
        count = sum(1 for kind in types.values() if kind in TRANSLATING)
        return _verdict(NOT_MET, "%d of %d IOMMU groups translate (%s)" % (count, len(types), ", ".join(translating)))
    if None in types.values():
        return _verdict(UNKNOWN, "%d IOMMU groups without a type file (kernel too old to say)" % len(types))
    return _verdict(MET, "IOMMU passthrough (identity) in all %d groups" % len(types))


def _acs(gpus, topology, host, expected):
    bridges, acs = host.get("bridges") or [], host.get("acs")
    if not bridges:
        return _verdict(UNKNOWN, "the GPUs' PCI paths were not read (/sys/bus/pci/devices)")
    if acs is None:
        return _verdict(UNKNOWN, "ACSCtl of the GPUs' %d bridges not read (lspci -vvv as root)" % len(bridges))
    redirecting = [bdf for bdf, flags in sorted(acs.items()) if any(flags.get(flag) for flag in ACS_REDIRECTS)]
    if redirecting:
        return _verdict(NOT_MET, "ReqRedir/CmpltRedir on %d of the GPUs' bridges: %s"
                        % (len(redirecting), ", ".join(redirecting)))
    return _verdict(MET, "no redirect on the %d bridges with ACS of the %d on the GPUs' paths" % (len(acs), len(bridges)))


def _uvm_hmm(gpus, topology, host, expected):
    disabled = host.get("uvm_disable_hmm")
    if disabled is None:
        return _verdict(UNKNOWN, "nvidia_uvm not loaded, uvm_disable_hmm not read")
    return _verdict(MET, "uvm_disable_hmm=Y") if disabled else _verdict(NOT_MET, "uvm_disable_hmm=N: HMM on")


def _bar1(gpus, topology, host, expected):
    small, unknown = [], []
    for gpu in gpus:
        bar1, memory = gpu.get("bar1_total_mib"), gpu.get("memory_total_mib")
        if bar1 is None or memory is None:
            unknown.append("GPU%s" % gpu.get("index"))
        elif int(bar1) < int(memory):
            small.append("GPU%s %s MiB for %s MiB of memory" % (gpu.get("index"), bar1, memory))
    if small:
        return _verdict(NOT_MET, "BAR1 smaller than the GPU's memory: %s" % "; ".join(small))
    if unknown:
        return _verdict(UNKNOWN, "BAR1 or memory size not read for %s" % ", ".join(unknown))
    return _verdict(MET, "BAR1 %s MiB" % "/".join(sorted({str(gpu["bar1_total_mib"]) for gpu in gpus})))


def _pcie_power_management(gpus, topology, host, expected):
    cmdline = host.get("cmdline")
    if cmdline is None:
        return _verdict(UNKNOWN, "/proc/cmdline not read")
    missing = [parameter for parameter in ASPM_PARAMETERS if parameter not in cmdline]
    if missing:
        return _verdict(NOT_MET, "%s not on the kernel command line (ASPM policy %s)"
                        % (" ".join(missing), host.get("aspm_policy") or "unknown"))
    return _verdict(MET, "pcie_aspm=off pcie_port_pm=off active")


def _force_p2p(gpus, topology, host, expected):
    if int(expected["tp_size"]) < 2:
        return _verdict(MET, "TP %d: not needed" % int(expected["tp_size"]))
    matrix = topology.get("matrix") or {}
    links = [(matrix.get("GPU%d" % i) or {}).get("GPU%d" % j) for i, j in _pairs(tp_groups(len(gpus), expected["tp_size"]))]
    if not links or None in links:
        return _verdict(UNKNOWN, "the GPU links (nvidia-smi topo -m) not read")
    if "NODE" not in links:
        return _verdict(MET, "not needed: no pair of a TP group meets only at a host bridge (NODE)")
    dwords = host.get("registry_dwords")
    if dwords is None:
        return _verdict(UNKNOWN, "NODE pairs in a TP group, /proc/driver/nvidia/params not read")
    if "ForceP2P" in dwords:
        return _verdict(MET, "ForceP2P=%s for the NODE pairs" % dwords["ForceP2P"])
    return _verdict(NOT_MET, "%d NODE pairs in a TP group and no ForceP2P in RegistryDwords" % links.count("NODE"))


def _kernel_command_line(gpus, topology, host, expected):
    wanted = list(expected.get("kernel_parameters") or [])
    if not wanted:
        return _verdict(MET, "no kernel parameter expected")
    cmdline = host.get("cmdline")
    if cmdline is None:
        return _verdict(UNKNOWN, "/proc/cmdline not read")
    missing = [parameter for parameter in wanted if parameter not in cmdline]
    if missing:
        return _verdict(NOT_MET, "%s not active (reboot pending, or written for another boot entry)" % " ".join(missing))
    return _verdict(MET, "%s active" % " ".join(wanted))


CHECKS = {
    "p2p_capability": _p2p_capability,
    "iommu": _iommu,
    "acs": _acs,
    "uvm_hmm": _uvm_hmm,
    "bar1": _bar1,
    "pcie_power_management": _pcie_power_management,
    "force_p2p": _force_p2p,
    "kernel_command_line": _kernel_command_line,
}


def checks(facts, expected, data=None):
    """One dict per prerequisite, in CHECKS' order: its data entry, ``name``, ``verdict`` and ``found``.

    ``expected``: ``tp_size`` and ``kernel_parameters`` (what the driver phase writes). Without GPUs
    every verdict is unknown.
    """
    data = data if data is not None else load()
    gpus = facts.get("nvidia_gpus") or []
    topology = facts.get("nvidia_topology") or {}
    host = facts.get("nvidia_host_p2p") or {}
    results = []
    for name, check in CHECKS.items():
        if gpus:
            verdict = check(gpus, topology, host, expected)
        else:
            verdict = _verdict(UNKNOWN, "no GPU answers (%s)" % (facts.get("nvidia_gpu_facts_reason") or "no facts"))
        results.append(dict(data[name], name=name, **verdict))
    return results


def _who(check):
    if check["set_by"] == "collection":
        return "the collection sets it (%s)%s" % (check["variable"], ", effective after a reboot" if check["reboot"] else "")
    if check["set_by"] == "bios":
        return "only the BIOS can"
    return "the collection only checks it; set it yourself%s" % (", then reboot" if check["reboot"] else "")


def fix(check):
    """What one not-met check needs: found, the setting, who can set it, and the cost of leaving it."""
    return "%s: %s. Fix: %s (%s). Cost of leaving it: %s." % (
        check["title"], check["found"], check["setting"], _who(check), check["cost"])


def fixes_message(results):
    """Every not-met prerequisite's fix in one message; None when all are met or unknown."""
    missing = [check for check in results if check["verdict"] == NOT_MET]
    if not missing:
        return None
    return "P2P prerequisites not met (%d): %s" % (
        len(missing), " ".join("(%d) %s" % (number, fix(check)) for number, check in enumerate(missing, 1)))


def unknowns_message(results):
    """What the preflight cannot judge, in one message; None when it can judge everything."""
    unknown = [check for check in results if check["verdict"] == UNKNOWN]
    if not unknown:
        return None
    return "P2P prerequisites this host cannot be judged on (%d): %s. Fix: run the preflight as root on a host whose " \
           "driver answers (lspci from pciutils installed, nvidia_uvm loaded)." % (
               len(unknown), "; ".join("%s: %s" % (check["title"], check["found"]) for check in unknown))


def refusal(results, tp_size):
    """The message that refuses a TP >= 2 start on GPUs that report no P2P within a TP group; None otherwise."""
    capability = next(check for check in results if check["name"] == "p2p_capability")
    if int(tp_size) < 2 or capability["verdict"] != NOT_MET:
        return None
    others = [check for check in results if check["verdict"] == NOT_MET and check["name"] != "p2p_capability"]
    return ("Refused before the server start: the profile runs TP %d and %s, so NCCL would hang or crawl after a 7-8 "
            "minute start. Fix the host first%s" % (
                int(tp_size), capability["found"],
                ": " + " ".join("(%d) %s" % (number, fix(check)) for number, check in enumerate(others, 1)) if others
                else ": " + fix(capability)))


def problems(facts, expected, mode="warn", data=None):
    """The messages the preflight fails with: ``skip`` none; ``warn`` only the refusal; ``require`` also every
    prerequisite not met and every one that cannot be judged."""
    if mode not in MODES:
        raise PrerequisiteError("preflight_p2p_prerequisites is %r; it is one of %s" % (mode, ", ".join(MODES)))
    if mode == "skip":
        return []
    results = checks(facts, expected, data)
    found = [refusal(results, expected["tp_size"])]
    if mode == "require":
        found += [fixes_message(results), unknowns_message(results)]
        if found[0]:
            found[1] = None  # the refusal names every fix already
    return [message for message in found if message]


def warnings(facts, expected, mode="warn", data=None):
    """What ``warn`` shows without failing: the fixes and what cannot be judged (never a silent pass)."""
    if mode != "warn":
        return []
    results = checks(facts, expected, data)
    if refusal(results, expected["tp_size"]):
        return [unknowns_message(results)] if unknowns_message(results) else []
    return [message for message in (fixes_message(results), unknowns_message(results)) if message]


def summary(facts, expected, data=None):
    """One line per prerequisite: its verdict and what was found."""
    return ["P2P %s: %s (%s)" % (check["name"], check["verdict"], check["found"]) for check in checks(facts, expected, data)]


def nccl_p2p_level(gpus, tp_size):
    """NCCL_P2P_LEVEL for the host: SYS where a TP group spans NUMA nodes, PHB where none does; "" when unknown.

    PHB keeps cross-socket pairs off P2P (NCCL uses shared memory there); every 8-GPU recipe on two-socket hosts
    sets SYS (rtx6kpro asus-esc8000a-e13p: 30.3 to 39.3 GB/s allreduce bus bandwidth at 4 GPUs).
    """
    gpus = list(gpus or [])
    if not gpus:
        return ""
    nodes = {gpu.get("index"): gpu.get("numa_node") for gpu in gpus}
    spans = False
    for group in tp_groups(len(gpus), tp_size):
        group_nodes = {nodes.get(index) for index in group}
        if None in group_nodes:
            return ""
        spans = spans or len(group_nodes) > 1
    return "SYS" if spans else "PHB"

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is a GPU host what the inventory says it is? The preflight role's one decision, pure.

In: the host's gpu_facts, the NVIDIA GPUs counted on the PCI bus (for a host whose
driver does not answer yet) and the expectations; out: one message per mismatch,
each saying what was expected (and which variable says so), what was found, and the fix.
"""

from __future__ import annotations

import re

DRIVER_MISSING = re.compile(r"not found|couldn't communicate with the NVIDIA driver")


def driver_missing(facts):
    """No GPU listed because there is no driver (or no nvidia-smi) yet, as on a bare host."""
    return not facts.get("nvidia_gpus") and bool(DRIVER_MISSING.search(facts.get("nvidia_gpu_facts_reason") or ""))


def driver_branch(version):
    """580 of 580.159.04; None when unknown."""
    found = re.match(r"^\s*(\d+)\.", str(version or ""))
    return int(found.group(1)) if found else None


def _gpu(gpu):
    return "GPU %s %s" % (gpu.get("index"), gpu.get("name"))


def architecture_problem(gpus, capability, variable="preflight_compute_capability"):
    """The GPUs whose compute capability is not ``capability``, as one message naming ``variable``; None when none.

    The preflight's check, and the driver role's after its install (gpu_driver_expected_compute_capability).
    """
    capability = str(capability)
    wrong = [gpu for gpu in gpus or [] if str(gpu.get("compute_capability")) != capability]
    if not wrong:
        return None
    return ("Expected compute capability %s (%s) on every GPU, found %s. Fix: this collection deploys for SM120 (RTX "
            "PRO 6000 Blackwell); take the host out of gpu_hosts, or set %s if it is meant to run these GPUs."
            % (capability, variable, "; ".join("%s with %s" % (_gpu(gpu), gpu.get("compute_capability")) for gpu in wrong),
               variable))


def problems(facts, expected, pci_gpus=None):
    """Every way the host differs from ``expected``; empty when it is what the inventory says.

    ``expected``: gpu_count, compute_capability, min_memory_mib, interconnect ("" skips),
    require_driver, and min_driver_branch with release (the SGLang release whose CUDA
    build sets it; None skips).
    """
    gpus = facts.get("nvidia_gpus") or []
    reason = facts.get("nvidia_gpu_facts_reason") or ""
    count = int(expected["gpu_count"])
    found = []
    if driver_missing(facts):
        if expected.get("require_driver"):
            return ["The NVIDIA driver does not answer (%s) and preflight_require_driver is true. Fix: run the driver "
                    "phase first (ansible-playbook playbooks/deploy.yml --tags driver)." % reason]
        pci_gpus = list(pci_gpus or [])
        if len(pci_gpus) != count:
            found.append("Expected %d GPUs (preflight_gpu_count), found %d NVIDIA GPUs on the PCI bus%s; the driver does "
                         "not answer yet (%s). Fix: seat or power the missing GPUs (lspci -d 10de:), or set "
                         "preflight_gpu_count for this host in the inventory."
                         % (count, len(pci_gpus), " (%s)" % ", ".join(pci_gpus) if pci_gpus else "", reason))
        return found
    if not gpus:
        return ["Expected %d GPUs (preflight_gpu_count), the driver lists none (%s). Fix: look for the GPUs on the PCI "
                "bus (lspci -d 10de:) and for NVRM errors in dmesg." % (count, reason)]
    if len(gpus) != count:
        found.append("Expected %d GPUs (preflight_gpu_count), found %d. Fix: find the missing or extra GPUs (nvidia-smi "
                     "-L, dmesg | grep -i nvrm), or set preflight_gpu_count for this host in the inventory."
                     % (count, len(gpus)))
    wrong = architecture_problem(gpus, expected["compute_capability"])
    if wrong:
        found.append(wrong)
    minimum = int(expected["min_memory_mib"])
    small = [gpu for gpu in gpus if gpu.get("memory_total_mib") is None or int(gpu["memory_total_mib"]) < minimum]
    if small:
        found.append("Expected at least %d MiB (preflight_min_memory_mib) on every GPU, found %s. Fix: check the GPU "
                     "model and that MIG is off (nvidia-smi -q | grep -A2 MIG), or lower preflight_min_memory_mib."
                     % (minimum, "; ".join("%s with %s MiB" % (_gpu(gpu), gpu.get("memory_total_mib") or "unknown")
                                           for gpu in small)))
    interconnect = expected.get("interconnect") or ""
    have = (facts.get("nvidia_topology") or {}).get("interconnect")
    if interconnect and have != interconnect:
        found.append("Expected interconnect %s (preflight_interconnect), found %s. Fix: check nvidia-smi topo -m; the "
                     "launch profiles and gates are chosen for %s, so set preflight_interconnect to what the host really "
                     "has only together with them." % (interconnect, have or "unknown", interconnect))
    branch = driver_branch(facts.get("nvidia_driver_version"))
    wanted = expected.get("min_driver_branch")
    if wanted and branch is not None and branch < int(wanted):
        found.append("SGLang %s needs NVIDIA driver branch %d or newer for its CUDA %s build; the host runs driver %s. "
                     "Fix: install driver %d or newer (gpu_driver_branch, --tags driver), or pick an SGLang release "
                     "built for an older CUDA (sglang_install_version)."
                     % (expected.get("release"), int(wanted), expected.get("torch_cuda"), facts.get("nvidia_driver_version"),
                        int(wanted)))
    return found


def summary(facts, expected, pci_gpus=None, found=None):
    """The one-screen lines the role shows for a host."""
    gpus = facts.get("nvidia_gpus") or []
    topology = facts.get("nvidia_topology") or {}
    lines = ["driver %s, CUDA %s, kernel module %s" % (facts.get("nvidia_driver_version") or "not answering",
                                                       facts.get("nvidia_cuda_version") or "-",
                                                       facts.get("nvidia_kernel_module") or "unknown")]
    if gpus:
        lines.append("GPUs: %d x %s, interconnect %s" % (len(gpus), " + ".join(sorted({gpu.get("name") for gpu in gpus})),
                                                         topology.get("interconnect") or "unknown"))
        affinity = topology.get("affinity") or {}
        for gpu in gpus:
            lines.append("GPU%s %s %s: compute capability %s, %s MiB, power %s/%s W, persistence %s, NUMA %s" % (
                gpu.get("index"), gpu.get("pci_bus_id"), gpu.get("name"), gpu.get("compute_capability"),
                gpu.get("memory_total_mib"), gpu.get("power_limit_w"), gpu.get("power_max_limit_w"),
                "on" if gpu.get("persistence_mode") else "off",
                (affinity.get("GPU%s" % gpu.get("index")) or {}).get("numa_affinity") or "-"))
    else:
        lines.append("GPUs on the PCI bus: %d (%s)" % (len(pci_gpus or []), facts.get("nvidia_gpu_facts_reason")))
    lines.append("expected: %s x compute capability %s, >= %s MiB, interconnect %s, driver >= %s for SGLang %s -> %s" % (
        expected["gpu_count"], expected["compute_capability"], expected["min_memory_mib"],
        expected.get("interconnect") or "any", expected.get("min_driver_branch") or "-", expected.get("release") or "-",
        "OK" if not found else "MISMATCH, see below"))
    return lines

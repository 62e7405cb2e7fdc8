# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel parameters the gpu_driver role writes, pure: the inventory's own, the IOMMU mode and PCIe power
management, each once. The preflight checks the same list against /proc/cmdline after the reboot."""

from __future__ import annotations

# gpu_driver_iommu_mode -> its parameters. pt: DMA of the host's devices stays translated where asked, the GPUs'
# peer traffic is not (vllm#33041's hang at TP 2 was a translating IOMMU); off as rtx6kpro nccl-tuning.md runs it.
IOMMU_MODES = {
    "pt": ["iommu=pt"],
    "off": ["iommu=off", "amd_iommu=off"],
    "": [],
}
# "Surprise Link Down" lockups during Gen1 <-> Gen5 retrain (rtx6kpro common-issues.md, pcie-bandwidth.md).
PCIE_POWER_MANAGEMENT_OFF = ["pcie_aspm=off", "pcie_port_pm=off"]


class DriverSettingsError(ValueError):
    pass


def _key(parameter):
    return parameter.split("=", 1)[0]


def kernel_parameters(extra, iommu_mode="pt", pcie_power_management_off=True):
    """gpu_driver_kernel_parameters, then those of the IOMMU mode and of PCIe power management, each once.

    A parameter of the inventory's that sets the same key to another value than the role would is refused
    (the kernel takes the last one, so one of them would silently not hold).
    """
    if iommu_mode not in IOMMU_MODES:
        raise DriverSettingsError("gpu_driver_iommu_mode is %r; it is one of pt, off or \"\" (leave the IOMMU as the "
                                  "kernel and the inventory set it)" % (iommu_mode,))
    derived = IOMMU_MODES[iommu_mode] + (PCIE_POWER_MANAGEMENT_OFF if pcie_power_management_off else [])
    extra = [str(parameter) for parameter in (extra or [])]
    for parameter in extra:
        clash = [mine for mine in derived if _key(mine) == _key(parameter) and mine != parameter]
        if clash:
            raise DriverSettingsError(
                "gpu_driver_kernel_parameters has %s, and the role writes %s (%s). Fix: drop %s from "
                "gpu_driver_kernel_parameters, or set %s." % (
                    parameter, clash[0],
                    "gpu_driver_iommu_mode: %s" % iommu_mode if clash[0] in IOMMU_MODES[iommu_mode]
                    else "gpu_driver_pcie_power_management_off: true",
                    parameter,
                    "gpu_driver_iommu_mode to the mode you mean (or \"\")" if clash[0] in IOMMU_MODES[iommu_mode]
                    else "gpu_driver_pcie_power_management_off: false"))
    merged = []
    for parameter in extra + derived:
        if parameter not in merged:
            merged.append(parameter)
    return merged

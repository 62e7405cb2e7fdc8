# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils.driver_settings import DriverSettingsError, kernel_parameters


def test_the_defaults_give_iommu_passthrough_and_pcie_power_management_off():
    assert kernel_parameters([]) == ["iommu=pt", "pcie_aspm=off", "pcie_port_pm=off"]


def test_the_inventorys_own_come_first_and_each_parameter_once():
    # Production group_vars set iommu=pt already: written once.
    assert kernel_parameters(["iommu=pt", "nvme_core.default_ps_max_latency_us=0"]) == [
        "iommu=pt", "nvme_core.default_ps_max_latency_us=0", "pcie_aspm=off", "pcie_port_pm=off"]


@pytest.mark.parametrize("mode, power_off, expected", [
    ("off", True, ["iommu=off", "amd_iommu=off", "pcie_aspm=off", "pcie_port_pm=off"]),
    ("", False, []),
    ("pt", False, ["iommu=pt"]),
])
def test_modes(mode, power_off, expected):
    assert kernel_parameters([], mode, power_off) == expected


def test_a_clash_with_what_the_role_writes_is_refused_naming_the_fix():
    with pytest.raises(DriverSettingsError, match=r"gpu_driver_kernel_parameters has iommu=off, and the role writes "
                                                  r"iommu=pt \(gpu_driver_iommu_mode: pt\). Fix: drop iommu=off"):
        kernel_parameters(["iommu=off"])
    with pytest.raises(DriverSettingsError, match="gpu_driver_pcie_power_management_off: false"):
        kernel_parameters(["pcie_aspm=force"])
    # Without the role's own, the inventory's stands.
    assert kernel_parameters(["iommu=off"], "", False) == ["iommu=off"]


def test_an_unknown_iommu_mode_is_refused():
    with pytest.raises(DriverSettingsError, match="gpu_driver_iommu_mode is 'on'; it is one of pt, off"):
        kernel_parameters([], "on")

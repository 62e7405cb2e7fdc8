# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's decision and the GPUs' power limits, on facts parsed from real-format nvidia-smi captures."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.gpu_facts import (
    build_facts,
    build_topology,
    parse_query_gpu_csv,
    parse_smi_banner,
    parse_topology,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils import power_limit, preflight

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "fixtures" / "gpu"
EXPECTED = {"gpu_count": 8, "compute_capability": "12.0", "min_memory_mib": 95000, "interconnect": "pcie",
            "require_driver": False, "release": "0.5.23", "torch_cuda": "13.0", "min_driver_branch": 580}


def facts(capture, driver=None):
    directory = FIXTURES / capture
    # The H200's answer to the module's own query was captured on the device run.
    query = FIXTURES / "h200-device-run" if capture.startswith("h200") else directory
    gpus = parse_query_gpu_csv((query / "query-gpu.csv").read_text())
    banner_driver, cuda = parse_smi_banner((directory / "nvidia-smi.txt").read_text())
    topology = build_topology(len(gpus), parse_topology((directory / "topo.txt").read_text()))
    return build_facts(driver_version=driver or banner_driver, cuda_version=cuda, kernel_module="open", gpus=gpus,
                       topology=topology)


def test_eight_rtx_pro_6000_on_pcie_with_driver_580_are_what_the_inventory_expects():
    found = preflight.problems(facts("rtx-pro-6000-server-x8"), EXPECTED)
    assert found == []
    lines = preflight.summary(facts("rtx-pro-6000-server-x8"), EXPECTED, found=found)
    assert lines[-1].endswith("driver >= 580 for SGLang 0.5.23 -> OK") and len(lines) == 2 + 8 + 1


def test_an_h200_host_is_refused_naming_count_capability_and_interconnect():
    found = preflight.problems(facts("h200-driver-580.159.04"), EXPECTED)
    assert found[0].startswith("Expected 8 GPUs (preflight_gpu_count), found 1.")
    assert "found GPU 0 NVIDIA H200 with 9.0. Fix: this collection deploys for SM120" in found[1]
    assert found[2].startswith("Expected interconnect pcie (preflight_interconnect), found single.")


def test_the_capability_check_the_driver_role_shares_names_its_variable_or_says_nothing():
    gpus = facts("rtx-pro-6000-server-x8")["nvidia_gpus"]
    assert preflight.architecture_problem(gpus, "12.0", "gpu_driver_expected_compute_capability") is None
    assert preflight.architecture_problem(gpus, 12.0) is None
    assert preflight.architecture_problem(gpus[:1] + facts("h200-driver-580.159.04")["nvidia_gpus"], "12.0",
                                          "gpu_driver_expected_compute_capability") == (
        "Expected compute capability 12.0 (gpu_driver_expected_compute_capability) on every GPU, found GPU 0 NVIDIA "
        "H200 with 9.0. Fix: this collection deploys for SM120 (RTX PRO 6000 Blackwell); take the host out of "
        "gpu_hosts, or set gpu_driver_expected_compute_capability if it is meant to run these GPUs.")


def test_a_driver_too_old_for_the_release_s_cuda_build_is_named_with_both():
    found = preflight.problems(facts("rtx-pro-6000-server-x8", driver="575.51.03"), EXPECTED)
    assert found == ["SGLang 0.5.23 needs NVIDIA driver branch 580 or newer for its CUDA 13.0 build; the host runs driver "
                     "575.51.03. Fix: install driver 580 or newer (gpu_driver_branch, --tags driver), or pick an SGLang "
                     "release built for an older CUDA (sglang_install_version)."]


@pytest.mark.parametrize("reason", ["nvidia-smi not found on PATH",
                                    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"])
def test_a_bare_host_is_counted_on_the_pci_bus(reason):
    bare = build_facts(reason=reason)
    assert preflight.driver_missing(bare)
    assert preflight.problems(bare, EXPECTED, ["0000:%02x:00.0" % bus for bus in range(8)]) == []
    short = preflight.problems(bare, EXPECTED, ["0000:01:00.0"])
    assert short[0].startswith("Expected 8 GPUs (preflight_gpu_count), found 1 NVIDIA GPUs on the PCI bus (0000:01:00.0)")
    required = preflight.problems(bare, dict(EXPECTED, require_driver=True))
    assert required[0].startswith("The NVIDIA driver does not answer") and "--tags driver" in required[0]


def test_a_host_whose_driver_lists_no_gpu_is_told_where_to_look():
    found = preflight.problems(build_facts(reason="nvidia-smi lists no GPU"), EXPECTED)
    assert found == ["Expected 8 GPUs (preflight_gpu_count), the driver lists none (nvidia-smi lists no GPU). Fix: look "
                     "for the GPUs on the PCI bus (lspci -d 10de:) and for NVRM errors in dmesg."]


def test_small_memory_and_an_unchecked_interconnect():
    host = facts("rtx-pro-6000-server-x8")
    found = preflight.problems(host, dict(EXPECTED, min_memory_mib=100000, interconnect=""))
    assert len(found) == 1 and found[0].startswith("Expected at least 100000 MiB (preflight_min_memory_mib)")


def test_each_gpu_runs_at_its_maximum_or_the_limit_asked_for():
    gpus = facts("rtx-pro-6000-server-x8")["nvidia_gpus"]
    assert {plan["watts"] for plan in power_limit.effective_limits(gpus)} == {600.0}
    assert {plan["watts"] for plan in power_limit.effective_limits(gpus, 450)} == {450.0}
    assert all(plan["problem"] is None for plan in power_limit.effective_limits(gpus, "450"))


def test_the_limit_the_smoke_test_kept_is_taken_where_the_inventory_asks_for_none():
    gpus = facts("rtx-pro-6000-server-x8")["nvidia_gpus"]
    record = "/var/lib/sm120-sglang/power-limit.json"
    assert {plan["watts"] for plan in power_limit.effective_limits(gpus, 0, 350, record)} == {350.0}
    assert {plan["watts"] for plan in power_limit.effective_limits(gpus, "0", "350.0", record)} == {350.0}
    # The inventory's limit outranks the measured one.
    assert {plan["watts"] for plan in power_limit.effective_limits(gpus, 450, 350, record)} == {450.0}
    plans = power_limit.effective_limits(gpus, 0, 100, record)
    assert plans[0]["problem"] == ("GPU 0 (NVIDIA RTX PRO 6000 Blackwell Server Edition) accepts a power limit of "
                                   "150.0-600.0 W, the smoke test kept (%s) 100 W. Fix: delete %s (the next smoke test "
                                   "searches again) or set gpu_driver_power_limit_w." % (record, record))


def test_a_limit_outside_a_gpu_s_range_or_no_maximum_is_refused_naming_the_variable():
    gpus = facts("rtx-pro-6000-server-x8")["nvidia_gpus"]
    plans = power_limit.effective_limits(gpus, 700)
    assert plans[7]["problem"] == ("GPU 7 (NVIDIA RTX PRO 6000 Blackwell Server Edition) accepts a power limit of "
                                   "150.0-600.0 W, gpu_driver_power_limit_w is 700 W. Fix: set gpu_driver_power_limit_w "
                                   "within that range, or 0 for each GPU's maximum.")
    unknown = power_limit.effective_limits([{"index": 0, "name": "x", "power_max_limit_w": None}])
    assert unknown[0]["watts"] is None and "reports no maximum power limit" in unknown[0]["problem"]

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary's decision on new patches, through the filter roles/smoke_test applies."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.filter.canary_comparison import FilterModule
from ansible_collections.sm120.sglang.plugins.plugin_utils.canary import CanaryError, canary_comparison

compare = FilterModule().filters()["canary_comparison"]
FUSION = ["flashinfer_allreduce_fusion"]


def measurement(output_tok_s, watts=None, util=None, label="m"):
    gpus = []
    if watts is not None:
        activity = {} if util is None else {"activity": {
            "samples": 40, "median_power_fraction": round(watts / 600.0, 4), "median_util_pct": util,
            "median_clock_fraction": 1.0, "max_sm_clock_mhz": 2430.0, "throttle_reason_samples": 40,
            "throttle_reason_share": 0.0, "power_reason_share": 0.0, "thermal_reason_share": 0.0}}
        gpus = [dict({"index": i, "mean_w": watts, "limit_w": 600.0}, **activity) for i in range(8)]
    return {"label": label, "patches_live": [], "result": {"output_tokens_per_s": output_tok_s, "power": {"gpus": gpus}}}


def test_the_articles_collapse_regresses_and_says_it_spins():
    decision = compare(measurement(236.0, 125.0, 100.0), measurement(3740.0, 480.0, 96.0), 0.1, FUSION)
    assert decision["regressed"] is True
    assert decision["change"] == pytest.approx(236 / 3740 - 1, abs=1e-4)
    assert decision["cause"] == "spin-wait"
    assert decision["message"].startswith(
        "flashinfer_allreduce_fusion gave 236.0 output tok/s against a baseline of 3740.0 (-93.7 %, tolerance -10.0 %); "
        "with them: Host spin-wait on GPU 0, 1, 2, 3, 4, 5, 6, 7 of 8: GPU 0 is spin-waiting: busy 100 % of the time")


def test_the_same_loss_with_idle_gpus_is_underfed():
    decision = compare(measurement(236.0, 125.0, 8.0), measurement(3740.0), 0.1, FUSION)
    assert decision["regressed"] and decision["cause"] == "underfed"
    assert "GPU 0 is underfed: busy only 8 % of the time" in decision["message"]


@pytest.mark.parametrize("patched, regressed", [(3366.1, False), (3365.9, True), (3740.0, False), (4000.0, False)])
def test_the_tolerance_is_the_line(patched, regressed):
    # 3740 * 0.9 = 3366: a loss of exactly the tolerance is kept, one a hair beyond it is not.
    assert compare(measurement(patched), measurement(3740.0), 0.1, FUSION)["regressed"] is regressed


def test_a_gain_is_signed_and_without_samples_no_cause_is_claimed():
    decision = compare(measurement(3927.0), measurement(3740.0), "0.25", ["custom_allreduce_pcie", "moe_runner_sm120"])
    assert decision["message"] == ("custom_allreduce_pcie, moe_runner_sm120 gave 3927.0 output tok/s against a "
                                   "baseline of 3740.0 (+5.0 %, tolerance -25.0 %)")
    assert decision["cause"] == "unknown" and decision["tolerance"] == 0.25


@pytest.mark.parametrize("tolerance", [-0.1, 1, 1.5, "ten percent", None, True])
def test_a_tolerance_that_is_no_fraction_is_named(tolerance):
    with pytest.raises(AnsibleFilterError, match="smoke_test_canary_tolerance must be a fraction from 0 up to 1"):
        compare(measurement(1.0), measurement(1.0), tolerance, FUSION)


def test_a_measurement_without_throughput_is_named():
    with pytest.raises(CanaryError, match="the baseline measurement has no output_tokens_per_s"):
        canary_comparison(measurement(1.0), {"label": "baseline", "result": {"failed_requests": 64}}, 0.1, FUSION)
    with pytest.raises(CanaryError, match="the patched measurement has no output_tokens_per_s"):
        canary_comparison({}, measurement(1.0), 0.1, FUSION)

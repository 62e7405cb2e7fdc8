# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.filter.smoke_threshold_misses import FilterModule
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import (
    Check,
    ThresholdError,
    breached,
    low_power_gpus,
    mean_power_fraction,
    threshold_checks,
    threshold_misses,
)

THRESHOLDS = {"min_output_tok_s": 3000, "max_ttft_p99_ms": 20000, "min_power_fraction": 0.3}


def result(output=3740.0, ttft_p99=900.0, watts=250.0, failed=0, completed=256, util=None):
    """A serving_benchmark result; with ``util``, each GPU's activity figures as its power summary gives them."""
    activity = {} if util is None else {"activity": {
        "samples": 40, "median_power_fraction": round(watts / 600.0, 4), "median_util_pct": util,
        "median_clock_fraction": 1.0, "max_sm_clock_mhz": 2430.0, "throttle_reason_samples": 40,
        "throttle_reason_share": 0.0, "power_reason_share": 0.0, "thermal_reason_share": 0.0}}
    return {
        "completed_requests": completed, "failed_requests": failed, "errors": ["request 3: HTTP 500"] if failed else [],
        "output_tokens_per_s": output, "ttft_ms": {"p99": ttft_p99},
        "power": {"gpus": [dict({"index": i, "mean_w": watts, "limit_w": 600.0, "mean_fraction_of_limit": watts / 600.0},
                                **activity) for i in range(8)]},
    }


def test_the_articles_healthy_deployment_passes():
    assert threshold_misses(result(), THRESHOLDS) == []


def test_the_articles_collapse_misses_throughput_and_power_by_name():
    misses = threshold_misses(result(output=236.0, watts=125.0), THRESHOLDS)
    assert misses[0] == ("Output throughput 236.0 tok/s is below the threshold 3000.0 tok/s "
                         "(smoke_test_min_output_tok_s).")
    assert misses[1].startswith("GPU power under load is 0.21 of the limit on average, below the threshold 0.30")
    assert "GPU0 125/600 W" in misses[1]
    # Power alone cannot tell a spin from a lack of work: without activity readings no cause is claimed.
    assert len(misses) == 2 and not any("underfed" in miss or "spin" in miss for miss in misses)


def test_a_miss_names_its_cause_from_the_activity_readings():
    spinning = threshold_misses(result(output=236.0, watts=125.0, util=100.0), THRESHOLDS)
    assert len(spinning) == 3
    assert spinning[2].startswith("Cause: Host spin-wait on GPU 0, 1, 2, 3, 4, 5, 6, 7 of 8: GPU 0 is spin-waiting: "
                                  "busy 100 % of the time yet drawing only 0.21 of its 600 W limit")
    underfed = threshold_misses(result(output=236.0, watts=125.0, util=9.0), THRESHOLDS)
    assert underfed[2].startswith("Cause: Host underfed on GPU 0, 1, 2, 3, 4, 5, 6, 7 of 8: GPU 0 is underfed: "
                                  "busy only 9 % of the time")
    # A pass carries no cause message: the verdict lists misses only.
    assert threshold_misses(result(util=97.0), THRESHOLDS) == []


def test_slow_first_token_and_failed_requests():
    misses = threshold_misses(result(ttft_p99=25000.0, failed=2, completed=254), THRESHOLDS)
    assert "p99 time to first token 25000 ms is above the threshold 20000 ms" in misses[0]
    assert misses[1] == "2 of 256 requests failed: request 3: HTTP 500."


def test_nothing_completed_is_one_clear_miss():
    assert threshold_misses(result(completed=0, failed=4), THRESHOLDS) == [
        "No request completed (4 failed): request 3: HTTP 500."]


def test_unsampled_power_and_unset_thresholds_are_not_checked():
    unsampled = dict(result(watts=10.0), power={"source": None, "reason": "no nvidia-smi", "gpus": []})
    assert mean_power_fraction(unsampled) is None
    assert threshold_misses(unsampled, THRESHOLDS) == []
    assert threshold_misses(result(output=1.0), {"min_output_tok_s": None}) == []


# ------------------------------------------------------------------ one decider for the verdict and the reports

def without_fractions(gpus_result):
    """The result with each GPU's power given as watts only, as an entry without mean_fraction_of_limit has it."""
    stripped = dict(gpus_result)
    stripped["power"] = {"gpus": [{key: value for key, value in gpu.items() if key != "mean_fraction_of_limit"}
                                  for gpu in gpus_result["power"]["gpus"]]}
    return stripped


def named_variables(misses):
    return {variable for variable in ("smoke_test_min_output_tok_s", "smoke_test_max_ttft_p99_ms",
                                      "smoke_test_min_power_fraction") if any(variable in miss for miss in misses)}


FIGURE_VARIABLES = {"output_tokens_per_s": "smoke_test_min_output_tok_s", "ttft_p99_ms": "smoke_test_max_ttft_p99_ms",
                    "power_fraction": "smoke_test_min_power_fraction"}


def test_gpu_power_without_a_precomputed_fraction_is_a_miss_for_the_verdict_as_for_the_report():
    # Healthy throughput and latency; 8 GPUs at 125 of 600 W given as watts only. Before there was one decider,
    # the report computed 0.21 from the watts and marked it while the verdict skipped the GPUs and passed.
    collapsed = without_fractions(result(watts=125.0))
    assert breached(collapsed, THRESHOLDS) == {"power_fraction"}
    misses = threshold_misses(collapsed, THRESHOLDS)
    assert len(misses) == 1
    assert misses[0].startswith("GPU power under load is 0.21 of the limit on average, below the threshold 0.30 "
                                "(smoke_test_min_power_fraction)")
    assert mean_power_fraction(collapsed) == pytest.approx(125 / 600)
    assert threshold_misses(without_fractions(result(watts=250.0)), THRESHOLDS) == []


@pytest.mark.parametrize("case", [
    result(),
    result(output=236.0, watts=125.0),
    result(ttft_p99=25000.0),
    without_fractions(result(watts=125.0)),
    without_fractions(result(output=236.0, watts=250.0)),
    dict(result(), output_tokens_per_s="236.0", ttft_ms={"p99": "25000"}),
    dict(result(), power={"gpus": [{"index": 0, "mean_w": 125.0, "limit_w": 600.0, "mean_fraction_of_limit": "0.2"},
                                   {"index": 1, "mean_w": None, "limit_w": 600.0, "mean_fraction_of_limit": None}]}),
    dict(result(), power={"source": None, "reason": "sample_power is false", "gpus": []}),
    dict(result(), ttft_ms={"p99": None}),
], ids=["healthy", "collapse", "slow-first-token", "watts-only-collapse", "watts-only-healthy-power",
        "figures-as-strings", "fraction-as-string-and-unknown-gpu", "power-not-sampled", "no-ttft"])
@pytest.mark.parametrize("thresholds", [
    THRESHOLDS,
    {"min_output_tok_s": "3000", "max_ttft_p99_ms": "", "min_power_fraction": "0.3"},
    {"min_output_tok_s": None, "max_ttft_p99_ms": 20000, "min_power_fraction": None},
], ids=["numbers", "strings-from-extra-vars", "some-off"])
def test_the_verdict_names_exactly_the_figures_the_report_marks(case, thresholds):
    marked = {FIGURE_VARIABLES[figure] for figure in breached(case, thresholds)}
    assert named_variables(threshold_misses(case, thresholds)) == marked


def test_checks_name_figure_value_threshold_and_variable_in_a_fixed_order():
    checks = threshold_checks(without_fractions(result(output=236.0, watts=125.0)), THRESHOLDS)
    assert [check.figure for check in checks] == ["output_tokens_per_s", "ttft_p99_ms", "power_fraction"]
    assert checks[0] == Check("output_tokens_per_s", 236.0, 3000.0, "smoke_test_min_output_tok_s", True)
    assert checks[1] == Check("ttft_p99_ms", 900.0, 20000.0, "smoke_test_max_ttft_p99_ms", False)
    assert checks[2].value == pytest.approx(125 / 600) and checks[2].missed is True
    assert threshold_checks(result(), {"min_output_tok_s": None}) == []
    assert threshold_checks(result(), None) == [] and breached(result(), None) == set()


def test_a_figure_on_its_threshold_passes():
    assert breached(result(output=3000.0, ttft_p99=20000.0, watts=180.0), THRESHOLDS) == set()


def test_completed_requests_without_a_throughput_figure_miss_the_minimum_and_say_so():
    missing = dict(result(), output_tokens_per_s=None)
    assert breached(missing, THRESHOLDS) == {"output_tokens_per_s"}
    assert threshold_misses(missing, THRESHOLDS) == [
        "Output throughput is missing from a result with 256 completed requests; the threshold is 3000.0 tok/s "
        "(smoke_test_min_output_tok_s)."]
    # Without completed requests there is nothing to measure, and nothing is marked: the verdict says why.
    assert breached({"output_tokens_per_s": None}, THRESHOLDS) == set()


@pytest.mark.parametrize("bad", ["fast", True, [3000]])
def test_a_threshold_that_is_not_a_number_is_an_error_naming_its_variable(bad):
    thresholds = dict(THRESHOLDS, min_output_tok_s=bad)
    with pytest.raises(ThresholdError, match=r"smoke_test_min_output_tok_s \(min_output_tok_s\) must be a number"):
        threshold_misses(result(), thresholds)
    with pytest.raises(ThresholdError, match="smoke_test_min_output_tok_s"):
        breached(result(), thresholds)


def test_each_gpu_below_the_power_threshold_is_named_for_its_own_cell():
    mixed = dict(result(), power={"gpus": [{"index": 0, "mean_w": 120.0, "limit_w": 600.0},
                                           {"index": 1, "mean_w": 480.0, "limit_w": 600.0,
                                            "mean_fraction_of_limit": 0.8},
                                           {"index": 2, "mean_w": None, "limit_w": 600.0}]})
    assert low_power_gpus(mixed, THRESHOLDS) == {0}
    assert breached(mixed, THRESHOLDS) == set()  # the mean, 0.5, passes
    assert low_power_gpus(mixed, {"min_power_fraction": None}) == set()


def test_the_filter_is_the_decider_and_turns_a_bad_threshold_into_a_filter_error():
    from ansible.errors import AnsibleFilterError

    misses = FilterModule().filters()["smoke_threshold_misses"]
    collapsed = without_fractions(result(watts=125.0))
    assert misses(collapsed, THRESHOLDS) == threshold_misses(collapsed, THRESHOLDS)
    with pytest.raises(AnsibleFilterError, match="smoke_test_min_power_fraction"):
        misses(result(), dict(THRESHOLDS, min_power_fraction="high"))

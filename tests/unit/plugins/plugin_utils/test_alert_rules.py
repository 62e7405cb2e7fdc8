# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""alert_rules: the rules carry the cause verdict's thresholds, the profile's objectives and the exporters' names.

What the rules do when Prometheus evaluates them is test_alert_rules_promtool.py's; here, what they say. The expected
expressions are written out by hand from the thresholds' documented defaults (cause_verdict.Thresholds) and the
built-in profile's loads (roles/sglang_service/vars/profiles.yml).
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.filter.prometheus import FilterModule
from ansible_collections.sm120.sglang.plugins.plugin_utils import alert_rules as ar

# The glm-5-nvfp4 profile's loads, as profiles.yml writes them.
GLM5_LOADS = {
    "low": {"concurrency": 4, "num_requests": 32, "input_tokens": 1024, "output_tokens": 256,
            "slo": {"ttft_p99_ms": 3000, "itl_p99_ms": 150}},
    "high": {"concurrency": 64, "num_requests": 256, "input_tokens": 1024, "output_tokens": 256,
             "slo": {"ttft_p99_ms": 15000, "itl_p99_ms": 1000}},
}


def rules(*args, **kwargs):
    groups = ar.alert_rules(*args, **kwargs)["groups"]
    return {rule.get("record") or rule.get("alert"): rule for group in groups for rule in group["rules"]}


def test_spin_wait_is_busy_at_low_power_with_the_clock_up_and_requests_running_by_the_verdicts_thresholds():
    spin = rules(GLM5_LOADS)["SglangGpuSpinWait"]
    assert spin["expr"] == (
        "sm120:gpu_power_fraction:median10m < 0.3"
        " and on (host, gpu) sm120:gpu_util_pct:median10m >= 80"
        " and on (host, gpu) sm120:gpu_clock_fraction:median10m >= 0.9"
        " and on (host) (sm120:host_running_requests:median10m > 0)")
    assert spin["for"] == "2m"
    assert spin["labels"] == {"severity": "critical", "cause": "spin-wait"}
    assert spin["annotations"]["summary"] == "{{ $labels.host }} GPU {{ $labels.gpu }} is spin-waiting"


def test_a_threshold_override_moves_every_rule_that_reads_it_and_no_other():
    default, moved = rules(GLM5_LOADS), rules(GLM5_LOADS, thresholds={"busy_util_pct": 70})
    changed = sorted(name for name in default if default[name] != moved[name])
    # Power-capped reads it through thermal's temperature fallback, which it gives way to.
    assert changed == ["SglangGpuPowerCapped", "SglangGpuSpinWait", "SglangGpuThermal", "SglangGpuUnderfed"]
    assert "sm120:gpu_util_pct:median10m >= 70" in moved["SglangGpuSpinWait"]["expr"]
    assert "busy at least 70 %" in moved["SglangGpuSpinWait"]["annotations"]["description"].lower()


def test_the_window_names_and_bounds_every_median_and_share():
    window = rules(GLM5_LOADS, window="30m", hold="5m")
    assert window["sm120:gpu_power_fraction:median30m"]["expr"] == (
        "quantile_over_time(0.5, sm120:gpu_power_fraction[30m])")
    assert window["sm120:gpu_power_reason:share30m"]["expr"] == "avg_over_time(sm120:gpu_power_reason[30m])"
    assert window["sm120:host_ttft_seconds:p99_30m"]["expr"] == (
        "histogram_quantile(0.99, sum by (host, le) (rate(sglang:time_to_first_token_seconds_bucket[30m])))")
    assert {rule["for"] for name, rule in window.items() if name.startswith("Sglang")} == {"5m"}


def test_the_reason_bits_are_nvmls_power_cap_and_power_brake_and_the_two_thermal_slowdowns():
    records = rules(GLM5_LOADS)
    mask = "sm120:gpu_clock_event_reasons"
    assert records[mask]["expr"] == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS or DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
    assert records["sm120:gpu_power_reason"]["expr"] == (
        "clamp_max(floor(%s / 4) %% 2 + floor(%s / 128) %% 2, 1)" % (mask, mask))
    assert records["sm120:gpu_thermal_reason"]["expr"] == (
        "clamp_max(floor(%s / 32) %% 2 + floor(%s / 64) %% 2, 1)" % (mask, mask))


def test_latency_objectives_are_the_largest_bound_of_any_load_in_seconds():
    objectives = rules(GLM5_LOADS, 20000)
    assert objectives["SglangTtftOverObjective"]["expr"] == "sm120:host_ttft_seconds:p99_10m > 15"
    assert objectives["SglangItlOverObjective"]["expr"] == "sm120:host_itl_seconds:p99_10m > 1"


def test_without_objectives_ttft_falls_back_to_the_smoke_tests_bound_and_itl_has_no_alert():
    loads = {"only": {"concurrency": 8}}
    fallback = rules(loads, 20000)
    assert fallback["SglangTtftOverObjective"]["expr"] == "sm120:host_ttft_seconds:p99_10m > 20"
    assert "SglangItlOverObjective" not in fallback
    neither = rules(loads)
    assert "SglangTtftOverObjective" not in neither


def test_the_queue_bound_is_the_highest_concurrency_unless_given():
    assert rules(GLM5_LOADS)["SglangRequestsQueueing"]["expr"] == "sm120:host_queued_requests:median10m > 64"
    assert rules(GLM5_LOADS, max_queued_requests=0)["SglangRequestsQueueing"]["expr"] == (
        "sm120:host_queued_requests:median10m > 0")
    assert "SglangRequestsQueueing" not in rules({})


def test_down_and_out_of_router_read_the_jobs_given():
    named = rules(GLM5_LOADS, server_job="glm", gpu_job="gpus", router_job="gateway")
    assert named["SglangServerDown"]["expr"] == 'up{job="glm"} == 0'
    assert named["SglangMonitoringTargetDown"]["expr"] == 'up{job="gpus"} == 0 or up{job="gateway"} == 0'
    assert named["SglangHostOutOfRouter"]["expr"] == (
        'up{job="glm"} == 1 unless on (worker) (smg_worker_health == 1) and on () (max(up{job="gateway"}) == 1)')


def test_the_rules_come_in_a_recording_group_and_an_alerting_group():
    groups = ar.alert_rules(GLM5_LOADS)["groups"]
    assert [group["name"] for group in groups] == ["sm120_sglang_records", "sm120_sglang_alerts"]
    assert all("record" in rule for rule in groups[0]["rules"])
    assert all("alert" in rule for rule in groups[1]["rules"])


@pytest.mark.parametrize("kwargs, named", [
    ({"window": "ten minutes"}, "window must be a Prometheus duration above 0 such as 10m or 1h30m; got 'ten minutes'"),
    ({"hold": "0s"}, "hold must be a Prometheus duration"),
    ({"thresholds": {"spin_power": 0.2}}, "unknown cause threshold 'spin_power'"),
    ({"thresholds": {"busy_util_pct": "high"}}, "cause threshold busy_util_pct must be a number"),
    ({"server_job": 'a"b'}, "server_job must be a scrape job name"),
    ({"max_queued_requests": -1}, "max_queued_requests must be a number of requests, 0 or more; got -1"),
    ({"max_ttft_p99_ms": "soon"}, "max_ttft_p99_ms (smoke_test_max_ttft_p99_ms) must be a number of milliseconds"),
])
def test_an_argument_prometheus_cannot_read_is_refused_naming_it(kwargs, named):
    with pytest.raises(ar.AlertRulesError) as refused:
        ar.alert_rules({"only": {"concurrency": 8}}, **kwargs)
    assert named in str(refused.value)


def test_a_bad_objective_is_refused_as_the_experiments_refuse_it():
    with pytest.raises(ar.AlertRulesError) as refused:
        ar.alert_rules({"high": {"concurrency": 64, "slo": {"ttft_p99_ms": 0}}})
    assert "the objective (slo) of load high has ttft_p99_ms = 0" in str(refused.value)


def test_the_filter_refuses_with_the_functions_message():
    with pytest.raises(AnsibleFilterError, match="window must be a Prometheus duration"):
        FilterModule().filters()["prometheus_alert_rules"](GLM5_LOADS, {"window": "soon"})


def test_the_counters_file_lists_every_dcgm_field_the_rules_read():
    counters = FilterModule().filters()["prometheus_dcgm_counters"](None)
    fields = [line.split(",")[0] for line in counters.splitlines() if not line.startswith("#")]
    assert fields == ["DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_GPU_UTIL",
                      "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MAX_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP",
                      "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]
    exprs = " ".join(rule["expr"] for rule in rules(GLM5_LOADS).values())
    assert all(field in exprs for field in fields)

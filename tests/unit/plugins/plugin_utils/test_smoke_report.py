# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The smoke check's reports, from a run shaped like roles/smoke_test's.

The run is the fusion gate's measured regression on 8x RTX PRO 6000: with the
gate live 236 output tok/s at 125 W a GPU, after the smoke test turned it off
3,740 tok/s at 480 W (the stand-in's healthy draw) of 600 W.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.sm120.sglang.plugins.filter.smoke_report import FilterModule
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_report import (
    ReportError,
    final_result,
    smoke_fleet_markdown,
    smoke_report_markdown,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_report_svg import smoke_report_svg
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import (
    breached,
    mean_power_fraction,
    threshold_misses,
)

GATE = "flashinfer_allreduce_fusion"


def _latency(mean, p50, p90, p99):
    return {"mean": mean, "p50": p50, "p90": p90, "p99": p99}


def _activity(watts, limit, util):
    """What serving_benchmark's summary gives per GPU: busy SMs at full clock, spinning at 125 W or working at 480."""
    return {"samples": 80, "median_power_fraction": round(watts / limit, 4), "median_util_pct": util,
            "median_sm_clock_mhz": 2430.0, "max_sm_clock_mhz": 2430.0, "median_clock_fraction": 1.0,
            "median_temperature_c": 61.0, "max_temperature_c": 64.0, "throttle_reason_samples": 80,
            "throttle_reason_share": 0.0, "power_reason_share": 0.0, "thermal_reason_share": 0.0,
            "throttle_reason_shares": {}}


def _power(watts, output_tok_s, limit=600.0, gpus=8, util=100.0):
    return {
        "source": "nvidia-smi", "reason": None, "interval_s": 0.5, "samples": 80, "sample_errors": 0,
        "gpus": [{"index": i, "samples": 80, "mean_w": watts, "max_w": watts + 9.5, "limit_w": limit,
                  "mean_fraction_of_limit": round(watts / limit, 4), "activity": _activity(watts, limit, util)}
                 for i in range(gpus)],
        "total_mean_w": watts * gpus, "energy_j": watts * gpus * 40.0,
        "joules_per_output_token": round(watts * gpus / output_tok_s, 4),
    }


def _result(output_tok_s, watts, ttft_p99, failed=0):
    return {
        "changed": False, "url": "http://10.1.230.174:30000/v1/completions",
        "completed_requests": 256 - failed, "failed_requests": failed, "not_started_requests": 0,
        "warmup_failed_requests": 0, "errors": ["request 7: HTTP 500 Internal Server Error"] if failed else [],
        "duration_s": 256 * 256 / output_tok_s, "requests_per_s": output_tok_s / 256,
        "output_tokens_per_s": output_tok_s, "total_tokens_per_s": output_tok_s * 5,
        "input_tokens_total": 262144, "output_tokens_total": 65536, "token_count_source": "usage",
        "ttft_ms": _latency(ttft_p99 / 3, ttft_p99 / 4, ttft_p99 / 2, ttft_p99),
        "itl_ms": _latency(64000 / output_tok_s, 64000 / output_tok_s, 70000 / output_tok_s, 90000 / output_tok_s),
        "tpot_ms": _latency(17.0, 17.0, 18.0, 20.0),
        "e2e_latency_ms": _latency(4400.0, 4380.0, 4600.0, 256 * 64000 / output_tok_s),
        "power": _power(watts, output_tok_s),
    }


RUN = {
    "host": "gpu-node-1",
    "run_id": "20261129T112632Z",
    "started_at": "20261129T112632Z",
    "config": {"profile": "glm5-nvfp4-tp8", "sglang_version": "0.5.9", "model": "glm-5", "endpoint": "completions",
               "loads": {"high": {"concurrency": 64, "num_requests": 256, "input_tokens": 1024, "output_tokens": 256}}},
    "patches_live": [],
    "thresholds": {"min_output_tok_s": 3000, "max_ttft_p99_ms": 20000, "min_power_fraction": 0.3},
    # The patches going live, the baseline without them: GLM-5 loads in 7-8 minutes a restart.
    "cost": {"restarts": 2, "restart_s": 912.0},
    "measurements": [
        {"label": "with new patches: " + GATE, "patches_live": [GATE], "runs": [230.0, 236.0, 240.0], "spread": 0.0424,
         "result": _result(236.0, 125.0, 61000.0)},
        {"label": "after rolling back " + GATE, "patches_live": [], "result": _result(3740.0, 480.0, 2900.0)},
    ],
    "verdict": {
        "status": "regression-rolled-back",
        "messages": ["Regression, rolled back: %s gave 236.0 output tok/s against a baseline of 3740.0 "
                     "(-93.7 %%, tolerance -10.0 %%). Now 3740.0 output tok/s without them; they stay off "
                     "(sm120_patches_retry_rejected: true tries them again)." % GATE],
        "rolled_back": [GATE],
    },
}


def _rows(markdown, first_cell):
    return [[cell.strip() for cell in line.strip("|").split(" | ")]
            for line in markdown.splitlines() if line.startswith("| " + first_cell)]


# ------------------------------------------------------------------ figures and thresholds

def test_the_final_result_and_mean_power_fraction():
    assert final_result(RUN)["output_tokens_per_s"] == 3740.0
    assert mean_power_fraction(final_result(RUN)) == pytest.approx(0.8)
    assert mean_power_fraction(RUN["measurements"][0]["result"]) == pytest.approx(125 / 600, abs=1e-4)
    assert final_result({"measurements": []}) == {} and mean_power_fraction({}) is None


def test_breached_names_the_figures_beyond_their_thresholds():
    collapsed = RUN["measurements"][0]["result"]
    assert breached(collapsed, RUN["thresholds"]) == {"output_tokens_per_s", "ttft_p99_ms", "power_fraction"}
    assert breached(final_result(RUN), RUN["thresholds"]) == set()
    off = {"min_output_tok_s": None, "max_ttft_p99_ms": None, "min_power_fraction": None}
    assert breached(collapsed, off) == set() and breached(collapsed, None) == set()
    # Extra vars given on the command line arrive as strings.
    assert breached(collapsed, {"min_output_tok_s": "3000", "max_ttft_p99_ms": ""}) == {"output_tokens_per_s"}
    # Missing figures show as n/a, unmarked; the verdict's messages say what happened.
    empty = {"output_tokens_per_s": None, "ttft_ms": {"p99": None},
             "power": {"source": None, "reason": "sample_power is false", "gpus": []}}
    assert breached(empty, RUN["thresholds"]) == set()


# ------------------------------------------------------------------ Markdown, one host

def test_markdown_names_host_verdict_configuration_and_thresholds():
    text = smoke_report_markdown(RUN)
    assert text.startswith("# Smoke check: gpu-node-1 — REGRESSION ROLLED BACK\n")
    assert "Profile `glm5-nvfp4-tp8`, SGLang `0.5.9`, model `glm-5`" in text
    assert "- Patches live now: none" in text
    assert "- Cost: 2 restarts of the server, 15.2 min until it was healthy again" in text
    assert ("Thresholds: output at least 3,000.0 tok/s, TTFT p99 at most 20,000.0 ms, "
            "GPU power at least 0.30 of the limit") in text
    assert "## Verdict: REGRESSION ROLLED BACK" in text
    assert "- Regression, rolled back: flashinfer_allreduce_fusion gave 236.0 output tok/s" in text
    assert "Rolled back: `flashinfer_allreduce_fusion`" in text


def test_markdown_has_a_row_of_figures_per_measurement():
    text = smoke_report_markdown(RUN)
    header = _rows(text, "Measurement")[0]
    assert header == ["Measurement", "Patches live", "Output tok/s", "Repeats (spread)", "Total tok/s", "Req/s",
                      "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "E2E p99 ms", "Failed"]
    patched, = _rows(text, "1. ")
    rolled_back, = _rows(text, "2. ")
    assert patched == ["1. with new patches: flashinfer_allreduce_fusion", "`flashinfer_allreduce_fusion`",
                       "236.0", "230.0, 236.0, 240.0 (4.2 %)", "1,180.0", "0.92", "15,250.0", "61,000.0", "271.2", "381.4", "69,423.7", "0"]
    # Only the run's result, the last measurement, is held to the thresholds; it passes.
    assert rolled_back == ["2. after rolling back flashinfer_allreduce_fusion", "none", "3,740.0", "n/a", "18,700.0",
                           "14.61", "725.0", "2,900.0", "17.1", "24.1", "4,380.7", "0"]


def test_an_experiment_the_restart_budget_left_untried_says_so():
    from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments as ex
    verdict = dict(ex.untried_verdict("nccl_min_nchannels_8", 2), remembered=False)
    row, = _rows(smoke_report_markdown(dict(RUN, verdicts=[verdict])), "`nccl_min_nchannels_8`")
    assert row[1] == "untried" and "restart budget of 2 was spent" in row[2]
    assert row[-1] == "not measured (restart budget)"


def test_a_load_too_noisy_for_the_goal_says_not_decided_and_the_runs_it_needs():
    from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments as ex
    noisy = [dict(output_tokens_per_s=value, duration_s=15.0) for value in (10000.0, 8600.0)]
    steady = [dict(output_tokens_per_s=value, duration_s=15.0) for value in (3000.0, 3010.0)]
    baseline = {"config": [], "loads": {"high": noisy, "low": steady}, "parity": ["a"]}
    candidate = {"config": ["x"], "loads": {"high": [dict(r, output_tokens_per_s=r["output_tokens_per_s"] * 0.98)
                                                     for r in noisy], "low": steady}, "parity": ["a"]}
    verdict = dict(ex.experiment_verdict("x", baseline, candidate, {"loads": ["low", "high"], "noise_multiple": 2.0}),
                   remembered=False)
    assert verdict["decision"] == ex.NO_GAIN and verdict["reason"].startswith("not decided at load high")
    assert "low no measurable change, within ±3.0 % (+0.0 %)" in verdict["message"]
    assert "high not decided: within ±" in verdict["message"] and "more runs a side" in verdict["message"]
    row, = _rows(smoke_report_markdown(dict(RUN, verdicts=[verdict])), "`x`")
    assert "high not decided (goal ±10.0 %, about 9 more runs a side)" in row[3]
    assert "low no measurable change" in row[3]


def test_the_power_limit_search_has_a_row_per_step_and_says_where_the_gpus_run():
    from ansible_collections.sm120.sglang.tests.unit.plugins.plugin_utils.test_power_search import search
    step, _asked = search([550.0, 500.0, 450.0, 400.0, 350.0])
    assert "## Power limit" not in smoke_report_markdown(RUN)
    power = {"start_w": 600.0, "limit_w": step["limit_w"], "verdicts": step["verdicts"]}
    text = smoke_report_markdown(dict(RUN, power_limit=power))
    section = text.split("## Power limit", 1)[1].split("\n## ", 1)[0]
    assert [row[:2] for row in _rows(section, "")[1:]] == [["550", "kept"], ["500", "kept"], ["450", "kept"],
                                                           ["400", "rejected"], ["350", "untried"]]
    row450 = _rows(section, "450 ")[0]
    assert row450[3] == "high -10.0 % J/token, +0.0 % tok/s; low -10.0 % J/token, +0.0 % tok/s"
    assert row450[4:] == ["3,600.0", "4,000.0"]
    assert "The GPUs run at 450 W, from 600 W" in section
    step, _asked = search([550.0], load_w=400.0)
    power = {"start_w": 600.0, "limit_w": None, "verdicts": step["verdicts"]}
    text = smoke_report_markdown(dict(RUN, power_limit=power))
    assert "The GPUs stay at 600 W: no step down paid." in text


def test_the_accept_length_gets_a_column_only_where_speculative_decoding_ran():
    assert "Accept length" not in smoke_report_markdown(RUN)
    mtp = dict(RUN["measurements"][1], label="with mtp_nextn_3_4",
               result=dict(RUN["measurements"][1]["result"], accept_length=3.2143))
    text = smoke_report_markdown(dict(RUN, measurements=[RUN["measurements"][1], mtp]))
    assert _rows(text, "Measurement")[0][-1] == "Accept length"
    assert _rows(text, "1. ")[0][-1] == "n/a"
    assert _rows(text, "2. ")[0][-1] == "3.21"


def test_markdown_has_a_power_table_per_measurement():
    text = smoke_report_markdown(RUN)
    assert "## Power: 1. with new patches: flashinfer_allreduce_fusion" in text
    assert "## Power: 2. after rolling back flashinfer_allreduce_fusion" in text
    assert _rows(text, "GPU")[0] == ["GPU", "Mean W", "Max W", "Limit W", "Mean fraction of limit",
                                     "Util % (median)", "SM clock of max", "Cause"]
    gpu_rows = _rows(text, "0 ")
    assert gpu_rows == [["0", "125.0", "134.5", "600.0", "0.21", "100", "1.00", "spin-wait"],
                        ["0", "480.0", "489.5", "600.0", "0.80", "100", "1.00", "compute-bound"]]
    assert _rows(text, "mean") == [["mean", "125.0", "134.5", "600.0", "0.21", "100", "1.00", "spin-wait"],
                                   ["mean", "480.0", "489.5", "600.0", "0.80", "100", "1.00", "compute-bound"]]
    assert "Source nvidia-smi; all GPUs together 3,840.0 W on average, 1.027 J per output token." in text
    # The sentence under each table says why, with the numbers.
    assert "Cause: Host spin-wait on GPU 0, 1, 2, 3, 4, 5, 6, 7 of 8: GPU 0 is spin-waiting: busy 100 % of the time" in text
    assert "Cause: Host compute-bound on GPU 0, 1, 2, 3, 4, 5, 6, 7 of 8" in text


def test_markdown_counts_one_restart_and_none():
    assert "- Cost: 1 restart of the server, 7.5 min until" in smoke_report_markdown(
        dict(RUN, cost={"restarts": 1, "restart_s": 450}))
    assert "- Cost: 0 restarts of the server, 0.0 min until" in smoke_report_markdown(
        dict(RUN, cost={"restarts": "0", "restart_s": "0.0"}))
    assert "- Cost: n/a" in smoke_report_markdown({k: v for k, v in RUN.items() if k != "cost"})


def test_markdown_says_where_the_measurement_was_taken_from_an_earlier_run():
    reason = "the server runs what run 20261204T200500Z measured, unchanged since it started (Fri, PID 42)"
    markdown = smoke_report_markdown(dict(RUN, reused={"run_id": "20261204T200500Z", "reason": reason}))
    assert ("- Measured: not in this run; the server runs what run 20261204T200500Z measured, unchanged since it "
            "started (Fri, PID 42), so its measurement stands (smoke_test_reuse: false or --tags smoke measures "
            "again)") in markdown
    assert "- Measured:" not in smoke_report_markdown(dict(RUN, reused=None))


def test_markdown_tells_underfed_from_spin_wait_at_the_same_power():
    run = copy.deepcopy(RUN)
    run["measurements"] = run["measurements"][:1]
    run["measurements"][0]["result"]["power"] = _power(125.0, 236.0, util=12.0)
    text = smoke_report_markdown(run)
    assert _rows(text, "0 ")[0][-1] == "underfed"
    assert "GPU 0 is underfed: busy only 12 % of the time at 0.21 of its 600 W limit" in text
    assert _rows(smoke_fleet_markdown([run]), "gpu-node-1")[0][5] == "underfed"


def test_markdown_says_why_there_is_no_cause_without_activity_readings():
    run = copy.deepcopy(RUN)
    for gpu in run["measurements"][0]["result"]["power"]["gpus"]:
        del gpu["activity"]
    text = smoke_report_markdown(run)
    assert _rows(text, "0 ")[0][-3:] == ["n/a", "n/a", "unknown"]
    assert "Cause: No verdict for the host: GPU 0 has no verdict: no power or utilisation readings" in text


def test_markdown_marks_the_final_figures_that_miss_their_thresholds():
    run = copy.deepcopy(RUN)
    run["measurements"] = run["measurements"][:1]
    run["verdict"] = {"status": "fail", "rolled_back": [], "messages": [
        "Output throughput 236.0 tok/s is below the threshold 3000.0 tok/s (smoke_test_min_output_tok_s)."]}
    text = smoke_report_markdown(run)
    row, = _rows(text, "1. ")
    assert row[2] == "**236.0** ✗" and row[7] == "**61,000.0** ✗" and row[4] == "1,180.0"
    assert _rows(text, "0 ")[0][4] == "**0.21** ✗"
    assert "# Smoke check: gpu-node-1 — FAIL" in text and "Rolled back" not in text


def test_markdown_marks_power_given_as_watts_only_where_the_verdict_names_it():
    run = copy.deepcopy(RUN)
    run["measurements"] = run["measurements"][:1]
    for gpu in run["measurements"][0]["result"]["power"]["gpus"]:
        del gpu["mean_fraction_of_limit"]
    result = final_result(run)
    assert any("smoke_test_min_power_fraction" in miss for miss in threshold_misses(result, run["thresholds"]))
    text = smoke_report_markdown(run)
    assert _rows(text, "0 ")[0][4] == "**0.21** ✗"
    assert _rows(text, "mean")[0][4] == "**0.21** ✗"
    assert _rows(smoke_fleet_markdown([run]), "gpu-node-1")[0][4] == "**0.21** ✗"


def test_only_the_gpus_below_the_power_threshold_are_marked_in_their_own_cells():
    run = copy.deepcopy(RUN)
    gpus = run["measurements"][-1]["result"]["power"]["gpus"]
    gpus[3].update(mean_w=120.0, mean_fraction_of_limit=0.2)
    text = smoke_report_markdown(run)
    assert [row[4] for row in _rows(text, "3 ")] == ["0.21", "**0.20** ✗"]
    assert _rows(text, "mean")[1][4] == "0.72"  # the mean passes, unmarked


def test_markdown_says_n_a_where_figures_are_missing():
    run = {
        "host": "gpu-node-2",
        "measurements": [{"label": "as deployed", "patches_live": None, "result": {
            "output_tokens_per_s": None, "failed_requests": 4, "errors": ["request 0: connection refused"],
            "ttft_ms": {"mean": None, "p50": None, "p90": None, "p99": None},
            "power": {"source": None, "reason": "no power source: nvidia-smi not found at 'nvidia-smi'", "gpus": [],
                      "total_mean_w": None, "joules_per_output_token": None}}}],
        "verdict": {"status": "fail", "messages": None, "rolled_back": None},
    }
    text = smoke_report_markdown(run)
    row, = _rows(text, "1. ")
    assert row == ["1. as deployed", "none"] + ["n/a"] * 9 + ["4"]
    assert "Power: n/a (no power source: nvidia-smi not found at 'nvidia-smi')." in text
    assert "- request 0: connection refused" in text
    assert "Started: n/a" in text and "Profile n/a, SGLang n/a, model n/a" in text
    assert ("Thresholds: output at least n/a tok/s, TTFT p99 at most n/a ms, GPU power at least n/a of the limit"
            in text)
    assert "No messages." in text


def test_markdown_of_a_bare_run_and_of_no_run():
    assert "No measurements." in smoke_report_markdown({})
    assert smoke_report_markdown({}).startswith("# Smoke check: n/a — n/a\n")
    with pytest.raises(ReportError, match="must be a dict, got list"):
        smoke_report_markdown([RUN])


def test_markdown_text_cannot_break_the_tables_or_inject_html():
    run = copy.deepcopy(RUN)
    run["measurements"][0]["label"] = "a | b <script>\nc"
    run["verdict"]["messages"] = ["x <img src=y> | `z`"]
    run["patches_live"] = ["odd`gate"]
    text = smoke_report_markdown(run)
    row, = _rows(text, "1. ")
    assert row[0] == "1. a \\| b \\<script\\> c"
    assert "- x \\<img src=y\\> \\| \\`z\\`" in text
    assert "Patches live now: ``odd`gate``" in text
    assert "<" not in text.replace("\\<", "")


# ------------------------------------------------------------------ Markdown, the fleet

def test_fleet_table_has_a_row_per_host_from_its_final_measurement():
    failing = copy.deepcopy(RUN)
    failing["host"] = "gpu-node-2"
    failing["measurements"] = failing["measurements"][:1]
    failing["patches_live"] = [GATE]
    failing["verdict"] = {"status": "fail", "messages": [], "rolled_back": []}
    bare = {"host": "gpu-node-3", "measurements": [], "verdict": {"status": "pass"}}
    first = copy.deepcopy(RUN)
    first["fleet_band"] = {"status": "alone", "value": 3740.0, "median": 3740.0, "peers": ["gpu-node-1"]}
    failing["fleet_band"] = {"status": "fail", "value": 236.0, "median": 1988.0, "peers": ["gpu-node-1", "gpu-node-2"]}
    text = smoke_fleet_markdown([first, failing, bare])
    assert text.startswith("# Smoke check: 3 hosts\n\nFAIL 1, PASS 1, REGRESSION ROLLED BACK 1\n")
    assert _rows(text, "Host")[0] == ["Host", "Verdict", "Output tok/s", "TTFT p99 ms", "Mean power fraction",
                                      "Cause", "Restarts", "Patches live", "Rolled back", "Fleet band"]
    assert _rows(text, "gpu-node") == [
        ["gpu-node-1", "REGRESSION ROLLED BACK", "3,740.0", "2,900.0", "0.80", "compute-bound", "2", "none",
         "`flashinfer_allreduce_fusion`", "first of its configuration"],
        ["gpu-node-2", "FAIL", "**236.0** ✗", "**61,000.0** ✗", "**0.21** ✗", "spin-wait", "2",
         "`flashinfer_allreduce_fusion`", "none", "**12 % of the median 1,988.0 of 2 hosts** ✗"],
        ["gpu-node-3", "PASS", "n/a", "n/a", "n/a", "unknown", "n/a", "none", "none", "n/a"],
    ]


def test_fleet_of_none_and_wrong_input():
    assert smoke_fleet_markdown([]) == "# Smoke check: 0 hosts\n\nNo runs.\n"
    with pytest.raises(ReportError, match="wants a list of runs"):
        smoke_fleet_markdown(RUN)
    with pytest.raises(ReportError, match="must be a dict"):
        smoke_fleet_markdown(["gpu-node-1"])


# ------------------------------------------------------------------ the filter plugin

def test_the_filters_render_and_turn_bad_input_into_filter_errors():
    from ansible.errors import AnsibleFilterError

    filters = FilterModule().filters()
    assert set(filters) >= {"smoke_report_markdown", "smoke_report_svg", "smoke_fleet_markdown"}
    assert filters["smoke_report_markdown"](RUN) == smoke_report_markdown(RUN)
    assert filters["smoke_report_svg"](RUN) == smoke_report_svg(RUN)
    assert filters["smoke_fleet_markdown"]([RUN]) == smoke_fleet_markdown([RUN])
    with pytest.raises(AnsibleFilterError, match="must be a dict"):
        filters["smoke_report_svg"]("gpu-node-1")
    # A threshold the verdict refuses, the reports refuse too.
    garbled = dict(RUN, thresholds=dict(RUN["thresholds"], min_power_fraction="high"))
    for name in ("smoke_report_markdown", "smoke_report_svg"):
        with pytest.raises(AnsibleFilterError, match="smoke_test_min_power_fraction"):
            filters[name](garbled)
    with pytest.raises(AnsibleFilterError, match="smoke_test_min_power_fraction"):
        filters["smoke_fleet_markdown"]([garbled])


# ------------------------------------------------------------------ experiments

VERDICTS = [
    {"experiment": "nccl_min_nchannels_8", "decision": "kept", "reason": "faster at load low", "cause": "unknown",
     "remembered": False, "parity": {"matched": 4, "total": 4},
     "loads": {"low": {"verdict": "gain", "change": 0.081, "band": 0.05},
               "high": {"verdict": "no measurable change", "change": 0.01, "band": 0.05}}},
    {"experiment": GATE, "decision": "rejected", "reason": "slower at load high, low", "cause": "spin-wait",
     "remembered": True, "parity": {"matched": 4, "total": 4},
     "loads": {"high": {"verdict": "regression", "change": -0.9, "band": 0.05}}},
]


def test_the_report_has_a_row_per_experiment_with_each_load_parity_and_cause():
    run = dict(RUN, verdicts=VERDICTS, cost=dict(RUN["cost"], experiments=2, experiment_restarts=2,
                                                 baseline_reused=True))
    text = smoke_report_markdown(run)
    assert "## Experiments" in text
    helper, = _rows(text, "`nccl_min_nchannels_8`")
    assert helper == ["`nccl_min_nchannels_8`", "kept", "faster at load low",
                      "high no measurable change +1.0 % (±5.0); low gain +8.1 % (±5.0)", "4 of 4", "unknown",
                      "measured"]
    assert _rows(text, "`" + GATE + "`")[0][-1] == "remembered"
    assert "- Cost: 2 restarts of the server, 15.2 min until it was healthy again; 2 of them for 2 experiments " \
           "(the baseline kept from an earlier run)" in text
    assert "## Experiments" not in smoke_report_markdown(RUN)
    held = dict(run, cost=dict(run["cost"], baseline_reused=False, held_back=["nccl_min_nchannels_8", GATE]))
    assert "2 of them for 2 experiments (the baseline measured as deployed, the server started without " \
           "nccl_min_nchannels_8, %s)" % GATE in smoke_report_markdown(held)


def test_a_missed_latency_objective_is_shown_at_its_load():
    faster = {"experiment": "big_batches", "decision": "rejected", "reason": "breaks the latency objective",
              "cause": "unknown", "remembered": False, "parity": {"matched": 4, "total": 4},
              "loads": {"high": {"verdict": "gain", "change": 0.2, "band": 0.05},
                        "low": {"verdict": "no measurable change", "change": 0.0, "band": 0.05}},
              "objective": {"misses": [{"load": "high", "field": "ttft_p99_ms", "value": 2400.0, "bound": 2000.0},
                                       {"load": "high", "field": "itl_p99_ms", "value": None, "bound": 50.0}]}}
    row, = _rows(smoke_report_markdown(dict(RUN, verdicts=[faster])), "`big_batches`")
    assert row[3] == ("high gain +20.0 % (±5.0), objective missed: TTFT p99 2,400.0 ms > 2,000 ms, objective missed: "
                      "ITL p99 not measured (objective 50 ms); low no measurable change +0.0 % (±5.0)")


def test_the_fleet_summary_has_every_verdict_of_every_host():
    other = dict(RUN, host="gpu-node-2", verdicts=VERDICTS[1:])
    text = smoke_fleet_markdown([dict(RUN, verdicts=VERDICTS), other])
    assert "## Every verdict" in text
    rows = [row for row in _rows(text, "gpu-node-") if len(row) == 7]
    assert [(row[0], row[1], row[2]) for row in rows] == [
        ("gpu-node-1", "`nccl_min_nchannels_8`", "kept"), ("gpu-node-1", "`%s`" % GATE, "rejected"),
        ("gpu-node-2", "`%s`" % GATE, "rejected")]
    assert "## Every verdict" not in smoke_fleet_markdown([RUN])


# ------------------------------------------------------------------ the upgrade canary

def test_the_upgrade_canary_shows_both_releases_load_by_load():
    from ansible_collections.sm120.sglang.plugins.plugin_utils.upgrade import upgrade_verdict

    def measured(low, high):
        return {"config": [], "parity": [], "loads": {"low": [{"output_tokens_per_s": low}] * 3,
                                                      "high": [{"output_tokens_per_s": high}] * 3}}

    run = copy.deepcopy(RUN)
    run["verdict"] = {"status": "upgrade-rolled-back", "messages": [], "rolled_back": []}
    run["upgrade"] = upgrade_verdict(measured(400, 2700), measured(401, 1350),
                                     {"tolerance": 0.03, "noise_multiple": 2, "parity_min_match": 1, "loads": ["low", "high"]},
                                     "0.5.22", "0.5.23")
    text = smoke_report_markdown(run)
    assert "— UPGRADE ROLLED BACK" in text.splitlines()[0]
    assert "## Upgrade canary: SGLang `0.5.23` against `0.5.22` — lost" in text
    assert _rows(text, "high") == [["high", "2,700.0", "2,700.0, 2,700.0, 2,700.0 (0.0 %)", "1,350.0",
                                    "1,350.0, 1,350.0, 1,350.0 (0.0 %)", "-50.0 %", "±3.0 %", "regression"]]
    assert _rows(text, "low")[0][-1] == "no measurable change"
    assert "SGLang 0.5.23 is slower than 0.5.22 on this host at load high" in text
    # Without an upgrade, no section.
    assert "Upgrade canary" not in smoke_report_markdown(RUN)

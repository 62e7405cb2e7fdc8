# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Smoke measurements as sglang.bench_serving JSONL records, through the filter the smoke_test role applies."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.filter.smoke_report import FilterModule
from ansible_collections.sm120.sglang.plugins.plugin_utils.bench_record import BACKENDS, bench_serving_record
from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import sglang_wheel

jsonl = FilterModule().filters()["bench_serving_jsonl"]


def _latency(mean, p50, p90, p99):
    return {"mean": mean, "p50": p50, "p90": p90, "p99": p99}


def _result(output_tok_s, watts, util):
    return {
        "completed_requests": 256, "failed_requests": 0, "duration_s": 17.523, "requests_per_s": 14.609,
        "output_tokens_per_s": output_tok_s, "total_tokens_per_s": 18700.0, "input_tokens_total": 262144,
        "output_tokens_total": 65536, "ttft_ms": _latency(966.7, 725.0, 1450.0, 2900.0),
        "itl_ms": _latency(17.1, 17.0, 19.0, 24.1), "tpot_ms": _latency(17.0, 17.0, 18.0, 20.0),
        "e2e_latency_ms": _latency(4400.0, 4380.0, 4600.0, 4380.7),
        "power": {"source": "nvml", "total_mean_w": watts * 8, "joules_per_output_token": 1.027, "gpus": [
            {"index": i, "mean_w": watts, "limit_w": 600.0, "activity": {
                "samples": 30, "median_power_fraction": watts / 600.0, "median_util_pct": util,
                "median_clock_fraction": 1.0, "throttle_reason_samples": 30, "throttle_reason_share": 0.0,
                "power_reason_share": 0.0, "thermal_reason_share": 0.0}} for i in range(8)]},
    }


RUN = {
    "host": "gpu-node-1", "run_id": "20261201T120000Z",
    "config": {"profile": "glm5-nvfp4-tp8", "sglang_version": "0.5.23", "model": "glm-5", "endpoint": "completions",
               "loads": {"low": {"concurrency": 4, "num_requests": 32, "input_tokens": 1024, "output_tokens": 256},
                         "high": {"concurrency": 64, "num_requests": 256, "input_tokens": 1024, "output_tokens": 256}}},
    "measurements": [
        {"label": "with flashinfer_allreduce_fusion, load high", "load": "high",
         "patches_live": ["flashinfer_allreduce_fusion"], "runs": [230.0, 236.0, 240.0], "spread": 0.0424,
         "result": _result(236.0, 125.0, 100.0)},
        {"label": "baseline: none of flashinfer_allreduce_fusion, load high", "load": "high", "patches_live": [],
         "tuning_live": ["nccl_min_nchannels_8"], "result": _result(3740.0, 480.0, 96.0)},
    ],
}


def test_one_line_per_measurement_in_order_each_valid_json():
    lines = jsonl(RUN).splitlines()
    assert len(lines) == 2 and jsonl(RUN).endswith("\n")
    records = [json.loads(line) for line in lines]
    assert [record["tag"] for record in records] == [m["label"] for m in RUN["measurements"]]
    assert [record["output_throughput"] for record in records] == [236.0, 3740.0]
    assert [record["cause"] for record in records] == ["spin-wait", "compute-bound"]


def test_the_record_carries_bench_servings_figures_and_power():
    record = bench_serving_record(RUN["measurements"][1], RUN)
    assert record["backend"] == "sglang-oai" and record["request_rate"] == "inf"
    assert (record["max_concurrency"], record["random_input_len"], record["random_output_len"]) == (64, 1024, 256)
    assert (record["completed"], record["total_input_tokens"], record["total_output_tokens"]) == (256, 262144, 65536)
    # Output throughput counts generated tokens; total adds the prompts', as bench_serving's do.
    assert record["output_throughput"] == 3740.0 and record["total_throughput"] == 18700.0
    assert record["input_throughput"] == round(262144 / 17.523, 1)
    assert (record["mean_ttft_ms"], record["median_ttft_ms"], record["p90_ttft_ms"], record["p99_ttft_ms"]) == (
        966.7, 725.0, 1450.0, 2900.0)
    assert record["p99_itl_ms"] == 24.1 and record["median_tpot_ms"] == 17.0 and record["p99_e2e_latency_ms"] == 4380.7
    assert (record["avg_power_w"], record["power_limit_w"], record["joules_per_output_token"]) == (3840.0, 4800.0, 1.027)
    assert (record["host"], record["sglang_version"], record["patches_live"]) == ("gpu-node-1", "0.5.23", [])
    assert (record["load"], record["tuning_live"]) == ("high", ["nccl_min_nchannels_8"])
    repeated = bench_serving_record(RUN["measurements"][0], RUN)
    assert repeated["repeats_output_throughput"] == [230.0, 236.0, 240.0]
    # Their coefficient of variation: sample standard deviation 5.033 over the mean 235.33.
    assert repeated["repeats_cv"] == 0.0214 and record["repeats_cv"] is None
    # What serving_benchmark does not measure is left out, not made up.
    assert "std_ttft_ms" not in record and "p95_itl_ms" not in record
    # No speculative decoding: no accept length; with it, the server's, under bench_serving's name.
    assert record["accept_length"] is None
    speculative = dict(RUN["measurements"][1], result=dict(RUN["measurements"][1]["result"], accept_length=3.214))
    assert bench_serving_record(speculative, RUN)["accept_length"] == 3.214


def test_the_server_s_own_cap_on_running_requests_is_carried_where_it_said_one():
    assert bench_serving_record(RUN["measurements"][1], RUN)["max_running_requests"] is None
    capped = dict(RUN["measurements"][1], result=dict(RUN["measurements"][1]["result"], max_running_requests=48))
    assert bench_serving_record(capped, RUN)["max_running_requests"] == 48


def test_the_chat_endpoint_is_bench_servings_chat_backend_and_missing_figures_are_null():
    run = dict(RUN, config=dict(RUN["config"], endpoint="chat"))
    measurement = {"label": "as deployed", "load": "low", "patches_live": None, "result": {"failed_requests": 64}}
    record = bench_serving_record(measurement, run)
    assert record["backend"] == BACKENDS["chat"] == "sglang-oai-chat"
    assert record["output_throughput"] is None and record["mean_ttft_ms"] is None and record["avg_power_w"] is None
    assert record["power_limit_w"] is None and record["cause"] == "unknown" and record["failed"] == 64
    json.dumps(record, allow_nan=False)


@pytest.mark.parametrize("config", [
    dict(RUN["config"], endpoint="grpc"),
    dict(RUN["config"], loads={}),
    dict(RUN["config"], loads={"high": {"concurrency": "x", "num_requests": 1, "input_tokens": 1, "output_tokens": 1}}),
    dict(RUN["config"], loads={"high": {"concurrency": 64}}),
])
def test_a_load_that_is_not_the_smoke_tests_is_named(config):
    with pytest.raises(AnsibleFilterError, match="a measurement's load 'high' must be one of the run's config.loads"):
        jsonl(dict(RUN, config=config))


def test_a_run_or_measurement_of_the_wrong_shape_is_named():
    with pytest.raises(AnsibleFilterError, match="a run is"):
        jsonl(["not", "a", "run"])
    with pytest.raises(AnsibleFilterError, match="a measurement is"):
        jsonl(dict(RUN, measurements=[{"label": "x"}]))


def test_the_record_says_whether_the_load_met_its_latency_objective():
    # The record's p99 TTFT is 2900 ms and p99 ITL 24.1 ms.
    def with_slo(slo):
        loads = dict(RUN["config"]["loads"], high=dict(RUN["config"]["loads"]["high"], slo=slo))
        return bench_serving_record(RUN["measurements"][1], dict(RUN, config=dict(RUN["config"], loads=loads)))
    met = with_slo({"ttft_p99_ms": 3000, "itl_p99_ms": 50})
    assert (met["slo"], met["slo_met"]) == ({"ttft_p99_ms": 3000, "itl_p99_ms": 50}, True)
    assert with_slo({"ttft_p99_ms": 2000})["slo_met"] is False
    assert with_slo({"itl_p99_ms": 24})["slo_met"] is False
    plain = bench_serving_record(RUN["measurements"][1], RUN)
    assert (plain["slo"], plain["slo_met"]) == (None, None)


def test_every_bench_serving_key_written_is_one_bench_serving_writes():
    # The result dict of benchmark() in the real 0.5.23 wheel, where bench_serving moved to sglang.benchmark.
    source = sglang_wheel("0.5.23").read("sglang/benchmark/serving.py").decode()
    ours = {"avg_power_w", "power_limit_w", "joules_per_output_token", "power_source", "cause", "failed", "host",
            "run_id", "sglang_version", "profile", "model", "patches_live", "tuning_live", "load",
            "repeats_output_throughput", "repeats_cv", "slo", "slo_met", "max_running_requests"}
    for key in bench_serving_record(RUN["measurements"][0], RUN):
        if key not in ours:
            assert '"%s":' % key in source, key

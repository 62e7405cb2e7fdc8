# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""main() of sm120.sglang.serving_benchmark through the run_module fixture, against real local servers."""

from __future__ import annotations

import time

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils import gpu_power
from ansible_collections.sm120.sglang.plugins.modules import serving_benchmark
from ansible_collections.sm120.sglang.tests.unit.plugins.module_utils.test_gpu_power import fake_nvidia_smi
from ansible_collections.sm120.sglang.tests.unit.plugins.module_utils.test_serving_benchmark import (
    SseServer,
    unused_port,
)
from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail

RETURNED_KEYS = {
    "changed", "url", "completed_requests", "failed_requests", "not_started_requests", "warmup_failed_requests",
    "errors", "duration_s", "requests_per_s", "output_tokens_per_s", "total_tokens_per_s", "input_tokens_total",
    "output_tokens_total", "token_count_source", "ttft_ms", "itl_ms", "tpot_ms", "e2e_latency_ms", "power",
    "prompt_format", "input_tokens_per_request", "accept_length", "max_running_requests",
}
POWER_KEYS = {"source", "reason", "interval_s", "samples", "sample_errors", "gpus", "total_mean_w", "energy_j",
              "joules_per_output_token"}


@pytest.fixture(autouse=True)
def without_pynvml(monkeypatch):
    # The GPUs these tests see are fake nvidia-smi scripts, whatever the test machine has installed.
    monkeypatch.setattr(gpu_power, "_import_pynvml", lambda: None)


def args_for(url, **overrides):
    args = dict(url=url, model="glm-5", concurrency=2, num_requests=4, num_warmup=1, input_tokens=8,
                output_tokens=3, timeout=30, sample_power=False)
    args.update(overrides)
    return args


def test_returns_every_documented_key(run_module):
    with SseServer() as server:
        result = run_module(serving_benchmark.main, args_for(server.url))
    assert set(result) - {"invocation"} == RETURNED_KEYS
    assert set(result["power"]) == POWER_KEYS
    assert result["changed"] is False
    assert (result["completed_requests"], result["failed_requests"], result["output_tokens_total"]) == (4, 0, 12)
    assert result["power"]["source"] is None and result["power"]["reason"] == "sample_power is false"


def test_runs_in_check_mode_too(run_module):
    with SseServer() as server:
        result = run_module(serving_benchmark.main, args_for(server.url, _ansible_check_mode=True))
    assert result["completed_requests"] == 4 and len(server.requests) == 5


def test_api_key_is_sent_and_never_returned(run_module):
    with SseServer() as server:
        result = run_module(serving_benchmark.main, args_for(server.url, api_key="sk-secret", endpoint="chat"))
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-secret"
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert "sk-secret" not in repr(result)


def test_power_from_a_fake_nvidia_smi(run_module, tmp_path):
    with SseServer(token_delay=0.005) as server:
        result = run_module(serving_benchmark.main, args_for(
            server.url, output_tokens=10, sample_power=True, power_interval=0.02,
            nvidia_smi=fake_nvidia_smi(tmp_path)))
    power = result["power"]
    assert power["source"] == "nvidia-smi" and power["reason"] is None
    assert [gpu["index"] for gpu in power["gpus"]] == [0, 1, 2]
    assert power["gpus"][0]["limit_w"] == 700.0 and power["gpus"][1]["mean_w"] is None
    assert power["joules_per_output_token"] > 0


def test_without_a_power_source_the_run_goes_on(run_module, tmp_path):
    with SseServer() as server:
        result = run_module(serving_benchmark.main, args_for(
            server.url, sample_power=True, nvidia_smi=str(tmp_path / "missing")))
    assert result["completed_requests"] == 4
    assert result["power"]["reason"].startswith("no power source: ")


def test_dead_server_fails_naming_the_url(run_module):
    url = "http://127.0.0.1:%d" % unused_port()
    began = time.monotonic()
    with pytest.raises(ModuleFail) as failure:
        run_module(serving_benchmark.main, args_for(url))
    assert time.monotonic() - began < 10
    assert url + "/v1/completions" in failure.value.result["msg"]
    assert "connection refused" in failure.value.result["msg"]
    assert failure.value.result["warmup_failed_requests"] == 1


def test_stalled_server_fails_within_the_timeout_with_partial_figures(run_module):
    with SseServer(stall_after_tokens=1) as server:
        began = time.monotonic()
        with pytest.raises(ModuleFail) as failure:
            run_module(serving_benchmark.main, args_for(server.url, num_warmup=0, timeout=1))
        assert time.monotonic() - began < 6
    result = failure.value.result
    assert "did not finish within the timeout of 1.0 s" in result["msg"] and server.url in result["msg"]
    assert result["completed_requests"] == 0 and result["not_started_requests"] >= 2
    assert "failed" not in result  # Ansible's own flag; the count is failed_requests


def test_every_request_failing_fails_the_module(run_module):
    with SseServer(fail_every=1) as server:
        with pytest.raises(ModuleFail) as failure:
            run_module(serving_benchmark.main, args_for(server.url, num_warmup=0))
    assert failure.value.result["msg"].startswith("all 4 requests to %s/v1/completions failed" % server.url)
    assert "HTTP 500" in failure.value.result["msg"]
    assert failure.value.result["failed_requests"] == 4


@pytest.mark.parametrize("overrides, complaint", [
    (dict(concurrency=0), "concurrency must be at least 1"),
    (dict(url="localhost:30000"), "url must be an http:// or https:// base URL"),
    (dict(power_interval=-1.0, sample_power=True), "power_interval must be more than 0"),
])
def test_bad_parameters_fail_before_any_request(run_module, overrides, complaint):
    args = args_for("http://127.0.0.1:1")
    args.update(overrides)
    with pytest.raises(ModuleFail, match=complaint):
        run_module(serving_benchmark.main, args)

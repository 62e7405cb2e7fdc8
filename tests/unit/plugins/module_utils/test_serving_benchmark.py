# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whole runs against real HTTP servers on 127.0.0.1, the plan, the prompts and the statistics.

Timing assertions are lower bounds the servers' own sleeps guarantee, or generous
upper bounds: these tests must pass on a loaded two-core machine.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils import serving_benchmark as sb
from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_power import PowerPlan


# ---------------------------------------------------------------- a streaming server to test against

class _SseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep pytest's output clean
        pass

    def do_GET(self):
        server = self.server
        with server.lock:
            server.gets.append({"path": self.path, "headers": dict(self.headers)})
        if self.path != "/server_info" or server.server_info is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        payload = json.dumps(server.server_info).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            number = len(server.requests)
            server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
            server.connections.add(self.client_address)
        if server.stall_after_tokens == 0:
            server.release.wait(30)
            self.close_connection = True
            return
        if server.fail_every and number % server.fail_every == 0:
            self._send_error(number)
            return
        if server.strings_only and isinstance(body.get("prompt"), list):
            self._send_strings_only()
            return
        if server.api_key and self.headers.get("Authorization") != "Bearer " + server.api_key:
            # As SGLang started with --api-key answers a request without it, or with another one.
            payload = b'{"error": "Unauthorized"}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        if server.http10:
            self.protocol_version = "HTTP/1.0"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if not server.http10:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._stream(body)

    def _send_error(self, number):
        payload = json.dumps({"error": {"message": "boom in request %d" % number}}).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send_strings_only(self):
        # As sglang-router 0.3.2 answered a list of token ids, measured (docs/evidence/sglang-router.md).
        payload = (b"Failed to deserialize the JSON body into the target type: prompt: data did not match any "
                   b"variant of untagged enum StringOrArray at line 1 column 29")
        self.send_response(422)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _event(self, data):
        event = b"data: " + (data if isinstance(data, bytes) else json.dumps(data).encode()) + b"\n\n"
        if self.server.http10:
            self.wfile.write(event)
        else:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))

    def _stream(self, body):
        server = self.server
        chat = "messages" in body
        prompt = body["messages"][0]["content"] if chat else body["prompt"]
        generated = body["max_tokens"]
        time.sleep(server.first_token_delay)
        if chat:
            self._event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], "usage": None})
        for n in range(generated):
            if n == server.stall_after_tokens:
                server.release.wait(30)
                self.close_connection = True
                return
            if n:
                time.sleep(server.token_delay)
            text = " word%d" % n
            choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
            self._event({"choices": [dict(choice, finish_reason=None)], "usage": None})
        if server.usage:
            # SGLang counts a list of ids as they are; here a text prompt is a token a word.
            prompt_tokens = len(prompt) if isinstance(prompt, list) else len(prompt.split())
            self._event({"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": generated,
                                                  "total_tokens": prompt_tokens + generated}})
        self._event(b"[DONE]")
        if server.http10:
            self.close_connection = True
        else:
            self.wfile.write(b"0\r\n\r\n")


class SseServer:
    """An OpenAI-style streaming server on 127.0.0.1 at a random port, in a thread.

    stall_after_tokens=0 accepts and reads a request, then never answers;
    stall_after_tokens=N stops streaming after N tokens.
    strings_only=True answers a prompt given as a list with 422, as sglang-router's /v1/completions does.
    server_info: what GET /server_info answers (404 without).
    api_key: answer 401 to a request without "Authorization: Bearer <api_key>".
    """

    def __init__(self, usage=True, first_token_delay=0.0, token_delay=0.0, fail_every=0,
                 stall_after_tokens=None, http10=False, strings_only=False, server_info=None, api_key=""):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _SseHandler)
        self.httpd.daemon_threads = True
        for name, value in dict(usage=usage, first_token_delay=first_token_delay, token_delay=token_delay,
                                fail_every=fail_every, stall_after_tokens=stall_after_tokens, http10=http10,
                                strings_only=strings_only, server_info=server_info, api_key=api_key).items():
            setattr(self.httpd, name, value)
        self.httpd.lock = threading.Lock()
        self.httpd.gets = []
        self.httpd.requests = []
        self.httpd.connections = set()
        self.httpd.release = threading.Event()
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.httpd.server_address[1]

    @property
    def requests(self):
        return self.httpd.requests

    @property
    def connections(self):
        return self.httpd.connections

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.httpd.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def unused_port():
    """A port nothing listens on: bound once, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def plan_for(url, **overrides):
    values = dict(url=url, model="glm-5", concurrency=2, num_requests=6, num_warmup=1, input_tokens=16,
                  output_tokens=5, timeout=30, run_tag="t")
    values.update(overrides)
    return sb.BenchmarkPlan(**values)


NO_POWER = PowerPlan(enabled=False)


# ---------------------------------------------------------------- runs against the servers

def test_counts_and_latencies_come_from_the_stream():
    with SseServer(first_token_delay=0.05, token_delay=0.002) as server:
        result = sb.run_benchmark(plan_for(server.url), NO_POWER)
    assert result["url"] == server.url + "/v1/completions"
    assert (result["completed_requests"], result["failed_requests"], result["not_started_requests"]) == (6, 0, 0)
    assert result["warmup_failed_requests"] == 0
    assert result["errors"] == []
    assert result["token_count_source"] == "usage"
    assert result["output_tokens_total"] == 6 * 5
    assert result["input_tokens_total"] == 6 * 16
    assert len(server.requests) == 7  # one warm-up
    assert result["ttft_ms"]["p50"] >= 50.0 and result["ttft_ms"]["p99"] < 10000
    assert result["e2e_latency_ms"]["mean"] >= 50.0 + 4 * 2.0
    for summary in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_latency_ms"):
        assert set(result[summary]) == {"mean", "p50", "p90", "p99"}
        assert 0 <= result[summary]["p50"] <= result[summary]["p90"] <= result[summary]["p99"]
    assert result["output_tokens_per_s"] == pytest.approx(30 / result["duration_s"], rel=0.01)
    assert result["total_tokens_per_s"] == pytest.approx(126 / result["duration_s"], rel=0.01)
    assert result["requests_per_s"] == pytest.approx(6 / result["duration_s"], rel=0.01)
    assert result["power"]["reason"] == "sample_power is false"


def test_on_drive_gets_the_measured_requests_and_not_the_warm_up():
    kept = []
    with SseServer(first_token_delay=0.02, token_delay=0.002) as server:
        result = sb.run_benchmark(plan_for(server.url), NO_POWER, on_drive=kept.append)
    assert len(kept) == 1 and len(kept[0].outcomes) == result["completed_requests"] == 6
    for outcome in kept[0].outcomes:
        assert kept[0].started <= outcome.started <= outcome.first_token <= outcome.finished <= kept[0].finished
        assert len(outcome.token_times) >= 1


def test_the_accept_length_is_read_from_server_info_after_the_run_as_bench_serving_reads_it():
    info = {"speculative_algorithm": "EAGLE", "internal_states": [{"avg_spec_accept_length": 3.2143}]}
    with SseServer(server_info=info) as server:
        result = sb.run_benchmark(plan_for(server.url + "/v1", api_key="sk-test"), NO_POWER)
    assert result["accept_length"] == 3.214
    assert [get["path"] for get in server.httpd.gets] == ["/server_info"]
    assert server.httpd.gets[0]["headers"]["Authorization"] == "Bearer sk-test"
    # Without speculative decoding SGLang leaves the field out; a router or another server has no /server_info.
    with SseServer(server_info={"internal_states": [{"last_gen_throughput": 12.0}]}) as server:
        assert sb.run_benchmark(plan_for(server.url), NO_POWER)["accept_length"] is None
    with SseServer() as server:
        assert sb.run_benchmark(plan_for(server.url), NO_POWER)["accept_length"] is None


def test_the_server_s_own_bound_on_running_requests_is_read_from_server_info_after_the_run():
    # What SGLang 0.5.16 answered with speculative decoding on and --max-running-requests unset (sixth H200 run).
    info = {"max_running_requests": 48, "speculative_algorithm": "STANDALONE",
            "internal_states": [{"avg_spec_accept_length": 1.00003}]}
    with SseServer(server_info=info) as server:
        result = sb.run_benchmark(plan_for(server.url + "/v1"), NO_POWER)
    assert (result["max_running_requests"], result["accept_length"]) == (48, 1.0)
    with SseServer() as server:
        assert sb.run_benchmark(plan_for(server.url), NO_POWER)["max_running_requests"] is None


@pytest.mark.parametrize("info, expected", [
    ({"max_running_requests": 48}, 48),
    ({"decode": [{"max_running_requests": 256}], "max_running_requests": 8}, 256),
    ({"max_running_requests": None}, None),
    ({"max_running_requests": 0}, None),
    ({"max_running_requests": True}, None),
    ({"max_running_requests": "48"}, None),
    ({}, None),
    (None, None),
])
def test_max_running_of_takes_only_a_bound_sglang_set(info, expected):
    assert sb.max_running_of(info) == expected


@pytest.mark.parametrize("info, expected", [
    ({"internal_states": [{"avg_spec_accept_length": 2.5}]}, 2.5),
    ({"decode": [{"internal_states": [{"avg_spec_accept_length": 1.75}]}]}, 1.75),
    ({"internal_states": [{"avg_spec_accept_length": 0}]}, None),
    ({"internal_states": [{"avg_spec_accept_length": True}]}, None),
    ({"internal_states": [{"avg_spec_accept_length": float("nan")}]}, None),
    ({"internal_states": [{"avg_spec_accept_length": "3"}]}, None),
    ({"internal_states": []}, None),
    ({"internal_states": "x"}, None),
    ({}, None),
    ([], None),
    (None, None),
])
def test_accept_length_of_takes_only_what_sglang_reports(info, expected):
    assert sb.accept_length_of(info) == expected


def test_requests_ask_for_a_fixed_length_stream_with_usage():
    with SseServer() as server:
        sb.run_benchmark(plan_for(server.url, api_key="sk-test"), NO_POWER)
    first = server.requests[0]
    assert first["path"] == "/v1/completions"
    assert first["headers"]["Authorization"] == "Bearer sk-test"
    body = first["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True and body["max_tokens"] == 5 and body["model"] == "glm-5"
    prompts = [request["body"]["prompt"] for request in server.requests]
    assert all(isinstance(prompt, list) and len(prompt) == 16 for prompt in prompts)
    assert all(isinstance(token, int) and 256 <= token < 32000 - 1024 for prompt in prompts for token in prompt)
    assert len({prompt[0] for prompt in prompts}) == len(prompts), "each prompt must defeat the prefix cache"


def test_token_id_prompts_are_exactly_the_load_asked_for_and_differ_between_runs():
    with SseServer() as server:
        first = sb.run_benchmark(plan_for(server.url, run_tag="a", vocab_size=4096), NO_POWER)
        sb.run_benchmark(plan_for(server.url, run_tag="b", vocab_size=4096), NO_POWER)
    assert first["prompt_format"] == "token_ids"
    assert first["input_tokens_total"] == 6 * 16 and first["input_tokens_per_request"] == 16.0
    prompts = [request["body"]["prompt"] for request in server.requests]
    assert all(256 <= token < 4096 - 1024 for prompt in prompts for token in prompt)
    # No two prompts of the two runs (warm-up included) share their first id, so none shares a cached prefix.
    assert len({prompt[0] for prompt in prompts}) == 14
    # Past the first id each is a window of the run's pool, not the same tokens in every request.
    assert len({tuple(prompt[1:]) for prompt in prompts}) == 14


def test_text_prompts_are_words_and_report_what_the_server_counted():
    with SseServer() as server:
        result = sb.run_benchmark(plan_for(server.url, prompt_format="text"), NO_POWER)
    prompts = [request["body"]["prompt"] for request in server.requests]
    assert all(isinstance(prompt, str) and len(prompt.split()) == 16 for prompt in prompts)
    assert len(set(prompts)) == len(prompts)
    assert result["prompt_format"] == "text" and result["input_tokens_per_request"] == 16.0


def test_each_worker_keeps_one_connection():
    with SseServer() as server:
        sb.run_benchmark(plan_for(server.url, num_requests=10, num_warmup=0), NO_POWER)
    assert 1 <= len(server.connections) <= 2  # one worker may have taken every request


def test_chat_endpoint_counts_content_not_the_role_chunk():
    with SseServer(usage=False) as server:
        result = sb.run_benchmark(plan_for(server.url + "/v1/", endpoint="chat"), NO_POWER)
    assert result["url"] == server.url + "/v1/chat/completions"
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert server.requests[0]["body"]["messages"][0]["role"] == "user"
    assert isinstance(server.requests[0]["body"]["messages"][0]["content"], str)
    assert result["prompt_format"] == "text"
    assert result["completed_requests"] == 6
    assert result["output_tokens_total"] == 6 * 5


def test_server_without_usage_falls_back_to_counting_chunks():
    with SseServer(usage=False) as server:
        result = sb.run_benchmark(plan_for(server.url), NO_POWER)
    assert result["token_count_source"] == "stream_chunks"
    assert result["output_tokens_total"] == 6 * 5
    assert result["input_tokens_total"] == 6 * 16  # the requested estimate


def test_http_1_0_server_that_closes_after_each_stream():
    with SseServer(http10=True) as server:
        result = sb.run_benchmark(plan_for(server.url), NO_POWER)
    assert result["completed_requests"] == 6 and result["output_tokens_total"] == 30


def test_failed_requests_are_counted_and_the_first_reported():
    with SseServer(fail_every=3) as server:
        result = sb.run_benchmark(plan_for(server.url, num_requests=12, num_warmup=0), NO_POWER)
    assert (result["completed_requests"], result["failed_requests"]) == (8, 4)
    assert len(result["errors"]) == 4
    assert all("HTTP 500 Internal Server Error" in error and "boom in request" in error for error in result["errors"])
    assert result["output_tokens_total"] == 8 * 5


def test_errors_are_capped():
    with SseServer(fail_every=1) as server:
        with pytest.raises(sb.BenchmarkError) as failure:
            sb.run_benchmark(plan_for(server.url, num_requests=8, num_warmup=0), NO_POWER)
    assert len(failure.value.result["errors"]) == sb.MAX_REPORTED_ERRORS
    assert failure.value.result["failed_requests"] == 8
    assert str(failure.value).startswith("all 8 requests to %s/v1/completions failed" % server.url)


@pytest.mark.parametrize("num_warmup", [2, 0])
def test_a_server_that_takes_strings_only_is_named_with_the_fix(num_warmup):
    with SseServer(strings_only=True) as server:
        with pytest.raises(sb.BenchmarkError) as failure:
            sb.run_benchmark(plan_for(server.url, num_warmup=num_warmup), NO_POWER)
    message = str(failure.value)
    assert "HTTP 422" in message and "prompt_format=text" in message


def test_a_server_that_takes_strings_only_is_measured_with_text_prompts():
    with SseServer(strings_only=True) as server:
        result = sb.run_benchmark(plan_for(server.url, prompt_format="text"), NO_POWER)
    assert (result["completed_requests"], result["failed_requests"]) == (6, 0)
    assert all(isinstance(request["body"]["prompt"], str) for request in server.requests)


@pytest.mark.parametrize("sent,told", [("", "The server asks for an API key: set smoke_test_api_key"),
                                       ("wrong", "The server refused the API key sent: set smoke_test_api_key")])
def test_a_server_that_wants_another_key_is_answered_with_the_variable_to_set(sent, told):
    with SseServer(api_key="right") as server:
        with pytest.raises(sb.BenchmarkError) as failure:
            sb.run_benchmark(plan_for(server.url, api_key=sent), NO_POWER)
    message = str(failure.value)
    assert "HTTP 401" in message and told in message and "right" not in message


def test_the_key_hint_is_named_only_for_a_refused_key():
    assert sb.api_key_hint("", ["request 0: HTTP 500 Internal Server Error: boom"]) == ""
    assert sb.api_key_hint("", []) == ""
    assert "smoke_test_api_key" in sb.api_key_hint("", ["request 0: HTTP 403 Forbidden: no"])


def test_the_fix_is_named_only_when_every_refusal_reads_as_unreadable_token_ids():
    refused = ["request 0: HTTP 422 Unprocessable Entity: StringOrArray", "request 1: HTTP 400 Bad Request: x"]
    assert "prompt_format=text" in sb.prompt_format_hint("token_ids", refused)
    assert sb.prompt_format_hint("text", refused) == ""
    assert sb.prompt_format_hint("token_ids", refused + ["request 2: HTTP 500 Internal Server Error: boom"]) == ""
    assert sb.prompt_format_hint("token_ids", ["request 0: connection refused"]) == ""
    assert sb.prompt_format_hint("token_ids", []) == ""


def test_dead_server_fails_fast_and_says_so():
    url = "http://127.0.0.1:%d" % unused_port()
    began = time.monotonic()
    with pytest.raises(sb.BenchmarkError) as failure:
        sb.run_benchmark(plan_for(url, num_warmup=2), NO_POWER)
    assert time.monotonic() - began < 10
    message = str(failure.value)
    assert url + "/v1/completions" in message and "connection refused" in message
    assert "warm-up" in message


def test_dead_server_without_warmup_fails_every_request():
    url = "http://127.0.0.1:%d" % unused_port()
    with pytest.raises(sb.BenchmarkError) as failure:
        sb.run_benchmark(plan_for(url, num_warmup=0), NO_POWER)
    assert "all 6 requests" in str(failure.value) and "connection refused" in str(failure.value)
    assert failure.value.result["failed_requests"] == 6


def test_server_that_never_answers_fails_within_the_timeout():
    with SseServer(stall_after_tokens=0) as server:
        began = time.monotonic()
        with pytest.raises(sb.BenchmarkError) as failure:
            sb.run_benchmark(plan_for(server.url, timeout=1, num_warmup=0), NO_POWER)
        elapsed = time.monotonic() - began
    assert 0.9 <= elapsed < 6
    message = str(failure.value)
    assert "did not finish within the timeout of 1 s" in message and server.url in message
    assert "timed out" in message
    assert failure.value.result["not_started_requests"] >= 4  # both workers stuck in their first request


def test_server_that_stops_streaming_fails_within_the_timeout():
    with SseServer(stall_after_tokens=2) as server:
        began = time.monotonic()
        with pytest.raises(sb.BenchmarkError) as failure:
            sb.run_benchmark(plan_for(server.url, timeout=1, num_warmup=1), NO_POWER)
        elapsed = time.monotonic() - began
    assert elapsed < 6
    assert "warm-up against %s/v1/completions did not finish" % server.url in str(failure.value)


# ---------------------------------------------------------------- plan and prompt

@pytest.mark.parametrize("overrides, complaint", [
    (dict(url="127.0.0.1:30000"), "url must be an http"),
    (dict(url="http://127.0.0.1:99999"), "invalid port"),
    (dict(endpoint="embeddings"), "endpoint must be one of"),
    (dict(concurrency=0), "concurrency must be at least 1"),
    (dict(num_requests=0), "num_requests must be at least 1"),
    (dict(num_warmup=-1), "num_warmup must not be negative"),
    (dict(timeout=0), "timeout must be more than 0"),
    (dict(prompt_format="ids"), "prompt_format must be one of token_ids, text"),
    (dict(endpoint="chat", prompt_format="token_ids"), "token_ids needs endpoint completions.*prompt_format: text"),
    (dict(vocab_size=2000), "vocab_size must be the model's vocabulary size .*at least 2304.*got 2000"),
])
def test_plans_that_cannot_work_are_refused(overrides, complaint):
    overrides = dict(overrides)
    with pytest.raises(ValueError, match=complaint):
        sb.run_benchmark(plan_for(overrides.pop("url", "http://127.0.0.1:1"), **overrides), NO_POWER)


def test_power_interval_must_be_positive():
    with pytest.raises(ValueError, match="power_interval"):
        sb.run_benchmark(plan_for("http://127.0.0.1:1"), PowerPlan(interval=0))


def test_token_id_prompt_is_its_own_id_then_a_window_of_the_pool():
    prompts = sb.TokenIdPrompts(5, 32000, "run")
    first, second = json.loads(prompts.ids_text(0)), json.loads(prompts.ids_text(1))
    assert len(first) == len(second) == 5
    assert second[0] == first[0] + 1 or (first[0] == 32000 - 1024 - 1 and second[0] == 256)
    assert first[1:] == [int(token) for token in prompts.pool[0:4]]
    assert second[1:] == [int(token) for token in prompts.pool[7919 % 4096:7919 % 4096 + 4]]
    assert json.loads(sb.TokenIdPrompts(1, 32000, "run").ids_text(3)) == [first[0] + 3]


def test_prompt_has_the_requested_number_of_words_and_leads_with_its_tag():
    prompt = sb.build_prompt(100, "abc-7")
    assert prompt.startswith("abc-7: ") and len(prompt.split()) == 100
    assert sb.build_prompt(1, "x") == "x:"


# ---------------------------------------------------------------- statistics

def test_percentile_edge_cases():
    assert sb.percentile([], 50) is None
    assert sb.percentile([4.0], 0) == sb.percentile([4.0], 99) == 4.0
    assert sb.percentile([1, 2, 3, 4], 50) == 2.5
    assert sb.percentile(list(range(1, 11)), 90) == pytest.approx(9.1)
    assert sb.percentile([1, 5], 0) == 1 and sb.percentile([1, 5], 100) == 5
    for bad in (-1, 100.5):
        with pytest.raises(ValueError):
            sb.percentile([1], bad)


def test_summaries_are_in_milliseconds_and_null_without_data():
    assert sb.summarize_ms([]) == {"mean": None, "p50": None, "p90": None, "p99": None}
    assert sb.summarize_ms([0.003, 0.001, 0.002]) == {"mean": 2.0, "p50": 2.0, "p90": 2.8, "p99": 2.98}

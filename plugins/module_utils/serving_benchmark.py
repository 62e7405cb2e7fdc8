# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load an OpenAI-compatible endpoint at a fixed concurrency and sample GPU power meanwhile.

This is the run: check the plan, build prompts that defeat the prefix cache,
warm up, measure, and sum the outcomes up into throughput and latency figures.
serving_benchmark_requests.py sends the requests and times them;
serving_benchmark_power.py samples power meanwhile, through gpu_power.

Standard library only: this runs on the target with the host's own Python 3.9+.
Nothing here knows about Ansible; the module wires parameters and results.
"""

from __future__ import annotations

import dataclasses
import functools
import http.client
import json
import math
import random
import ssl
import time
import uuid
from dataclasses import dataclass
from typing import Optional

from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_power import PowerPlan, power_sampler
from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_requests import (
    ENDPOINT_PATHS,
    drive_requests,
    parse_target,
    request_headers,
)

MAX_REPORTED_ERRORS = 5
MAX_ERROR_LENGTH = 300

PROMPT_FORMATS = ("token_ids", "text")
# Token-id prompts draw their ids from [TOKEN_ID_LOW, vocab_size - TOKEN_ID_HIGH_MARGIN): clear of the byte and
# control tokens at the start of most vocabularies and of the special tokens many append at the end (GLM's and
# Qwen's config.json vocab_size counts them). The smallest vocabulary this works for:
TOKEN_ID_LOW = 256
TOKEN_ID_HIGH_MARGIN = 1024
MIN_VOCAB_SIZE = TOKEN_ID_LOW + TOKEN_ID_HIGH_MARGIN + 1024
# Ids of one run's prompts: each prompt is a window of this pool behind an id of its own.
_TOKEN_POOL_EXTRA = 4096

# Common English words that most BPE vocabularies hold as one token each (with
# their leading space), so N words make a prompt of roughly N tokens.
PROMPT_WORDS = (
    "the of and time year people way day man thing woman life child world school state family student "
    "group country problem hand part place case week company system program question work government "
    "number night point home water room mother area money story fact month lot right study book eye job "
    "word business issue side kind head house service friend father power hour game line end member law "
    "car city"
).split()


class BenchmarkError(Exception):
    """The run failed as a whole; ``result`` holds whatever was measured before."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result or {}


@dataclass(frozen=True)
class BenchmarkPlan:
    """What to measure. ``timeout`` bounds the whole run and thereby every request in it."""

    url: str
    model: str
    endpoint: str = "completions"
    concurrency: int = 1
    num_requests: int = 1
    num_warmup: int = 0
    input_tokens: int = 128
    output_tokens: int = 128
    timeout: float = 600.0
    api_key: Optional[str] = None
    # Makes every prompt of this run unique; empty picks a random one.
    run_tag: str = ""
    # token_ids: each prompt is input_tokens token ids (completions only), so the server reads exactly the load
    # asked for; text: words, whose token count depends on the model's tokenizer. None: token_ids for
    # completions, text for chat (resolved()).
    prompt_format: Optional[str] = None
    vocab_size: int = 32000


# ---------------------------------------------------------------- plan and request

def resolved(plan):
    """The plan with its prompt format decided: token ids where the endpoint takes them, else text."""
    if plan.prompt_format is not None:
        return plan
    return dataclasses.replace(plan, prompt_format="text" if plan.endpoint == "chat" else "token_ids")


def check_plan(plan):
    """Raise ValueError naming the first parameter that cannot work."""
    if plan.endpoint not in ENDPOINT_PATHS:
        raise ValueError("endpoint must be one of %s, got %r" % (", ".join(sorted(ENDPOINT_PATHS)), plan.endpoint))
    for name in ("concurrency", "num_requests", "input_tokens", "output_tokens"):
        if getattr(plan, name) < 1:
            raise ValueError("%s must be at least 1, got %s" % (name, getattr(plan, name)))
    if plan.num_warmup < 0:
        raise ValueError("num_warmup must not be negative, got %s" % plan.num_warmup)
    if plan.prompt_format not in PROMPT_FORMATS:
        raise ValueError("prompt_format must be one of %s, got %r" % (", ".join(PROMPT_FORMATS), plan.prompt_format))
    if plan.prompt_format == "token_ids" and plan.endpoint == "chat":
        raise ValueError("prompt_format token_ids needs endpoint completions: /v1/chat/completions takes messages of "
                         "text; set prompt_format: text for the chat endpoint")
    if plan.prompt_format == "token_ids" and plan.vocab_size < MIN_VOCAB_SIZE:
        raise ValueError("vocab_size must be the model's vocabulary size (config.json's vocab_size), at least %d for "
                         "token-id prompts, got %s" % (MIN_VOCAB_SIZE, plan.vocab_size))
    if not plan.timeout > 0:
        raise ValueError("timeout must be more than 0 seconds, got %s" % plan.timeout)
    parse_target(plan.url, plan.endpoint)


def build_prompt(input_tokens, tag):
    """About ``input_tokens`` tokens; the server's usage data gives the real count.

    The tag comes first so that no two prompts share more than a few leading
    tokens: SGLang's radix cache would otherwise serve repeated prompts from
    cache and flatter the time to first token.
    """
    return tag + ":" + _prompt_words(input_tokens)


@functools.lru_cache(maxsize=8)
def _prompt_words(input_tokens):
    """What follows the tag, the same in every prompt of a run: built once, since the request driver builds each
    body between two reads of its streams, and 1,000 words took 80 us there, in every request."""
    words = [PROMPT_WORDS[k % len(PROMPT_WORDS)] for k in range(max(input_tokens - 1, 0))]
    return "".join(" " + word for word in words)


class TokenIdPrompts:
    """Prompts of exactly ``input_tokens`` token ids each, as SGLang's /v1/completions takes them (a list of ints).

    A text prompt's length is whatever the model's tokenizer makes of it: the word prompts came out 53 % longer
    than asked on the real server of docs/evidence/real-sglang-h200.md, so the load measured was not the one
    reported. Ids are what sglang.bench_serving's random-ids dataset sends too. Each prompt begins with an id of
    its own (request number and run), so no two share a prefix the radix cache could serve; the rest is a window
    of one pool of random ids, drawn once per run, at an offset of its own (a MoE model routes each token, so the
    prompts should not all be the same tokens). Joined once as text: a body costs a slice and a join.
    """

    def __init__(self, input_tokens, vocab_size, tag):
        self.length = input_tokens
        rng = random.Random(tag)
        high = vocab_size - TOKEN_ID_HIGH_MARGIN
        self.low, self.span = TOKEN_ID_LOW, high - TOKEN_ID_LOW
        self.start = rng.randrange(self.span)
        self.pool = [str(rng.randrange(TOKEN_ID_LOW, high)) for _index in range(max(input_tokens - 1, 0) + _TOKEN_POOL_EXTRA)]

    def ids_text(self, number):
        """The prompt of request ``number`` of the run, as the JSON text of its list of ids."""
        head = str(self.low + (self.start + number) % self.span)
        offset = (number * 7919) % _TOKEN_POOL_EXTRA
        return "[" + ",".join([head] + self.pool[offset:offset + self.length - 1]) + "]"


def build_request_body(plan, prompt):
    body = {
        "model": plan.model,
        "max_tokens": plan.output_tokens,
        "temperature": 0.0,
        # SGLang (and vLLM) keep generating past end-of-sequence, so every
        # request produces exactly output_tokens tokens.
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if plan.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    elif isinstance(prompt, _IdsText):
        # The ids are already JSON; json.dumps of 1,000 ints would cost more than the rest of the body.
        body["prompt"] = None
        text = json.dumps(body)
        return text.replace('"prompt": null', '"prompt": ' + prompt, 1).encode("utf-8")
    else:
        body["prompt"] = prompt
    return json.dumps(body).encode("utf-8")


class _IdsText(str):
    """A prompt that is the JSON text of a list of token ids."""


# ---------------------------------------------------------------- statistics

def percentile(values, q):
    """The q-th percentile (0..100) of sorted ``values``, linearly interpolated like numpy's default."""
    if not 0 <= q <= 100:
        raise ValueError("percentile must be within 0..100, got %s" % q)
    if not values:
        return None
    position = (len(values) - 1) * q / 100.0
    lower = int(math.floor(position))
    upper = min(lower + 1, len(values) - 1)
    return values[lower] + (values[upper] - values[lower]) * (position - lower)


def summarize_ms(seconds):
    """mean, p50, p90 and p99 in milliseconds; every value null when there is nothing to summarize."""
    ordered = sorted(seconds)
    if not ordered:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    summary = {"mean": sum(ordered) / len(ordered)}
    for q in (50, 90, 99):
        summary["p%d" % q] = percentile(ordered, q)
    return {key: round(value * 1000.0, 3) for key, value in summary.items()}


def _latency_samples(completed):
    ttft, itl, tpot, e2e = [], [], [], []
    for outcome in completed:
        e2e.append(outcome.finished - outcome.started)
        if outcome.first_token is None:
            continue
        ttft.append(outcome.first_token - outcome.started)
        times = outcome.token_times
        itl.extend(later - earlier for earlier, later in zip(times, times[1:]))
        generated = outcome.completion_tokens or len(times)
        if generated > 1:
            tpot.append((outcome.finished - outcome.first_token) / (generated - 1))
    return ttft, itl, tpot, e2e


def first_errors(outcomes, limit=MAX_REPORTED_ERRORS):
    errors = []
    for number, outcome in enumerate(outcomes):
        if outcome is not None and not outcome.ok:
            errors.append(("request %d: %s" % (number, outcome.error))[:MAX_ERROR_LENGTH])
            if len(errors) == limit:
                break
    return errors


def token_count_source(completed):
    with_usage = sum(1 for outcome in completed if outcome.completion_tokens is not None)
    if with_usage == len(completed):
        return "usage"
    return "stream_chunks" if with_usage == 0 else "mixed"


def summarize_requests(drive, input_tokens_estimate):
    """Throughput, latency and failure figures of one measured run."""
    completed = [o for o in drive.outcomes if o is not None and o.ok]
    failed = sum(1 for o in drive.outcomes if o is not None and not o.ok)
    duration = max(drive.finished - drive.started, 1e-9)
    if completed:
        duration = max(max(o.finished for o in completed) - drive.started, 1e-9)
    output_tokens = sum(o.completion_tokens if o.completion_tokens is not None else len(o.token_times)
                        for o in completed)
    input_tokens = sum(o.prompt_tokens if o.prompt_tokens is not None else input_tokens_estimate
                       for o in completed)
    ttft, itl, tpot, e2e = _latency_samples(completed)
    return {
        "completed_requests": len(completed),
        "failed_requests": failed,
        "not_started_requests": sum(1 for o in drive.outcomes if o is None),
        "errors": first_errors(drive.outcomes),
        "duration_s": round(duration, 3),
        "requests_per_s": round(len(completed) / duration, 3),
        "output_tokens_per_s": round(output_tokens / duration, 1),
        "total_tokens_per_s": round((input_tokens + output_tokens) / duration, 1),
        "input_tokens_total": input_tokens,
        "input_tokens_per_request": round(input_tokens / len(completed), 1) if completed else None,
        "output_tokens_total": output_tokens,
        "token_count_source": token_count_source(completed) if completed else None,
        "ttft_ms": summarize_ms(ttft),
        "itl_ms": summarize_ms(itl),
        "tpot_ms": summarize_ms(tpot),
        "e2e_latency_ms": summarize_ms(e2e),
    }


# ---------------------------------------------------------------- the run

def _request_bodies(plan, tag, first_number):
    """Builds request i's body; numbers go on across warm-up and measurement so no prompt repeats."""
    if plan.prompt_format == "token_ids":
        prompts = _token_prompts(plan.input_tokens, plan.vocab_size, tag)

        def body(index):
            return build_request_body(plan, _IdsText(prompts.ids_text(first_number + index)))
    else:
        def body(index):
            return build_request_body(plan, build_prompt(plan.input_tokens, "%s-%d" % (tag, first_number + index)))

    return body


@functools.lru_cache(maxsize=4)
def _token_prompts(input_tokens, vocab_size, tag):
    """One pool per run, shared by its warm-up and its measurement."""
    return TokenIdPrompts(input_tokens, vocab_size, tag)


def _warm_up(plan, target, tag, headers, deadline):
    count = plan.num_warmup
    drive = drive_requests(target, _request_bodies(plan, tag, 0), count, plan.concurrency, headers, deadline)
    failed = [o for o in drive.outcomes if o is not None and not o.ok]
    if drive.timed_out:
        raise BenchmarkError("warm-up against %s did not finish within the timeout of %s s%s"
                             % (target.url, plan.timeout, _first_error_hint(drive.outcomes)),
                             {"warmup_failed_requests": len(failed), "errors": first_errors(drive.outcomes)})
    if len(failed) == count:
        raise BenchmarkError("all %d warm-up requests to %s failed%s"
                             % (count, target.url, _first_error_hint(drive.outcomes))
                             + prompt_format_hint(plan.prompt_format, first_errors(drive.outcomes))
                             + api_key_hint(plan.api_key, first_errors(drive.outcomes)),
                             {"warmup_failed_requests": len(failed), "errors": first_errors(drive.outcomes)})
    return len(failed)


# What a server that takes prompts as strings only answers to a list of token ids: sglang-router 0.3.2's
# /v1/completions (HTTP 422, "... untagged enum StringOrArray"; docs/evidence/sglang-router.md). SGLang itself
# answers 400 to a prompt it cannot read.
_STRINGS_ONLY_STATUSES = ("HTTP 400 ", "HTTP 422 ")


def prompt_format_hint(prompt_format, errors):
    """The fix to name when every request was refused as unreadable and the prompts were token ids, else ''."""
    if prompt_format != "token_ids" or not errors:
        return ""
    if not all(any(status in error for status in _STRINGS_ONLY_STATUSES) for error in errors):
        return ""
    return (". The server refused prompts given as token ids (a router's /v1/completions takes strings only): "
            "measure it with prompt_format=text")


# What SGLang answers a request without the key it was started with (--api-key), or with another one.
_UNAUTHORIZED_STATUSES = ("HTTP 401 ", "HTTP 403 ")


def api_key_hint(api_key, errors):
    """The variable to set when the server refused the requests for their key, else ''."""
    if not errors or not any(status in error for error in errors for status in _UNAUTHORIZED_STATUSES):
        return ""
    if api_key:
        return (". The server refused the API key sent: set smoke_test_api_key to the key it was started with "
                "(on a deploy, sglang_service_api_key sets both)")
    return (". The server asks for an API key: set smoke_test_api_key (-e smoke_test_api_key=..., best from a vault; "
            "on a deploy, sglang_service_api_key sets both)")


def _first_error_hint(outcomes):
    errors = first_errors(outcomes, limit=1)
    return ("; first error: %s" % errors[0]) if errors else ""


# Seconds the read of /server_info after a run may take: it is a report, not part of the measurement.
SERVER_INFO_TIMEOUT_S = 10.0


def _decode_server(server_info):
    """The /server_info of the server that decodes: the whole answer, or its ``decode[0]`` where prefill and
    decode run apart."""
    if isinstance(server_info, dict) and isinstance(server_info.get("decode"), list) and server_info["decode"]:
        return server_info["decode"][0]
    return server_info


def accept_length_of(server_info):
    """SGLang's mean accepted tokens per speculative decoding step since its start, from its /server_info, where
    bench_serving reads it (sglang/benchmark/serving.py of 0.5.16): ``internal_states[0].avg_spec_accept_length``,
    the decode server's (``decode[0]``) where prefill and decode run apart. The scheduler reports it only while
    speculative decoding is on and has run (managers/scheduler.py); None otherwise, and for any answer not shaped
    so (a router, another OpenAI-compatible server)."""
    server_info = _decode_server(server_info)
    states = server_info.get("internal_states") if isinstance(server_info, dict) else None
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    value = states[0].get("avg_spec_accept_length")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return round(float(value), 3)


def max_running_of(server_info):
    """The most requests the server decodes at once, where SGLang has set it: /server_info's
    ``max_running_requests`` (its server arguments). None where it is unset, which is no bound the server was given,
    and for an answer not shaped so. With speculative decoding on and the option unset SGLang 0.5.16 sets it to 48
    itself (server_args.py), and /server_info says 48: read on a real server, docs/evidence/real-sglang-h200.md
    (sixth run; None with speculative decoding off)."""
    server_info = _decode_server(server_info)
    value = server_info.get("max_running_requests") if isinstance(server_info, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def server_info_figures(plan, target):
    """What the server says of itself after a run: {accept_length, max_running_requests} (accept_length_of,
    max_running_of), each None where /server_info cannot be read."""
    figures = {"accept_length": None, "max_running_requests": None}
    path = target.path[:-len(ENDPOINT_PATHS[plan.endpoint])] + "/server_info"
    headers = {"Authorization": "Bearer %s" % plan.api_key} if plan.api_key else {}
    if target.scheme == "https":
        connection = http.client.HTTPSConnection(target.host, target.port, timeout=SERVER_INFO_TIMEOUT_S,
                                                 context=ssl.create_default_context())
    else:
        connection = http.client.HTTPConnection(target.host, target.port, timeout=SERVER_INFO_TIMEOUT_S)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            return figures
        info = json.loads(response.read().decode("utf-8"))
        return {"accept_length": accept_length_of(info), "max_running_requests": max_running_of(info)}
    except (OSError, ValueError, http.client.HTTPException):
        return figures
    finally:
        connection.close()


def run_benchmark(plan, power=PowerPlan(), on_drive=None):
    """Warm up, then measure; return the figures or raise BenchmarkError naming the URL and what happened.

    ``on_drive``, where given, is called with the measured run's DriveResult (every request's timings) before the
    figures are checked: the real-GPU harness's noise phase keeps them (benchmarks/real_gpu/noise.py)."""
    plan = resolved(plan)
    check_plan(plan)
    if power.enabled and not power.interval > 0:
        raise ValueError("power_interval must be more than 0 seconds, got %s" % power.interval)
    deadline = time.perf_counter() + plan.timeout
    target = parse_target(plan.url, plan.endpoint)
    headers = request_headers(plan.api_key)
    tag = plan.run_tag or uuid.uuid4().hex[:8]
    warmup_failed = _warm_up(plan, target, tag, headers, deadline) if plan.num_warmup else 0

    sampler = power_sampler(power)
    sampler.start()
    try:
        drive = drive_requests(target, _request_bodies(plan, tag, plan.num_warmup), plan.num_requests,
                               plan.concurrency, headers, deadline)
    finally:
        sampler.stop()

    if on_drive is not None:
        on_drive(drive)
    result = {"url": target.url, "warmup_failed_requests": warmup_failed, "prompt_format": plan.prompt_format}
    result.update(summarize_requests(drive, plan.input_tokens))
    result["power"] = sampler.summary(result["duration_s"], result["output_tokens_total"])
    result.update(server_info_figures(plan, target))
    if drive.timed_out:
        raise BenchmarkError("the run against %s did not finish within the timeout of %s s: %d of %d requests "
                             "completed%s" % (target.url, plan.timeout, result["completed_requests"], plan.num_requests,
                                              _first_error_hint(drive.outcomes)), result)
    if not result["completed_requests"]:
        raise BenchmarkError("all %d requests to %s failed%s"
                             % (plan.num_requests, target.url, _first_error_hint(drive.outcomes))
                             + prompt_format_hint(plan.prompt_format, first_errors(drive.outcomes))
                             + api_key_hint(plan.api_key, first_errors(drive.outcomes)), result)
    return result

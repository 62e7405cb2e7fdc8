# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load an OpenAI-compatible endpoint at a fixed concurrency and sample GPU power meanwhile.

The request driver runs one thread per concurrent stream, each with its own
persistent HTTP/1.1 connection, and reads the server-sent events of each
streamed response as they arrive. Power is read in a background thread through
NVML (``pynvml``) when the target's Python has it, otherwise through
``nvidia-smi``.

Standard library only: this runs on the target with the host's own Python 3.9+.
Nothing here knows about Ansible; the module wires parameters and results.
"""

from __future__ import annotations

import http.client
import json
import math
import shutil
import socket
import ssl
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, List, Optional
from urllib.parse import urlsplit

ENDPOINT_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
MAX_REPORTED_ERRORS = 5
MAX_ERROR_LENGTH = 300
NVIDIA_SMI_QUERY = ["--query-gpu=index,power.draw,power.limit", "--format=csv,noheader,nounits"]

# Common English words that most BPE vocabularies hold as one token each (with
# their leading space), so N words make a prompt of roughly N tokens.
PROMPT_WORDS = (
    "the of and time year people way day man thing woman life child world school state family student "
    "group country problem hand part place case week company system program question work government "
    "number night point home water room mother area money story fact month lot right study book eye job "
    "word business issue side kind head house service friend father power hour game line end member law "
    "car city"
).split()

_READ_SIZE = 65536
_ERROR_BODY_LIMIT = 2048
# Threads finish by the run's deadline through their socket timeouts; a name
# lookup cannot be interrupted, so the join waits this much longer, then gives up.
_JOIN_GRACE_S = 2.0
_NVIDIA_SMI_TIMEOUT_S = 10.0
# A socket timeout set to the time left may fire a hair early; such a failure still counts as the deadline's.
_DEADLINE_SLACK_S = 0.05


class BenchmarkError(Exception):
    """The run failed as a whole; ``result`` holds whatever was measured before."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result or {}


class RequestFailed(Exception):
    """One request failed; the message says how, for the report."""


class PowerSourceUnavailable(Exception):
    """No power readings can come from this source; the message says why."""


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


@dataclass(frozen=True)
class PowerPlan:
    enabled: bool = True
    interval: float = 0.5
    nvidia_smi: str = "nvidia-smi"


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str

    @property
    def url(self):
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d%s" % (self.scheme, host, self.port, self.path)

    def connect(self, timeout):
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


@dataclass
class Outcome:
    """One request, times from time.perf_counter()."""

    started: float
    finished: float
    error: Optional[str] = None
    hit_deadline: bool = False
    first_token: Optional[float] = None
    token_times: Optional[List[float]] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None

    @property
    def ok(self):
        return self.error is None


@dataclass
class GpuReading:
    index: int
    watts: Optional[float]
    limit_watts: Optional[float]


# ---------------------------------------------------------------- plan and request

def check_plan(plan):
    """Raise ValueError naming the first parameter that cannot work."""
    if plan.endpoint not in ENDPOINT_PATHS:
        raise ValueError("endpoint must be one of %s, got %r" % (", ".join(sorted(ENDPOINT_PATHS)), plan.endpoint))
    for name in ("concurrency", "num_requests", "input_tokens", "output_tokens"):
        if getattr(plan, name) < 1:
            raise ValueError("%s must be at least 1, got %s" % (name, getattr(plan, name)))
    if plan.num_warmup < 0:
        raise ValueError("num_warmup must not be negative, got %s" % plan.num_warmup)
    if not plan.timeout > 0:
        raise ValueError("timeout must be more than 0 seconds, got %s" % plan.timeout)
    parse_target(plan.url, plan.endpoint)


def parse_target(url, endpoint):
    """Where requests go: the base URL (with or without a trailing /v1) plus the endpoint's path."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("url must be an http:// or https:// base URL such as http://127.0.0.1:30000, got %r" % url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError("url has an invalid port: %r" % url)
    base = parts.path.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    return Target(parts.scheme, parts.hostname, port, base + ENDPOINT_PATHS[endpoint])


def build_prompt(input_tokens, tag):
    """About ``input_tokens`` tokens; the server's usage data gives the real count.

    The tag comes first so that no two prompts share more than a few leading
    tokens: SGLang's radix cache would otherwise serve repeated prompts from
    cache and flatter the time to first token.
    """
    words = [PROMPT_WORDS[k % len(PROMPT_WORDS)] for k in range(max(input_tokens - 1, 0))]
    return " ".join([tag + ":"] + words)


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
    else:
        body["prompt"] = prompt
    return json.dumps(body).encode("utf-8")


def request_headers(api_key):
    headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "User-Agent": "sm120.sglang.serving_benchmark",
    }
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    return headers


# ---------------------------------------------------------------- one streamed request

def _chunk_has_text(event):
    choices = event.get("choices")
    if not choices:
        return False
    choice = choices[0]
    if choice.get("text"):
        return True
    delta = choice.get("delta")
    # Reasoning models (GLM-5 behind a reasoning parser) stream their thinking
    # as reasoning_content; those are output tokens too.
    return bool(delta and (delta.get("content") or delta.get("reasoning_content")))


def read_event_stream(response, sock, deadline, outcome):
    """Consume one SSE response into ``outcome``: token arrival times and usage.

    This is the per-token path, so it stays lean: one clock read and one socket
    timeout per read, one json.loads per event. The socket timeout shrinks with
    the time left, so a server that stops sending cannot hold the run past its
    deadline.
    """
    clock = time.perf_counter
    loads = json.loads
    token_times = []
    add_token = token_times.append
    usage = None
    done = False
    pending = b""
    read1 = response.read1
    now = clock()
    while True:
        remaining = deadline - now
        if remaining <= 0:
            raise socket.timeout("the run's deadline passed while streaming")
        sock.settimeout(remaining)
        block = read1(_READ_SIZE)
        now = clock()
        if not block:
            break
        if pending:
            block = pending + block
        lines = block.split(b"\n")
        pending = lines.pop()
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                outcome.finished = now
                continue
            try:
                event = loads(payload)
            except ValueError:
                raise RequestFailed("the stream carried invalid JSON: %r" % payload[:120])
            if _chunk_has_text(event):
                add_token(now)
            if event.get("usage"):
                usage = event["usage"]
            if event.get("error"):
                raise RequestFailed("the server reported an error in the stream: %s" % json.dumps(event["error"]))
    if not done:
        raise RequestFailed("the stream ended without data: [DONE] after %d chunks with text" % len(token_times))
    outcome.token_times = token_times
    outcome.first_token = token_times[0] if token_times else None
    if usage:
        outcome.prompt_tokens = usage.get("prompt_tokens")
        outcome.completion_tokens = usage.get("completion_tokens")


def describe_error(exc):
    """A short, readable cause for the report."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running and listening there?)"
    if isinstance(exc, socket.timeout):
        detail = str(exc)
        return "timed out waiting for the server" + (" (%s)" % detail if detail and detail != "timed out" else "")
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, RequestFailed):
        return str(exc)
    return "%s: %s" % (type(exc).__name__, exc)


def _error_body(response):
    body = response.read(_ERROR_BODY_LIMIT).decode("utf-8", "replace").strip()
    return " ".join(body.split())


def _post_and_stream(conn, target, body, headers, deadline, outcome):
    conn.request("POST", target.path, body, headers)
    # getresponse() may close the connection (Connection: close); the response
    # keeps reading from this same socket.
    sock = conn.sock
    response = conn.getresponse()
    if response.status != 200:
        raise RequestFailed("HTTP %d %s: %s" % (response.status, response.reason, _error_body(response)))
    read_event_stream(response, sock, deadline, outcome)


# The server may close an idle keep-alive connection just as a request goes out on it.
_STALE_CONNECTION_ERRORS = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class _RequestWorker:
    """Sends requests one after another over one persistent connection."""

    def __init__(self, target, headers, deadline):
        self.target = target
        self.headers = headers
        self.deadline = deadline
        self.conn = None

    def send(self, body):
        clock = time.perf_counter
        outcome = Outcome(started=clock(), finished=0.0)
        reused = self.conn is not None
        try:
            try:
                self._exchange(body, outcome)
            except _STALE_CONNECTION_ERRORS:
                if not reused:
                    raise
                self.close()
                outcome.started = clock()
                self._exchange(body, outcome)
        except Exception as exc:
            # Any failure is this request's result; the run goes on.
            self.close()
            outcome.finished = clock()
            outcome.error = describe_error(exc)
            outcome.hit_deadline = outcome.finished >= self.deadline - _DEADLINE_SLACK_S
        return outcome

    def _exchange(self, body, outcome):
        remaining = self.deadline - time.perf_counter()
        if remaining <= 0:
            raise socket.timeout("the run's deadline passed before the request was sent")
        if self.conn is None:
            self.conn = self.target.connect(remaining)
        elif self.conn.sock is not None:
            self.conn.sock.settimeout(remaining)
        else:
            self.conn.timeout = remaining
        _post_and_stream(self.conn, self.target, body, self.headers, self.deadline, outcome)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# ---------------------------------------------------------------- many requests

class _Jobs:
    """Hands out request numbers 0..count-1 to the workers."""

    def __init__(self, count):
        self._next = iter(range(count))
        self._lock = threading.Lock()

    def take(self):
        with self._lock:
            return next(self._next, None)


@dataclass
class DriveResult:
    outcomes: List[Optional[Outcome]]
    started: float
    finished: float
    stuck_threads: int

    @property
    def timed_out(self):
        return self.stuck_threads > 0 or any(o is None or o.hit_deadline for o in self.outcomes)


def drive_requests(target, bodies, count, concurrency, headers, deadline):
    """Send ``count`` requests, ``concurrency`` at a time; ``bodies(i)`` builds request i."""
    outcomes = [None] * count
    jobs = _Jobs(count)

    go = threading.Event()

    def work():
        worker = _RequestWorker(target, headers, deadline)
        go.wait(max(deadline - time.perf_counter(), 0))
        try:
            while time.perf_counter() < deadline:
                index = jobs.take()
                if index is None:
                    return
                outcomes[index] = worker.send(bodies(index))
        finally:
            worker.close()

    # Daemon threads: one stuck in a name lookup must not keep the module alive.
    threads = [threading.Thread(target=work, name="serving-benchmark-%d" % n, daemon=True)
               for n in range(min(concurrency, count))]
    # Workers wait for one start signal: started one by one, the first ones
    # would already be busy while the last are still being created.
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    go.set()
    for thread in threads:
        thread.join(max(deadline - time.perf_counter(), 0) + _JOIN_GRACE_S)
    finished = time.perf_counter()
    stuck = sum(1 for thread in threads if thread.is_alive())
    return DriveResult(list(outcomes), started, finished, stuck)


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
        "output_tokens_total": output_tokens,
        "token_count_source": token_count_source(completed) if completed else None,
        "ttft_ms": summarize_ms(ttft),
        "itl_ms": summarize_ms(itl),
        "tpot_ms": summarize_ms(tpot),
        "e2e_latency_ms": summarize_ms(e2e),
    }


# ---------------------------------------------------------------- power

def _number(field):
    """A float from an nvidia-smi field, None for [N/A], [Not Supported] and the like."""
    try:
        return float(field)
    except ValueError:
        return None


def parse_nvidia_smi_power(text):
    """Rows of ``--query-gpu=index,power.draw,power.limit --format=csv,noheader,nounits``."""
    readings = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 3 or not fields[0].isdigit():
            continue
        readings.append(GpuReading(int(fields[0]), _number(fields[1]), _number(fields[2])))
    return readings


@dataclass
class PowerSource:
    name: str
    read: Callable[[], List[GpuReading]]
    close: Callable[[], None] = lambda: None


def nvidia_smi_source(executable):
    path = shutil.which(executable)
    if path is None:
        raise PowerSourceUnavailable("nvidia-smi not found at %r" % executable)

    def read():
        # subprocess rather than AnsibleModule.run_command: this runs on the
        # sampler thread, and module_utils here stay free of AnsibleModule.
        done = subprocess.run([path] + NVIDIA_SMI_QUERY, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=_NVIDIA_SMI_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise PowerSourceUnavailable("%s exited with %d: %s" % (path, done.returncode,
                                                                    (done.stderr or done.stdout).strip()[:200]))
        readings = parse_nvidia_smi_power(done.stdout)
        if not readings:
            raise PowerSourceUnavailable("%s printed no GPU rows: %r" % (path, done.stdout[:200]))
        return readings

    try:
        read()
    except (OSError, subprocess.SubprocessError) as exc:
        raise PowerSourceUnavailable("%s cannot run: %s" % (path, exc))
    return PowerSource("nvidia-smi", read)


def _import_pynvml():
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def nvml_source():
    nvml = _import_pynvml()
    if nvml is None:
        raise PowerSourceUnavailable("the Python module pynvml (nvidia-ml-py) is not installed")
    try:
        nvml.nvmlInit()
    except Exception as exc:
        # NVMLError is pynvml's own class; a missing driver library shows as others.
        raise PowerSourceUnavailable("NVML did not initialize: %s" % exc)
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    except Exception as exc:
        nvml.nvmlShutdown()
        raise PowerSourceUnavailable("NVML cannot list the GPUs: %s" % exc)
    if not handles:
        nvml.nvmlShutdown()
        raise PowerSourceUnavailable("NVML found no GPUs")

    def milliwatts(call, handle):
        try:
            return call(handle) / 1000.0
        except Exception:
            return None

    limits = [milliwatts(nvml.nvmlDeviceGetPowerManagementLimit, handle) for handle in handles]

    def read():
        return [GpuReading(i, milliwatts(nvml.nvmlDeviceGetPowerUsage, handle), limits[i])
                for i, handle in enumerate(handles)]

    return PowerSource("nvml", read, nvml.nvmlShutdown)


def open_power_source(nvidia_smi):
    """NVML when the target's Python has pynvml, else nvidia-smi; raise with both reasons when neither works."""
    reasons = []
    for opener in (nvml_source, lambda: nvidia_smi_source(nvidia_smi)):
        try:
            return opener()
        except PowerSourceUnavailable as exc:
            reasons.append(str(exc))
    raise PowerSourceUnavailable("; ".join(reasons))


class PowerSampler:
    """Reads power every ``interval`` seconds on a background thread between start() and stop()."""

    def __init__(self, source, interval):
        self.source = source
        self.interval = interval
        self.samples = []
        self.errors = 0
        self.last_error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="serving-benchmark-power", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(_NVIDIA_SMI_TIMEOUT_S + self.interval)
        self.source.close()

    def _run(self):
        while True:
            try:
                self.samples.append(self.source.read())
            except Exception as exc:
                # A failed read must not end sampling, and nobody would see the exception here.
                self.errors += 1
                self.last_error = str(exc)
            if self._stop.wait(self.interval):
                return

    def summary(self, duration_s, output_tokens):
        return summarize_power(self.source.name, self.interval, self.samples, duration_s, output_tokens,
                               self.errors, self.last_error)


class NoPowerSampler:
    """Stands in for PowerSampler when power is not sampled, and says why."""

    def __init__(self, reason, interval):
        self.reason = reason
        self.interval = interval

    def start(self):
        pass

    def stop(self):
        pass

    def summary(self, duration_s, output_tokens):
        return {"source": None, "reason": self.reason, "interval_s": self.interval, "samples": 0,
                "sample_errors": 0, "gpus": [], "total_mean_w": None, "energy_j": None,
                "joules_per_output_token": None}


def power_sampler(power):
    """The sampler a PowerPlan asks for: a real one, or one that says why there is none."""
    if not power.enabled:
        return NoPowerSampler("sample_power is false", power.interval)
    try:
        return PowerSampler(open_power_source(power.nvidia_smi), power.interval)
    except PowerSourceUnavailable as exc:
        return NoPowerSampler("no power source: %s" % exc, power.interval)


def _gpu_power(index, watts, limit):
    mean = sum(watts) / len(watts) if watts else None
    return {
        "index": index,
        "samples": len(watts),
        "mean_w": round(mean, 2) if mean is not None else None,
        "max_w": round(max(watts), 2) if watts else None,
        "limit_w": limit,
        "mean_fraction_of_limit": round(mean / limit, 4) if mean is not None and limit else None,
    }


def summarize_power(source_name, interval, samples, duration_s, output_tokens, sample_errors=0, last_error=None):
    """Per GPU mean/max watts and fraction of the limit; energy over the run and per output token.

    Energy is the sum of the GPUs' mean power times the run's duration, so it
    counts every GPU the source sees, busy or not.
    """
    watts, limits = {}, {}
    for sample in samples:
        for reading in sample:
            watts.setdefault(reading.index, [])
            if reading.watts is not None:
                watts[reading.index].append(reading.watts)
            if reading.limit_watts is not None:
                limits[reading.index] = reading.limit_watts
    gpus = [_gpu_power(index, watts[index], limits.get(index)) for index in sorted(watts)]
    means = [gpu["mean_w"] for gpu in gpus if gpu["mean_w"] is not None]
    total_w = round(sum(means), 2) if means else None
    energy_j = round(total_w * duration_s, 1) if total_w is not None else None
    per_token = round(energy_j / output_tokens, 4) if energy_j is not None and output_tokens else None
    reason = None
    if not means:
        reason = "no power reading succeeded" + (": %s" % last_error if last_error else "")
    return {
        "source": source_name,
        "reason": reason,
        "interval_s": interval,
        "samples": len(samples),
        "sample_errors": sample_errors,
        "gpus": gpus,
        "total_mean_w": total_w,
        "energy_j": energy_j,
        "joules_per_output_token": per_token,
    }


# ---------------------------------------------------------------- the run

def _request_bodies(plan, tag, first_number):
    """Builds request i's body; numbers go on across warm-up and measurement so no prompt repeats."""

    def body(index):
        return build_request_body(plan, build_prompt(plan.input_tokens, "%s-%d" % (tag, first_number + index)))

    return body


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
                             % (count, target.url, _first_error_hint(drive.outcomes)),
                             {"warmup_failed_requests": len(failed), "errors": first_errors(drive.outcomes)})
    return len(failed)


def _first_error_hint(outcomes):
    errors = first_errors(outcomes, limit=1)
    return ("; first error: %s" % errors[0]) if errors else ""


def run_benchmark(plan, power=PowerPlan()):
    """Warm up, then measure; return the figures or raise BenchmarkError naming the URL and what happened."""
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

    result = {"url": target.url, "warmup_failed_requests": warmup_failed}
    result.update(summarize_requests(drive, plan.input_tokens))
    result["power"] = sampler.summary(result["duration_s"], result["output_tokens_total"])
    if drive.timed_out:
        raise BenchmarkError("the run against %s did not finish within the timeout of %s s: %d of %d requests "
                             "completed%s" % (target.url, plan.timeout, result["completed_requests"], plan.num_requests,
                                              _first_error_hint(drive.outcomes)), result)
    if not result["completed_requests"]:
        raise BenchmarkError("all %d requests to %s failed%s"
                             % (plan.num_requests, target.url, _first_error_hint(drive.outcomes)), result)
    return result

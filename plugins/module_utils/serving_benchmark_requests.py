# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Send streamed requests to an OpenAI-compatible endpoint, a fixed number at a time, and time every token.

The request driver runs one thread per concurrent stream, each with its own
persistent HTTP/1.1 connection, and reads the server-sent events of each
streamed response as they arrive. It knows nothing of what the requests ask
for: serving_benchmark.py builds their bodies and sums up the outcomes.

Standard library only: this runs on the target with the host's own Python 3.9+.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import List, Optional
from urllib.parse import urlsplit

ENDPOINT_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}

_READ_SIZE = 65536
_ERROR_BODY_LIMIT = 2048
# Threads finish by the run's deadline through their socket timeouts; a name
# lookup cannot be interrupted, so the join waits this much longer, then gives up.
_JOIN_GRACE_S = 2.0
# A socket timeout set to the time left may fire a hair early; such a failure still counts as the deadline's.
_DEADLINE_SLACK_S = 0.05


class RequestFailed(Exception):
    """One request failed; the message says how, for the report."""


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


# ---------------------------------------------------------------- where requests go

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

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Send streamed requests to an OpenAI-compatible endpoint, a fixed number at a time, and time every token.

One thread drives every concurrent stream: non-blocking sockets, one persistent
HTTP/1.1 connection per stream, and one selector that says which have data. The
time of each read is taken once, as the selector returns, before anything is
parsed. An earlier design ran one thread per stream, and at 128 streams its
tokens waited for the GIL before they were timed: TTFT read 25 to 35 % high,
and at 256 streams several tokens came in one read, ITL p50 reading 0.1 ms for
20 ms (benchmarks/serving_benchmark_accuracy.py measures this). It knows nothing
of what the requests ask for: serving_benchmark.py builds their bodies and sums
up the outcomes; serving_benchmark_stream.py parses each response.

Standard library only: this runs on the target with the host's own Python 3.9+.
"""

from __future__ import annotations

import errno
import http.client
import os
import select
import selectors
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import List, Optional
from urllib.parse import urlsplit

from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_stream import (  # noqa: F401
    Outcome,
    RequestFailed,
    ResponseParser,
)

ENDPOINT_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}

_READ_SIZE = 65536
# A name lookup cannot be interrupted: it runs in a thread the run waits for until its deadline.
_DEADLINE_SLACK_S = 0.05
_IN_PROGRESS = (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN)
# The server may close an idle keep-alive connection just as a request goes out on it.
_STALE_CONNECTION_ERRORS = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


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

    @property
    def host_header(self):
        host = "[%s]" % self.host if ":" in self.host else self.host
        return host if self.port == (443 if self.scheme == "https" else 80) else "%s:%d" % (host, self.port)


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


def request_head(target, headers):
    """The request line and headers, up to the Content-Length value, which each body completes."""
    lines = ["POST %s HTTP/1.1" % target.path, "Host: %s" % target.host_header, "Accept-Encoding: identity"]
    lines += ["%s: %s" % item for item in headers.items()]
    return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")


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


def _resolve(target, deadline):
    """The addresses to connect to, looked up once for the run; by the deadline or a timeout."""
    found = {}

    def look_up():
        try:
            found["addresses"] = socket.getaddrinfo(target.host, target.port, 0, socket.SOCK_STREAM)
        except Exception as exc:  # handed to the caller
            found["error"] = exc

    lookup = threading.Thread(target=look_up, name="serving-benchmark-lookup", daemon=True)
    lookup.start()
    lookup.join(max(deadline - time.perf_counter(), 0))
    if "error" in found:
        raise found["error"]
    if "addresses" not in found:
        raise socket.timeout("the run's deadline passed while looking up %s" % target.host)
    return found["addresses"]


# ---------------------------------------------------------------- one stream's connection

class _Stream:
    """One of the concurrent streams: its connection and the request on it, driven by the selector's events."""

    __slots__ = ("drive", "sock", "connecting", "handshaking", "addresses", "reused", "index", "outcome", "parser",
                 "request", "unsent", "retried", "events")

    def __init__(self, drive):
        self.drive = drive
        self.sock = None
        self.events = 0
        self.index = None

    # -- requests

    def start(self, index):
        drive = self.drive
        self.index = index
        body = drive.prepared.pop(index, None) or drive.bodies(index)
        self.request = drive.head + b"%d\r\n\r\n" % len(body) + body
        self.retried = False
        self.outcome = Outcome(started=time.perf_counter(), finished=0.0)
        self.parser = ResponseParser(self.outcome)
        self._guarded(self._send_or_connect)

    def _send_or_connect(self):
        self.unsent = self.request
        self.reused = self.sock is not None
        if self.sock is None:
            self.addresses = list(self.drive.addresses)
            self._connect()
        else:
            self._send()

    def _connect(self):
        family, kind, proto, dummy, address = self.addresses.pop(0)
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.connecting = True
        self.handshaking = False
        code = sock.connect_ex(address)
        if code not in (0,) + _IN_PROGRESS:
            self._connect_failed(code)
            return
        # On loopback (and a fast LAN) the connection is up by now: send at once rather than after every other
        # stream's start, which would count their time in this request's TTFT.
        if code == 0 or select.select((), (sock,), (), 0)[1]:
            self._connect_done()
        else:
            self._watch(selectors.EVENT_WRITE)

    def _connect_failed(self, code):
        self.close()
        if self.addresses:
            self._connect()
            return
        raise OSError(code, os.strerror(code))

    def _connected(self):
        self.connecting = False
        if self.drive.tls is not None:
            self.sock = self.drive.tls.wrap_socket(self.sock, server_hostname=self.drive.target.host,
                                                   do_handshake_on_connect=False)
            self.handshaking = True
            self._handshake()
        else:
            self._send()

    def _handshake(self):
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._watch(selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._watch(selectors.EVENT_WRITE)
            return
        self.handshaking = False
        self._send()

    def _send(self):
        events = selectors.EVENT_WRITE
        try:
            sent = self.sock.send(self.unsent)
        except (BlockingIOError, ssl.SSLWantWriteError):
            sent = 0
        except ssl.SSLWantReadError:
            sent, events = 0, selectors.EVENT_READ
        self.unsent = self.unsent[sent:]
        self._watch(events if self.unsent else selectors.EVENT_READ)

    # -- selector events

    def on_event(self, mask, now):
        if self.sock is None:
            return  # closed by an earlier event of this pass
        if self.connecting:
            self._guarded(self._connect_done)
        elif self.handshaking:
            self._guarded(self._handshake)
        elif self.unsent:
            self._guarded(self._send)
        else:
            self._guarded(self._receive, now)

    def _guarded(self, step, *args):
        """Run one step; any failure is this request's result, and the run goes on."""
        try:
            step(*args)
        except _STALE_CONNECTION_ERRORS as exc:
            if not self.reused or self.retried or self.parser.answered:
                self.fail(exc)
                return
            # A keep-alive connection the server had closed: once more, on a new one.
            self.close()
            self.retried = True
            self.outcome.started = time.perf_counter()
            self._guarded(self._send_or_connect)
        except Exception as exc:
            self.fail(exc)

    def _connect_done(self):
        code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._connect_failed(code)
        else:
            self._connected()

    def _receive(self, now):
        sock = self.sock
        drive = self.drive
        try:
            # Into one buffer of the run's: recv() would allocate its whole size for every read.
            data = drive.view[:sock.recv_into(drive.view)].tobytes()
        except (BlockingIOError, ssl.SSLWantReadError):
            return
        if drive.tls is not None:
            while data and sock.pending():
                data += sock.recv(_READ_SIZE)
        parser = self.parser
        if data:
            if not parser.feed(data, now):
                return
        else:
            parser.eof()
        if not parser.keep_alive:
            self.close()
        self.drive.done(self)

    def fail(self, exc):
        outcome = self.outcome
        outcome.finished = time.perf_counter()
        outcome.error = describe_error(exc)
        outcome.hit_deadline = outcome.finished >= self.drive.deadline - _DEADLINE_SLACK_S
        self.close()
        self.drive.done(self)

    # -- the socket

    def _watch(self, events):
        if events == self.events:
            return
        selector = self.drive.selector
        if self.events:
            selector.modify(self.sock, events, self)
        else:
            selector.register(self.sock, events, self)
        self.events = events

    def close(self):
        if self.sock is not None:
            if self.events:
                self.drive.selector.unregister(self.sock)
                self.events = 0
            self.sock.close()
            self.sock = None


# ---------------------------------------------------------------- many requests

@dataclass
class DriveResult:
    outcomes: List[Optional[Outcome]]
    started: float
    finished: float
    # Kept from the thread-per-stream design, whose threads could be stuck in a name lookup; always 0 now.
    stuck_threads: int = 0

    @property
    def timed_out(self):
        return self.stuck_threads > 0 or any(o is None or o.hit_deadline for o in self.outcomes)


class _Drive:
    """The run's requests handed out to the streams, and their outcomes."""

    def __init__(self, target, bodies, count, headers, deadline):
        self.target = target
        self.bodies = bodies
        self.count = count
        self.deadline = deadline
        self.head = request_head(target, headers)
        self.tls = ssl.create_default_context() if target.scheme == "https" else None
        self.selector = selectors.DefaultSelector()
        self.view = memoryview(bytearray(_READ_SIZE))
        self.addresses = None
        self.outcomes = [None] * count
        # The first requests' bodies, built before the clock starts: built in turn as each stream starts,
        # the last stream would start a whole round of body building after the first.
        self.prepared = {}
        self.next_index = 0
        self.busy = set()
        # Streams whose request ended, waiting for their next one: started from the loop, not from inside the
        # ending one, so a server that refuses every request at once cannot recurse.
        self.idle = []

    def done(self, stream):
        self.outcomes[stream.index] = stream.outcome
        self.busy.discard(stream)
        self.idle.append(stream)

    def _start_idle(self):
        idle = self.idle
        while idle:
            stream = idle.pop()
            if self.next_index >= self.count or time.perf_counter() >= self.deadline:
                stream.close()
                continue
            self.busy.add(stream)
            self.next_index += 1
            stream.start(self.next_index - 1)

    def run(self, concurrency):
        self.idle = [_Stream(self) for dummy in range(min(concurrency, self.count))][::-1]
        self._start_idle()
        clock = time.perf_counter
        select = self.selector.select
        while self.busy:
            remaining = self.deadline - clock()
            if remaining <= 0:
                break
            events = select(remaining)
            # One time for every read of this pass, taken before any of them is parsed.
            now = clock()
            for key, mask in events:
                key.data.on_event(mask, now)
            if self.idle:
                self._start_idle()
        # Past the deadline: what is still open fails, and no request starts after it.
        self.next_index = self.count
        for stream in list(self.busy):
            stream.fail(socket.timeout("the run's deadline passed %s" % (
                "while streaming" if stream.parser.answered else "before the server answered")))
        for stream in self.idle:
            stream.close()
        self.selector.close()

    def fail_all(self, exc):
        now = time.perf_counter()
        for index in range(self.count):
            self.outcomes[index] = Outcome(started=now, finished=now, error=describe_error(exc),
                                           hit_deadline=now >= self.deadline - _DEADLINE_SLACK_S)


def drive_requests(target, bodies, count, concurrency, headers, deadline):
    """Send ``count`` requests, ``concurrency`` at a time; ``bodies(i)`` builds request i."""
    drive = _Drive(target, bodies, count, headers, deadline)
    try:
        drive.addresses = _resolve(target, deadline)
    except Exception as exc:
        # Every request would fail the same way, as each one did when each connection looked the name up.
        drive.fail_all(exc)
        drive.selector.close()
        return DriveResult(drive.outcomes, time.perf_counter(), time.perf_counter())
    drive.prepared = {index: bodies(index) for index in range(min(concurrency, count))}
    started = time.perf_counter()
    drive.run(concurrency)
    return DriveResult(drive.outcomes, started, time.perf_counter())

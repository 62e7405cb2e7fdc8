# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The request driver's parts alone: where requests go, and the parser of one streamed answer.

test_serving_benchmark.py drives the whole of it against real servers.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils import serving_benchmark_requests as requests


# ---------------------------------------------------------------- where requests go

@pytest.mark.parametrize("url, endpoint, expected", [
    ("http://127.0.0.1:30000", "completions", "http://127.0.0.1:30000/v1/completions"),
    ("http://127.0.0.1:30000/v1/", "chat", "http://127.0.0.1:30000/v1/chat/completions"),
    ("https://models.example.com/glm", "completions", "https://models.example.com:443/glm/v1/completions"),
    ("http://[::1]:8000", "chat", "http://[::1]:8000/v1/chat/completions"),
])
def test_target_url(url, endpoint, expected):
    assert requests.parse_target(url, endpoint).url == expected


# ---------------------------------------------------------------- what goes on the wire

def test_request_head_names_the_host_as_http_client_did():
    head = requests.request_head(requests.parse_target("http://[::1]:8000", "chat"), requests.request_headers("k"))
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    assert "Host: [::1]:8000" in lines and "Authorization: Bearer k" in lines
    assert head.endswith(b"\r\nContent-Length: ")
    assert requests.parse_target("https://models.example.com/glm", "chat").host_header == "models.example.com"


# ---------------------------------------------------------------- the driver against raw servers

class _RawServer:
    """A TCP server on 127.0.0.1 that answers each request with ``answer(number)`` bytes, then maybe closes."""

    def __init__(self, answer, close_after=True):
        self.answer = answer
        self.close_after = close_after
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.requests = 0
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def target(self):
        return requests.parse_target("http://127.0.0.1:%d" % self.listener.getsockname()[1], "completions")

    def _serve(self):
        while True:
            try:
                conn, dummy = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                head, dummy, data = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                number, self.requests = self.requests, self.requests + 1
                conn.sendall(self.answer(number))
                if self.close_after:
                    return

    def close(self):
        self.listener.close()


def _sse(*events):
    body = b"".join(b"data: %s\n\n" % event for event in events)
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


_TWO_TOKENS = _sse(b'{"choices":[{"text":"a"}]}', b'{"choices":[{"text":"b"}]}', b"[DONE]")


def _drive(server, count, concurrency, timeout=20.0):
    return requests.drive_requests(server.target, lambda index: b"{}", count, concurrency,
                                   requests.request_headers(None), time.perf_counter() + timeout)


def _drive_two_tokens(close_after, count, concurrency):
    """Drive a server answering two tokens to every request; (drive, server) once the server is closed."""
    server = _RawServer(lambda number: _TWO_TOKENS, close_after=close_after)
    try:
        return _drive(server, count, concurrency), server
    finally:
        server.close()


def test_a_keep_alive_connection_the_server_closed_is_retried_once_on_a_new_one():
    # The server keeps no connection (it closes after each answer) yet never says Connection: close.
    drive, server = _drive_two_tokens(True, 6, 2)
    assert [o.error for o in drive.outcomes] == [None] * 6
    assert all(len(o.token_times) == 2 for o in drive.outcomes)
    assert server.connections >= 6 and not drive.timed_out


def test_one_connection_per_stream_carries_every_request():
    drive, server = _drive_two_tokens(False, 12, 3)
    assert all(o.ok for o in drive.outcomes) and server.connections == 3 and server.requests == 12


def test_many_requests_refused_at_once_fail_without_recursing():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    target = requests.parse_target("http://127.0.0.1:%d" % port, "completions")
    drive = requests.drive_requests(target, lambda index: b"{}", 5000, 1, {}, time.perf_counter() + 30)
    assert len(drive.outcomes) == 5000 and all(o is not None and not o.ok for o in drive.outcomes)
    assert "connection refused" in drive.outcomes[-1].error


def test_a_name_that_does_not_resolve_fails_every_request_with_the_lookup_error(monkeypatch):
    def no_such_name(*args):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)
    target = requests.parse_target("http://no-such-host.invalid:1", "completions")
    drive = requests.drive_requests(target, lambda index: b"{}", 3, 2, {}, time.perf_counter() + 30)
    assert [o.error for o in drive.outcomes] == ["gaierror: [Errno -2] Name or service not known"] * 3


def test_a_stream_cut_at_the_deadline_fails_as_the_deadline_s():
    # Headers and one token, then nothing: the run's deadline ends the request, and says so.
    event = b'data: {"choices":[{"text":"a"}]}\n\n'
    server = _RawServer(lambda number: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n"
                        % (len(event), event), close_after=False)
    try:
        began = time.perf_counter()
        drive = _drive(server, 4, 2, timeout=0.5)
    finally:
        server.close()
    assert time.perf_counter() - began < 5
    assert drive.timed_out and drive.outcomes[2:] == [None, None]
    assert all(o.hit_deadline and "while streaming" in o.error for o in drive.outcomes[:2])

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The truth serving_benchmark's accuracy is measured against: how the stand-in server of
benchmarks/serving_benchmark_throughput_server.py dates a request.

A request that waits in the socket buffer (or the accept queue) because the server is busy has still arrived; the
scheduled server dates it by the kernel's receive time, so its first token is due TTFT after that, not after the
server got round to reading it. Linux only, as the benchmark is.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import socket
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[4] / "benchmarks"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")


@pytest.fixture(scope="module")
def standin():
    spec = importlib.util.spec_from_file_location("serving_benchmark_throughput_server",
                                                  BENCHMARKS / "serving_benchmark_throughput_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kernel_time_dates_a_read_by_its_arrival_not_by_the_read(standin):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, standin.SO_TIMESTAMPNS, 1)
    with listener, socket.create_connection(listener.getsockname()) as client:
        client.sendall(b"x" * 6000)
        sent = time.perf_counter()
        time.sleep(0.05)
        conn, dummy = listener.accept()
        with conn:
            data, ancillary, dummy, dummy2 = conn.recvmsg(65536, standin._ANCILLARY_SIZE)
            read = time.perf_counter()
            arrived = standin.kernel_time(ancillary)
    assert len(data) == 6000
    assert arrived is not None
    assert sent - 0.005 < arrived <= sent + 0.002
    assert read - arrived >= 0.045


def test_kernel_time_is_none_without_a_timestamp(standin):
    assert standin.kernel_time([]) is None
    assert standin.kernel_time([(socket.SOL_SOCKET, standin.SO_TIMESTAMPNS, b"\0")]) is None


def test_scheduled_server_counts_ttft_from_arrival_when_it_reads_late(standin):
    """The request sits 50 ms unread (the event loop not yet running); its first token still comes TTFT after
    it was sent, and the record says both when it arrived and when the server saw it."""
    selector = standin._StampingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    try:
        server = standin.FastServer(0.0, ttft_s=0.1, itl_s=0.01)
        server.selector = selector
        listener = standin._StampedListener(loop, server)
        body = json.dumps({"prompt": "timed-0: a b c", "max_tokens": 3, "stream": True}).encode()
        request = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
        client = socket.create_connection(listener.sockets[0].getsockname())
        client.sendall(request)
        sent = time.perf_counter()
        time.sleep(0.05)

        async def until_done():
            decoder = asyncio.ensure_future(server.scheduled_loop())
            while not (server.records and server.records[0]["finished"]):
                await asyncio.sleep(0.005)
            decoder.cancel()

        loop.run_until_complete(asyncio.wait_for(until_done(), 5))
        client.settimeout(2)
        answer = b""
        while not answer.endswith(b"0\r\n\r\n"):
            answer += client.recv(65536)
        client.close()
        listener.close()
    finally:
        loop.close()
    record = server.records[0]
    assert record["tag"] == "timed-0"
    assert sent - 0.005 < record["arrived"] <= sent + 0.002
    assert record["seen"] - record["arrived"] >= 0.045
    assert 0.1 <= record["times"][0] - record["arrived"] < 0.11
    assert b"data: [DONE]" in answer and answer.count(b'"text":') == 3

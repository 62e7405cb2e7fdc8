# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The truth serving_benchmark's accuracy is measured against: how the stand-in server of
benchmarks/serving_benchmark_throughput_server.py dates a request.

A request that waits in the socket buffer (or the accept queue) because the server is busy has still arrived; the
scheduled server dates it by the kernel's receive time, so its first token is due TTFT after that, not after the
server got round to reading it. Linux only, as the benchmark is. Whether the dating holds under load is measured by
benchmarks/serving_benchmark_accuracy.py (docs/evidence/client-accuracy.md), not asserted here: a test that times
a socket fails when the machine is busy, which says nothing of the code.
"""

from __future__ import annotations

import importlib.util
import socket
import sys
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


def test_kernel_time_is_none_without_a_timestamp(standin):
    assert standin.kernel_time([]) is None
    assert standin.kernel_time([(socket.SOL_SOCKET, standin.SO_TIMESTAMPNS, b"\0")]) is None

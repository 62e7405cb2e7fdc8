# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The request driver's parts alone: where requests go, and the parser of one streamed answer.

test_serving_benchmark.py drives the whole of it against real servers.
"""

from __future__ import annotations

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


# ---------------------------------------------------------------- the stream parser alone

class _Blocks:
    """Stands in for an HTTP response that delivers these blocks, one per read1()."""

    def __init__(self, blocks):
        self.blocks = list(blocks)

    def read1(self, size):
        return self.blocks.pop(0) if self.blocks else b""


class _Socket:
    def settimeout(self, seconds):
        assert seconds > 0


def _read(blocks):
    outcome = requests.Outcome(started=time.perf_counter(), finished=0.0)
    requests.read_event_stream(_Blocks(blocks), _Socket(), time.perf_counter() + 30, outcome)
    return outcome


def test_events_split_anywhere_across_reads():
    stream = (b': keep-alive\r\n\r\ndata: {"choices":[{"text":"a"}]}\r\n\r\n'
              b'data:{"choices":[{"text":""}]}\n\n'
              b'data: {"choices":[{"delta":{"reasoning_content":"b"}}]}\n\n'
              b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}\n\ndata: [DONE]\n\n')
    for size in (1, 7, 64, len(stream)):
        outcome = _read(stream[i:i + size] for i in range(0, len(stream), size))
        assert len(outcome.token_times) == 2
        assert (outcome.prompt_tokens, outcome.completion_tokens) == (7, 2)
        assert outcome.first_token == outcome.token_times[0] and outcome.finished >= outcome.first_token


@pytest.mark.parametrize("stream, complaint", [
    (b'data: {"choices":[{"text":"a"}]}\n\n', "without data: [DONE]"),
    (b'data: {"choices":[{"text":\n\n', "invalid JSON"),
    (b'data: {"error":{"message":"kv cache full"}}\n\ndata: [DONE]\n\n', "kv cache full"),
])
def test_broken_streams_fail_the_request(stream, complaint):
    with pytest.raises(requests.RequestFailed, match=complaint.replace("[", r"\[").replace("]", r"\]")):
        _read([stream])

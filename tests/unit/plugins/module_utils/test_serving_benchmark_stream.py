# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The parser of one streamed HTTP response, fed bytes split anywhere, with the time of each read."""

from __future__ import annotations

import http.client

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils import serving_benchmark_stream as stream

EVENTS = (b': keep-alive\r\n\r\ndata: {"choices":[{"text":"a"}]}\r\n\r\n'
          b'data:{"choices":[{"text":""}]}\n\n'
          b'data: {"choices":[{"delta":{"reasoning_content":"b"}}]}\n\n'
          b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}\n\ndata: [DONE]\n\n')


def chunked(body, size):
    pieces = [body[i:i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\nX-Trailer: y\r\n\r\n"


def feed(response, read_size):
    """Feed ``response`` in reads of read_size bytes, read n at time n; the parser's outcome and whether it ended."""
    outcome = stream.Outcome(started=0.0, finished=0.0)
    parser = stream.ResponseParser(outcome)
    complete = False
    for n, i in enumerate(range(0, len(response), read_size)):
        assert not complete, "bytes after the end of the response"
        complete = parser.feed(response[i:i + read_size], float(n + 1))
    return outcome, parser, complete


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
@pytest.mark.parametrize("read_size", [1, 7, 64, 100000])
def test_events_split_anywhere_across_reads_and_chunks(framing, read_size):
    if framing == "chunked":
        response = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(EVENTS, 13)
    elif framing == "length":
        response = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(EVENTS), EVENTS)
    else:
        response = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + EVENTS
    outcome, parser, complete = feed(response, read_size)
    if framing == "close":
        assert not complete and parser.keep_alive is False
        parser.eof()
    else:
        assert complete and parser.keep_alive is True
    assert len(outcome.token_times) == 2
    assert (outcome.prompt_tokens, outcome.completion_tokens) == (7, 2)
    assert outcome.first_token == outcome.token_times[0] and outcome.finished >= outcome.first_token


def test_a_token_is_timed_at_the_read_that_brought_it_not_when_it_was_parsed():
    # The driver takes one time per selector pass, before parsing; the parser must keep exactly that time.
    outcome = stream.Outcome(started=0.0, finished=0.0)
    parser = stream.ResponseParser(outcome)
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    parser.feed(head + chunked(b'data: {"choices":[{"text":"a"}]}\n\n', 5)[:-len(b"0\r\nX-Trailer: y\r\n\r\n")], 1.5)
    parser.feed(chunked(b'data: {"choices":[{"text":"b"}]}\n\ndata: [DONE]\n\n', 1000), 2.25)
    assert outcome.token_times == [1.5, 2.25] and outcome.finished == 2.25


@pytest.mark.parametrize("response, keep_alive", [
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", True),
])
def test_whether_the_connection_carries_the_next_request(response, keep_alive):
    parser = stream.ResponseParser(stream.Outcome(started=0.0, finished=0.0))
    with pytest.raises(stream.RequestFailed, match="without data"):
        parser.feed(response, 1.0)  # an empty body has no [DONE]
    assert parser.keep_alive is keep_alive


def test_an_error_status_fails_with_the_start_of_its_body():
    body = b'{"error": {"message":\n  "kv cache full"}}'
    response = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    with pytest.raises(stream.RequestFailed, match=r'^HTTP 503 Service Unavailable: \{"error": \{"message": "kv'):
        feed(response, 5)


def sized(body):
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


@pytest.mark.parametrize("response, complaint", [
    (sized(b'data: {"choices":[{"text":"a"}]}\n\n'), "without data: \\[DONE\\]"),
    (sized(b'data: {"choices":[{"text":\n\n'), "invalid JSON"),
    (sized(b'data: {"choices":[]} extra\n\n'), "invalid JSON"),
    (sized(b'data: {"error":{"message":"kv cache full"}}\n\ndata: [DONE]\n\n'), "kv cache full"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "invalid chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY\r\n", "lacks the line end"),
    (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "something other than HTTP"),
])
def test_broken_responses_fail_the_request(response, complaint):
    with pytest.raises(stream.RequestFailed, match=complaint):
        feed(response, 1000)


def test_a_server_that_closes_before_or_while_answering():
    parser = stream.ResponseParser(stream.Outcome(started=0.0, finished=0.0))
    with pytest.raises(http.client.RemoteDisconnected):
        parser.eof()
    parser = stream.ResponseParser(stream.Outcome(started=0.0, finished=0.0))
    parser.feed(b"HTTP/1.1 200 OK\r\nContent-", 1.0)
    with pytest.raises(stream.RequestFailed, match="middle of the response headers"):
        parser.eof()
    outcome, parser, complete = feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                     + chunked(EVENTS, 1000)[:-10], 1000)
    parser.eof()  # [DONE] came; the cut terminating chunk does not fail the request
    assert not complete and len(outcome.token_times) == 2


@pytest.mark.parametrize("payload", [b'{"a": [1, 2.5, "x"]}', b'"\\u00e9"', b"null"])
def test_parse_event_agrees_with_json_loads(payload):
    import json
    assert stream.parse_event(payload) == json.loads(payload)

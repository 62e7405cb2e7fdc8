# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse one HTTP/1.1 response to a streamed request as its bytes arrive, and time every token in it.

serving_benchmark_requests.py reads the sockets and hands each read here with the time it took it at;
nothing here touches a socket or a clock, so the tests feed it bytes split anywhere.

Standard library only: this runs on the target with the host's own Python 3.9+.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import List, Optional

_ERROR_BODY_LIMIT = 2048
_HEAD_LIMIT = 65536
# json.loads without its wrappers (encoding detection, two whitespace scans): a third of the per-token cost.
_scan_json = json.JSONDecoder().scan_once


def parse_event(payload):
    """One event's JSON object, or ValueError: json.loads' verdicts, faster."""
    try:
        text = payload.decode("utf-8")
        value, end = _scan_json(text, 0)
    except StopIteration:
        raise ValueError("not JSON")
    if end != len(text):
        raise ValueError("extra data after the JSON value")
    return value


class RequestFailed(Exception):
    """One request failed; the message says how, for the report."""


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


class EventStream:
    """The server-sent events of one response: token arrival times, usage, [DONE]."""

    __slots__ = ("outcome", "token_times", "usage", "done", "pending")

    def __init__(self, outcome):
        self.outcome = outcome
        self.token_times = []
        self.usage = None
        self.done = False
        self.pending = b""

    def feed(self, data, now):
        """Events in ``data`` (split anywhere) arrived at ``now``. This is the per-token path: keep it lean."""
        if self.pending:
            data = self.pending + data
        lines = data.split(b"\n")
        self.pending = lines.pop()
        loads = parse_event
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                self.outcome.finished = now
                continue
            try:
                event = loads(payload)
            except ValueError:
                raise RequestFailed("the stream carried invalid JSON: %r" % payload[:120])
            if _chunk_has_text(event):
                self.token_times.append(now)
            if event.get("usage"):
                self.usage = event["usage"]
            if event.get("error"):
                raise RequestFailed("the server reported an error in the stream: %s" % json.dumps(event["error"]))

    def finish(self):
        """The body ended: fill in the outcome, or fail the request if the stream was cut short."""
        if not self.done:
            raise RequestFailed("the stream ended without data: [DONE] after %d chunks with text"
                                % len(self.token_times))
        outcome = self.outcome
        outcome.token_times = self.token_times
        outcome.first_token = self.token_times[0] if self.token_times else None
        if self.usage:
            outcome.prompt_tokens = self.usage.get("prompt_tokens")
            outcome.completion_tokens = self.usage.get("completion_tokens")


class _ErrorBody:
    """The start of a failed request's body, for its error message."""

    def __init__(self, status, reason):
        self.status = status
        self.reason = reason
        self.body = b""

    def feed(self, data, now):
        self.body += data
        if len(self.body) >= _ERROR_BODY_LIMIT:
            self.finish()

    def finish(self):
        body = self.body[:_ERROR_BODY_LIMIT].decode("utf-8", "replace").strip()
        raise RequestFailed("HTTP %d %s: %s" % (self.status, self.reason, " ".join(body.split())))


class ResponseParser:
    """One response: status line and headers, then a chunked, sized or close-delimited body into its consumer.

    feed() returns True once the response is complete; eof() says the server closed the connection.
    ``keep_alive`` tells whether the connection can carry the next request; ``answered`` whether any byte came.
    """

    def __init__(self, outcome):
        self.outcome = outcome
        self.answered = False
        self.keep_alive = True
        self.complete = False
        self._buffer = b""
        self._consumer = None
        self._mode = None  # "chunked", "length" or "close" once the headers are in
        self._left = 0  # bytes left in the current chunk, or of a sized body
        self._chunk_end = False  # the CRLF after a chunk's data is due
        self._trailers = False

    def feed(self, data, now):
        self.answered = True
        buffer = self._buffer + data if self._buffer else data
        if self._mode is None:
            buffer = self._head(buffer)
            if buffer is None:
                return False
        if self._mode == "chunked":
            pieces, self._buffer = self._dechunk(buffer)
            body = b"".join(pieces) if len(pieces) != 1 else pieces[0]
        elif self._mode == "length":
            body, self._buffer = buffer[:self._left], b""
            self._left -= len(body)
            self.complete = self._left == 0
        else:
            body, self._buffer = buffer, b""
        if body:
            self._consumer.feed(body, now)
        if self.complete:
            self._consumer.finish()
        return self.complete

    def eof(self):
        """The server closed the connection: the end of a close-delimited body, else a cut-short response."""
        self.keep_alive = False
        if self.complete:
            return
        if not self.answered:
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        if self._mode is None:
            raise RequestFailed("the server closed the connection in the middle of the response headers")
        # A cut-short chunked or sized body still ends the stream; EventStream.finish says whether [DONE] came.
        self.complete = True
        self._consumer.finish()

    def _head(self, buffer):
        """Parse the status line and headers; return what follows them, or None until they are all in."""
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _HEAD_LIMIT:
                    raise RequestFailed("the response headers exceed %d bytes" % _HEAD_LIMIT)
                self._buffer = buffer
                return None
            lines = buffer[:end].decode("latin-1").split("\r\n")
            buffer = buffer[end + 4:]
            version, dummy, rest = lines[0].partition(" ")
            code, dummy, reason = rest.partition(" ")
            if not version.startswith("HTTP/") or not code.isdigit():
                raise RequestFailed("the server answered something other than HTTP: %r" % lines[0][:120])
            status = int(code)
            if 100 <= status < 200:
                continue  # an interim answer (100 Continue); the real one follows
            break
        headers = {}
        for line in lines[1:]:
            name, dummy, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        connection = headers.get("connection", "")
        self.keep_alive = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
        self._consumer = EventStream(self.outcome) if status == 200 else _ErrorBody(status, reason.strip())
        if "chunked" in headers.get("transfer-encoding", ""):
            self._mode = "chunked"
        elif "content-length" in headers:
            self._mode = "length"
            try:
                self._left = int(headers["content-length"])
            except ValueError:
                raise RequestFailed("the response has an invalid Content-Length: %r" % headers["content-length"])
            self.complete = self._left == 0
        elif status in (204, 304):
            self._mode = "length"
            self.complete = True
        else:
            self._mode = "close"
            self.keep_alive = False
        return buffer

    def _dechunk(self, buffer):
        """The data of the chunks in ``buffer`` and what is left over, waiting for more."""
        pieces = []
        position, size = 0, len(buffer)
        find = buffer.find
        while position < size:
            if not (self._left or self._chunk_end or self._trailers):
                # The common case, a whole chunk at hand: size line, data, line end in one go.
                end = find(b"\r\n", position)
                if end > position:
                    try:
                        length = int(buffer[position:end].split(b";", 1)[0], 16)
                    except ValueError:
                        raise RequestFailed("the chunked response has an invalid chunk size: %r"
                                            % buffer[position:end][:40])
                    data_end = end + 2 + length
                    if length and buffer[data_end:data_end + 2] == b"\r\n":
                        pieces.append(buffer[end + 2:data_end])
                        position = data_end + 2
                        continue
            if self._left:
                piece = buffer[position:position + self._left]
                pieces.append(piece)
                position += len(piece)
                self._left -= len(piece)
                self._chunk_end = not self._left
                continue
            end = buffer.find(b"\r\n", position)
            if end < 0:
                break
            line = buffer[position:end]
            position = end + 2
            if self._chunk_end:
                if line:
                    raise RequestFailed("the chunked response lacks the line end after a chunk")
                self._chunk_end = False
            elif self._trailers:
                if not line:
                    self.complete = True
                    return pieces, buffer[position:]
            else:
                try:
                    self._left = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise RequestFailed("the chunked response has an invalid chunk size: %r" % line[:40])
                self._trailers = not self._left
        return pieces, buffer[position:]

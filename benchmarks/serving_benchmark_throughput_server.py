# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-in model server of serving_benchmark_throughput.py: streams /v1/completions the way SGLang 0.5.9 does.

Not a model: stdlib asyncio on 127.0.0.1 at a random port, pinned to core 0, answering /v1/completions the way
SGLang 0.5.9 streams (HTTP/1.1 chunked transfer, one SSE event and one write per token, the chunk JSON SGLang's
CompletionStreamResponse serializes to, a usage chunk with `choices: []` only when stream_options.include_usage
asks for it, then `data: [DONE]`). It runs decode "steps": each step sends one token to every open stream,
paced or as fast as its core allows. Scheduled instead (serving_benchmark_accuracy.py), each stream has a timing
of its own: its first token a fixed TTFT after the request arrived, then one token every fixed ITL, each write
time recorded. A scheduled server dates each request by the kernel's receive timestamp of its last bytes
(SO_TIMESTAMPNS), not by when its one thread got round to reading them: in a burst of 256 new connections that
was up to 25 ms later, in the accept queue or the socket buffer, and the client rightly counted that time.
GET /stats hands over (and clears) what it recorded of each request.
serving_benchmark_throughput.py runs it as its own process (`--serve`).
"""

from __future__ import annotations

import asyncio
import heapq
import json
import os
import random
import selectors
import socket
import struct
import sys
import threading
import time
import uuid

SERVER_CORE = 0
MODEL_NAME = "fast-stub"

# The stand-in model's vocabulary: output tokens, the test tokenizer and the ShareGPT-format prompts all use it.
VOCAB = (
    "the of and time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue side kind "
    "head house service friend father power hour game line end member law car city community name president team "
    "minute idea kid body information back parent face others level office door health person art war history party "
    "result change morning reason research girl guy moment air teacher force education foot boy age policy music "
    "market sense nation plan college interest death experience effect use class control care field development role"
).split()


class _Stream:
    """One streamed completion: its pre-rendered chunk parts and how far it has got."""

    __slots__ = ("conn", "prefix", "max_tokens", "sent", "offset", "usage_tail", "record", "times")

    def __init__(self, conn, model, max_tokens, prompt_tokens, include_usage, record):
        rid = uuid.uuid4().hex
        created = int(time.time())
        head = '{"id":"%s","object":"text_completion","created":%d,"model":%s,' % (rid, created, json.dumps(model))
        self.conn = conn
        self.prefix = ('data: ' + head + '"choices":[{"index":0,"text":').encode()
        self.max_tokens = max_tokens
        self.sent = 0
        self.offset = random.randrange(len(VOCAB))
        self.usage_tail = b""
        if include_usage:
            usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + max_tokens,
                     "completion_tokens": max_tokens, "reasoning_tokens": 0}
            self.usage_tail = _http_chunk(('data: ' + head + '"choices":[],"usage":%s}\n\n' % json.dumps(
                usage, separators=(",", ":"))).encode())
        self.record = record
        # Scheduled streams record every write; the decode steps of the throughput runs keep to the first and last.
        self.times = None


# The scheduled server waits in the event loop until this long before a token is due, then polls: epoll's
# millisecond timeouts alone would send each token up to a millisecond late.
_SPIN_S = 0.002

_MID = b',"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n'
_LAST = b',"logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}\n\n'
TOKENS = [json.dumps(" " + word).encode() for word in VOCAB]
_DONE = b"data: [DONE]\n\n"


# Linux's SO_TIMESTAMPNS (SO_TIMESTAMPNS_OLD) on x86 and arm; Python's socket module does not name it.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@ll")
_ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size)
_READ_SIZE = 262144


def _http_chunk(payload):
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class FastServer:
    """Runs decode steps over the open streams: one token to each per step, paced or as fast as it can."""

    def __init__(self, step_s, ttft_s=0.0, itl_s=0.0):
        self.step_s = step_s
        self.ttft_s = ttft_s
        self.itl_s = itl_s
        self.scheduled = bool(ttft_s or itl_s)
        self.active = []
        self.due = []
        self.records = []
        self.wake = asyncio.Event()
        self._order = 0
        self.selector = None

    def add(self, stream):
        if self.scheduled:
            stream.times = stream.record["times"] = []
            self._order += 1
            heapq.heappush(self.due, (stream.record["arrived"] + self.ttft_s, self._order, stream))
        else:
            self.active.append(stream)
        self.wake.set()

    async def scheduled_loop(self):
        """Each stream on its own clock: token k at arrival + TTFT + k * ITL, sent when due or as soon after."""
        clock = time.perf_counter
        due = self.due
        while True:
            if not due:
                self.wake.clear()
                await self.wake.wait()
                continue
            now = clock()
            wait = due[0][0] - now
            if wait > _SPIN_S:
                await asyncio.sleep(wait - _SPIN_S)
                continue
            if wait > 0:
                await asyncio.sleep(0)  # polls, and reads requests meanwhile
                continue
            while due and due[0][0] <= now:
                dummy, order, stream = heapq.heappop(due)
                if self._emit(stream, clock):
                    heapq.heappush(due, (stream.record["arrived"] + self.ttft_s + stream.sent * self.itl_s, order,
                                         stream))

    async def decode_loop(self):
        clock = time.perf_counter
        next_step = None
        while True:
            if not self.active:
                self.wake.clear()
                await self.wake.wait()
                next_step = None
            if next_step is None:
                next_step = clock()
            still = []
            for stream in self.active:
                if self._emit(stream, clock):
                    still.append(stream)
            self.active = still
            if self.step_s:
                # Steps on a fixed schedule, so the event loop's millisecond timer granularity averages out.
                next_step += self.step_s
                await asyncio.sleep(max(next_step - clock(), 0))
            else:
                await asyncio.sleep(0)

    @staticmethod
    def _emit(stream, clock):
        conn = stream.conn
        if conn.closed:
            stream.record["aborted"] = True
            return False
        index = stream.sent
        if not index:
            stream.record["first_token"] = clock()
        if stream.times is not None:
            stream.times.append(clock())
        token = TOKENS[(stream.offset + index) % len(TOKENS)]
        stream.sent = index + 1
        if stream.sent < stream.max_tokens:
            conn.transport.write(_http_chunk(stream.prefix + token + _MID))
            return True
        # Last token, then the usage chunk (when asked for), [DONE] and the end of the chunked body.
        conn.transport.write(_http_chunk(stream.prefix + token + _LAST) + stream.usage_tail + _http_chunk(_DONE)
                             + b"0\r\n\r\n")
        stream.record["finished"] = clock()
        stream.record["tokens"] = stream.sent
        conn.stream_done()
        return False


class _StampingSelector(selectors.DefaultSelector):
    """Notes when each select() returns: a request's arrival is then, not when its turn to be parsed came."""

    woke = 0.0

    def select(self, timeout=None):
        ready = super().select(timeout)
        self.woke = time.perf_counter()
        return ready


def kernel_time(ancillary):
    """The perf_counter() time of a read's SCM_TIMESTAMPNS (the wall clock): None if the read carried none."""
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
            # Only the age of the timestamp crosses clocks, so neither clock's drift or slewing counts.
            age = max(time.time_ns() - (seconds * 1000000000 + nanoseconds), 0)
            return time.perf_counter() - age / 1e9
    return None


class _StampedTransport:
    """One accepted connection, read with recvmsg() so that each read carries the kernel's receive time.

    asyncio's own transports read with recv(), which drops it. Only what _Connection uses: write() and close().
    """

    def __init__(self, loop, sock, protocol):
        self.loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self.protocol = protocol
        self.unsent = bytearray()
        self.closing = False
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        protocol.connection_made(self)
        loop.add_reader(self.fd, self._readable)

    def _readable(self):
        try:
            data, ancillary, dummy, dummy2 = self.sock.recvmsg(_READ_SIZE, _ANCILLARY_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._lost()
            return
        self.protocol.data_received(data, kernel_time(ancillary))

    def write(self, data):
        if self.sock is None or self.closing:
            return
        if self.unsent:
            self.unsent += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._lost()
            return
        if sent < len(data):
            self.unsent += data[sent:]
            self.loop.add_writer(self.fd, self._writable)

    def _writable(self):
        try:
            sent = self.sock.send(self.unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._lost()
            return
        del self.unsent[:sent]
        if not self.unsent:
            self.loop.remove_writer(self.fd)
            if self.closing:
                self._lost()

    def close(self):
        if self.unsent:
            self.closing = True
            self.loop.remove_reader(self.fd)
        else:
            self._lost()

    def _lost(self):
        if self.sock is None:
            return
        self.loop.remove_reader(self.fd)
        self.loop.remove_writer(self.fd)
        self.sock.close()
        self.sock = None
        self.protocol.connection_lost(None)


class _StampedListener:
    """Accepts connections for _StampedTransport; the listener's SO_TIMESTAMPNS passes to each accepted socket."""

    def __init__(self, loop, server, backlog=1024):
        self.loop = loop
        self.server = server
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.sock.setblocking(False)
        self.sockets = [self.sock]
        loop.add_reader(self.sock.fileno(), self._acceptable)

    def _acceptable(self):
        while True:
            try:
                conn, dummy = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors, say: the client sees its connection fail
                return
            _StampedTransport(self.loop, conn, _Connection(self.server))

    def close(self):
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()


class _Connection(asyncio.Protocol):
    def __init__(self, server):
        self.server = server
        self.buffer = b""
        self.busy = False
        self.closed = False
        self.keep_alive = True
        self.transport = None
        # On asyncio's transports (the unpaced and paced servers), which give no kernel receive times, a new
        # connection's first request is dated from when the connection was accepted: the client sends it right
        # after connecting, but asyncio reads it only once the transport is made, which for a burst of 256
        # connections is tens of milliseconds later. (The accept itself can be as late: the scheduled server's
        # _StampedTransport dates every read by the kernel instead.)
        self.read_at = server.selector.woke if server.selector else 0.0
        self.seen_at = self.read_at
        self.first = True

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.closed = True

    def data_received(self, data, kernel_at=None):
        # The request is in once its last bytes are: the kernel's receive time of this read where the transport
        # gives one (scheduled), else the latest select(), which brought them.
        self.seen_at = self.server.selector.woke
        if kernel_at is not None:
            self.read_at = kernel_at
        elif not self.first:
            self.read_at = self.seen_at
        self.buffer += data
        if not self.busy:
            self._process()

    def _process(self):
        while not self.busy and not self.closed:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buffer[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, dummy, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            method, target = lines[0].split(" ")[:2]
            self.keep_alive = headers.get("connection", "").lower() != "close"
            self._handle(method, target.split("?")[0], body)

    def _json(self, status, obj):
        body = json.dumps(obj).encode()
        self.transport.write(b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (status.encode(), len(body), body))
        if not self.keep_alive:
            self.transport.close()

    def _handle(self, method, path, body):
        if method == "GET" and path in ("/health", "/health_generate"):
            self._json("200 OK", {})
        elif method == "GET" and path == "/v1/models":
            self._json("200 OK", {"object": "list", "data": [{"id": MODEL_NAME, "object": "model",
                                                              "owned_by": "sglang", "root": MODEL_NAME}]})
        elif method == "GET" and path == "/get_server_info":
            self._json("200 OK", {"version": "fast-stub", "internal_states": []})
        elif method == "GET" and path == "/stats":
            records, self.server.records = self.server.records, []
            self._json("200 OK", records)
        elif method == "POST" and path == "/v1/completions":
            self._completion(json.loads(body))
        else:
            self._json("404 Not Found", {"error": {"message": "no route %s %s" % (method, path)}})

    def _completion(self, request):
        prompt = request.get("prompt", "")
        # The stand-in's prompt tokens are whitespace-separated words, as its tokenizer counts them.
        prompt_tokens = len(prompt) if isinstance(prompt, list) else len(prompt.split())
        max_tokens = int(request.get("max_tokens") or 16)
        self.first = False
        # "seen": when the server's select() brought the request, which can be well after it "arrived".
        record = {"arrived": self.read_at, "seen": self.seen_at, "max_tokens": max_tokens,
                  "prompt_tokens": prompt_tokens, "stream": bool(request.get("stream")), "finished": None, "tokens": 0,
                  "tag": prompt.partition(":")[0] if isinstance(prompt, str) else None}
        self.server.records.append(record)
        model = request.get("model", MODEL_NAME)
        if not request.get("stream"):
            text = "".join(json.loads(TOKENS[k % len(TOKENS)]) for k in range(max_tokens))
            record.update(finished=time.perf_counter(), tokens=max_tokens)
            self._json("200 OK", {"id": uuid.uuid4().hex, "object": "text_completion", "created": int(time.time()),
                                  "model": model, "choices": [{"index": 0, "text": text, "logprobs": None,
                                                               "finish_reason": "length", "matched_stop": None}],
                                  "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                                            "total_tokens": prompt_tokens + max_tokens}})
            return
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        self.busy = True
        self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
        self.server.add(_Stream(self, model, max_tokens, prompt_tokens, include_usage, record))

    def stream_done(self):
        self.busy = False
        if not self.keep_alive:
            self.transport.close()
        elif self.buffer:
            self._process()


def serve(step_s, lifetime_s, ttft_s=0.0, itl_s=0.0):
    """Print the port, serve until stdin closes or lifetime_s passes (so it never outlives its parent)."""
    os.sched_setaffinity(0, {SERVER_CORE})

    selector = _StampingSelector()

    async def main():
        server = FastServer(step_s, ttft_s, itl_s)
        server.selector = selector
        loop = asyncio.get_running_loop()
        if server.scheduled:
            listener = _StampedListener(loop, server)
        else:
            listener = await loop.create_server(lambda: _Connection(server), "127.0.0.1", 0, backlog=1024)
        decoder = asyncio.ensure_future(server.scheduled_loop() if server.scheduled else server.decode_loop())
        print(listener.sockets[0].getsockname()[1], flush=True)
        stop = asyncio.Event()
        threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)), daemon=True).start()
        try:
            await asyncio.wait_for(stop.wait(), lifetime_s)
        except asyncio.TimeoutError:
            pass
        decoder.cancel()
        listener.close()

    loop = asyncio.SelectorEventLoop(selector)
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()

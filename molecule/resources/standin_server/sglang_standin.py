# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for ``python -m sglang.launch_server`` in tests.

The real server this stands in for serves GLM-5-NVFP4, which needs 8 SM120 GPUs
(RTX PRO 6000 Blackwell) and about 410 GB of weights: neither exists on the test
machines. This script takes the same command line the sglang_service role's unit
passes (flags it does not use are accepted and ignored), and answers the HTTP
the collection relies on the way SGLang 0.5.9 does:

- listens at once; ``/health`` answers 503 during a warm-up delay
  (``--standin-warmup`` or SGLANG_STANDIN_WARMUP, default 3 s) and 200 after,
  while ``/v1/models`` answers 200 from the start;
- ``/v1/completions`` and ``/v1/chat/completions``, streaming (SSE, with a usage
  chunk when ``stream_options.include_usage``) and not, generating
  ``max_tokens`` tokens at SGLANG_STANDIN_TOKENS_PER_SECOND per request, and
  stopping earlier at an end-of-sequence unless ``ignore_eos``;
- with ``--api-key``, everything but ``/health*`` and ``/metrics`` wants
  ``Authorization: Bearer <key>`` (SGLang's rule, sglang/srt/utils/auth.py).

SGLANG_STANDIN_FAIL_AT_START=1 makes it exit 1 at once with a message on
stderr, as a launch that cannot load its model does.

It also plays the regression measured when the FlashInfer allreduce-fusion
gate (roles/sm120_patches, gate flashinfer_allreduce_fusion) was first tried:
GLM-5-NVFP4 on 8x RTX PRO 6000 fell from about 3,740 to 236 output tok/s and
the GPUs to 125 W of 600 W. So the smoke check's canary has something to catch:

- At start, as SGLang imports its code at start, it reads
  ``sglang/srt/layers/communicator.py`` of the installed SGLang, under the
  site-packages directory named by SGLANG_STANDIN_SGLANG_PACKAGE_DIR (for example
  /opt/sglang/lib/python3.11/site-packages). The fusion-gate patch is live when
  ``apply_flashinfer_allreduce_fusion`` lets SM120 in:
  ``(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)``.
  Unset variable, missing file: not live. stderr says which, and why.
- Live, each request generates 3740/236 (about 15.9) times slower.
- It writes the power draw it emulates for each GPU (all alike), in watts, one number, to
  SGLANG_STANDIN_POWER_FILE (default /var/lib/sglang/standin-power-draw, in the
  service's WorkingDirectory, which the service user owns): the load draw while
  at least one generation request is in flight (480 W, 0.8 of the 600 W limit;
  125 W with the patch live), the idle draw (60 W) otherwise, at start and at
  exit (SIGTERM, SIGINT). Each write is a temp file in the same directory and os.replace().

How the two stand-ins cooperate: the nvidia-smi stand-in
(molecule/resources/nvidia-smi/nvidia_smi_standin.py, /usr/bin/nvidia-smi in the
containers) reports that file's number as every GPU's ``power.draw`` when the
file exists, so serving_benchmark's power sampling, which runs nvidia-smi while
the load runs, sees the GPUs fall from 0.8 to about 0.2 of their limit exactly
when the throughput collapses. Without the file it reports the capture's idle
numbers, as before.

Standard library only: the unit runs it as ``/usr/bin/python3 sglang_standin.py``
(no shebang: ansible-test allows only ``#!/usr/bin/env python`` here, which
Debian does not have).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAIL_AT_START_MESSAGE = "sglang_standin: failing at start on purpose (SGLANG_STANDIN_FAIL_AT_START=1)"

# Tokens generated before a natural end-of-sequence when ignore_eos is false.
EOS_AFTER_TOKENS = 24
# SGLang's default when a completion request names no max_tokens.
DEFAULT_MAX_TOKENS = 16
WORD = " lorem"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--model-path", "--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--served-model-name")
    parser.add_argument("--api-key")
    parser.add_argument("--context-length", type=int)
    parser.add_argument("--standin-warmup", type=float,
                        default=float(os.environ.get("SGLANG_STANDIN_WARMUP", "3")))
    args, ignored = parser.parse_known_args(argv)
    return args, ignored


# ---------------------------------------------------------------------------
# The fusion gate's measured regression, all in this one place. The FlashInfer allreduce-fusion
# gate (roles/sm120_patches, gate flashinfer_allreduce_fusion) on GLM-5-NVFP4,
# 8x RTX PRO 6000, PCIe only, TP 8: output throughput fell from about 3,740 to
# 236 tok/s and each GPU to 125 W of its 600 W limit, because the TRT-LLM
# communication kernels behind the fusion are not built for PCIe SM120.
UNPATCHED_OUTPUT_TOK_S = 3740.0
FUSION_PATCHED_OUTPUT_TOK_S = 236.0
FUSION_SLOWDOWN = UNPATCHED_OUTPUT_TOK_S / FUSION_PATCHED_OUTPUT_TOK_S  # about 15.85
# Per-GPU draw in watts. The article's unpatched run drew only about 250 W, the
# underfeeding that started the hunt; the stand-in's healthy server draws 0.8 of
# the limit, so a power-fraction threshold tells healthy from collapsed at once.
LOAD_W = 480.0
FUSION_LOAD_W = 125.0
IDLE_W = 60.0

PACKAGE_DIR_ENV = "SGLANG_STANDIN_SGLANG_PACKAGE_DIR"
COMMUNICATOR = os.path.join("sglang", "srt", "layers", "communicator.py")
FUSION_FUNCTION = "apply_flashinfer_allreduce_fusion"
# The condition after the gate's widen_fusion_condition edit; 0.5.8 to 0.5.9 ship
# "(_is_sm90_supported or _is_sm100_supported)".
FUSION_CONDITION_WITH_SM120 = re.compile(
    r"\(\s*_is_sm90_supported\s+or\s+_is_sm100_supported\s+or\s+_is_sm120_supported\s*\)")
POWER_FILE = "/var/lib/sglang/standin-power-draw"


def function_source(source, name):
    """The text of a top-level function, from its def to the next top-level statement; None when absent."""
    start = re.search(r"^def %s\b" % re.escape(name), source, re.M)
    if not start:
        return None
    # The next line that starts in column 0 ends it; comments and the ")" of a long signature do not.
    end = re.compile(r"^[^\s#)]", re.M).search(source, start.end())
    return source[start.start():end.start() if end else len(source)]


def fusion_gate_live(package_dir):
    """(live, why): does the installed SGLang let SM120 take the FlashInfer allreduce fusion?"""
    if not package_dir:
        return False, "%s is not set" % PACKAGE_DIR_ENV
    path = os.path.join(package_dir, COMMUNICATOR)
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
    except OSError as exc:
        return False, "cannot read %s: %s" % (path, exc.strerror or exc)
    body = function_source(source, FUSION_FUNCTION)
    if body is None:
        return False, "%s has no %s()" % (path, FUSION_FUNCTION)
    if FUSION_CONDITION_WITH_SM120.search(body):
        return True, "%s() in %s includes _is_sm120_supported" % (FUSION_FUNCTION, path)
    return False, "%s() in %s leaves SM120 out" % (FUSION_FUNCTION, path)


def tokens_per_second(fusion_live=False):
    """The one place the generation rate is decided (per request)."""
    rate = float(os.environ.get("SGLANG_STANDIN_TOKENS_PER_SECOND", "400"))
    return rate / FUSION_SLOWDOWN if fusion_live else rate


def load_watts(fusion_live):
    """Per-GPU draw while a request is generating."""
    return FUSION_LOAD_W if fusion_live else LOAD_W


# --------------------------------------------------------------------------- (end of the regression)


class PowerDraw:
    """The per-GPU draw the stand-in emulates, kept in a file for the nvidia-smi stand-in."""

    def __init__(self, path, load_w):
        self.path = path
        self.load_w = load_w
        self.in_flight = 0
        self.closed = False
        self.warned = False
        self.lock = threading.Lock()

    def start(self):
        with self.lock:
            self._write(IDLE_W)

    def close(self):
        with self.lock:
            self._write(IDLE_W)
            self.closed = True

    @contextlib.contextmanager
    def generating(self):
        with self.lock:
            self.in_flight += 1
            if self.in_flight == 1:
                self._write(self.load_w)
        try:
            yield
        finally:
            with self.lock:
                self.in_flight -= 1
                if self.in_flight == 0:
                    self._write(IDLE_W)

    def _write(self, watts):
        # Atomic, so nvidia-smi never reads half a number: a temp file beside the target, then os.replace().
        if self.closed:
            return
        temp = None
        try:
            handle, temp = tempfile.mkstemp(prefix=".standin-power-draw.", dir=os.path.dirname(self.path) or ".")
            with os.fdopen(handle, "w") as stream:
                stream.write("%.2f\n" % watts)
            # Readable by whoever runs nvidia-smi, not only the service user.
            os.chmod(temp, 0o644)
            os.replace(temp, self.path)
        except OSError as exc:
            if temp:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
            if not self.warned:
                self.warned = True
                sys.stderr.write("sglang_standin: cannot write the power draw to %s (%s); nvidia-smi keeps its "
                                 "captured numbers\n" % (self.path, exc))


class Standin:
    def __init__(self, args, fusion_live=False, power_file=POWER_FILE):
        self.model = args.served_model_name or args.model_path
        self.api_key = args.api_key
        self.context_length = args.context_length or 202752
        self.ready = threading.Event()
        self.created = int(time.time())
        self.fusion_live = fusion_live
        self.power = PowerDraw(power_file, load_watts(fusion_live))

    def tokens_per_second(self):
        return tokens_per_second(self.fusion_live)

    def tokens_for(self, body):
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_MAX_TOKENS
        max_tokens = max(0, int(max_tokens))
        if body.get("ignore_eos"):
            return max_tokens, "length"
        if max_tokens > EOS_AFTER_TOKENS:
            return EOS_AFTER_TOKENS, "stop"
        return max_tokens, "length"


def prompt_tokens(body):
    if "messages" in body:
        text = " ".join(str(message.get("content", "")) for message in body["messages"])
    else:
        prompt = body.get("prompt", "")
        text = " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)
    return max(1, len(text.split()))


class Server(ThreadingHTTPServer):
    daemon_threads = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sglang-standin"
    standin = None  # set in main()

    def log_message(self, format, *args):
        if self.path.startswith("/health"):
            return  # polled every second or so while the server starts
        sys.stderr.write("sglang_standin: %s %s\n" % (self.address_string(), format % args))

    # ------------------------------------------------------------ plumbing
    def _send_json(self, status, payload):
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _authorized(self):
        if not self.standin.api_key:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _space, token = header.partition(" ")
        if scheme.lower() == "bearer" and token == self.standin.api_key:
            return True
        self._send_json(401, {"error": "Unauthorized"})
        return False

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, payload):
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self._chunk(("data: %s\n\n" % text).encode("utf-8"))

    # ------------------------------------------------------------ routes
    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path.startswith("/health"):
            self._send_empty(200 if self.standin.ready.is_set() else 503)
        elif path == "/metrics":
            self._send_empty(200)
        elif path == "/v1/models":
            if self._authorized():
                self._send_json(200, {"object": "list", "data": [{
                    "id": self.standin.model, "object": "model", "created": self.standin.created,
                    "owned_by": "sglang", "root": self.standin.model,
                    "max_model_len": self.standin.context_length}]})
        else:
            self._send_json(404, {"detail": "Not Found"})

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path not in ("/v1/completions", "/v1/chat/completions"):
            self._send_json(404, {"detail": "Not Found"})
            return
        if not self._authorized():
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            self._send_json(400, {"object": "error", "message": "invalid JSON: %s" % exc, "code": 400})
            return
        # Requests that arrive during the warm-up wait for it, as SGLang queues them.
        self.standin.ready.wait()
        chat = path == "/v1/chat/completions"
        if body.get("stream"):
            self._stream(body, chat)
        else:
            self._complete(body, chat)

    # ------------------------------------------------------------ generation
    def _generate(self, count):
        """Yield count tokens, paced at tokens_per_second()."""
        interval = 1.0 / self.standin.tokens_per_second()
        started = time.monotonic()
        for index in range(count):
            delay = started + (index + 1) * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            yield WORD

    def _usage(self, body, completion):
        prompt = prompt_tokens(body)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _complete(self, body, chat):
        count, finish = self.standin.tokens_for(body)
        with self.standin.power.generating():
            text = "".join(self._generate(count))
        rid = uuid.uuid4().hex
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            kind = "text_completion"
        self._send_json(200, {"id": rid, "object": kind, "created": int(time.time()), "model": self.standin.model,
                              "choices": [choice], "usage": self._usage(body, count)})

    def _stream(self, body, chat):
        count, finish = self.standin.tokens_for(body)
        rid = uuid.uuid4().hex
        kind = "chat.completion.chunk" if chat else "text_completion"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(choice_fields, **extra):
            choice = dict({"index": 0, "finish_reason": None}, **choice_fields)
            payload = {"id": rid, "object": kind, "created": int(time.time()), "model": self.standin.model,
                       "choices": [choice]}
            payload.update(extra)
            self._event(payload)

        if chat:
            event({"delta": {"role": "assistant", "content": ""}})
        with self.standin.power.generating():
            for token in self._generate(count):
                event({"delta": {"content": token}} if chat else {"text": token, "logprobs": None})
        event({"delta": {}, "finish_reason": finish} if chat else {"text": "", "finish_reason": finish})
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({"id": rid, "object": kind, "created": int(time.time()), "model": self.standin.model,
                         "choices": [], "usage": self._usage(body, count)})
        self._event("[DONE]")
        self._chunk(b"")


def main(argv):
    if os.environ.get("SGLANG_STANDIN_FAIL_AT_START") == "1":
        sys.stderr.write(FAIL_AT_START_MESSAGE + "\n")
        return 1
    args, ignored = parse_args(argv)
    if not os.path.isdir(args.model_path):
        sys.stderr.write("sglang_standin: --model-path %s is not a directory\n" % args.model_path)
        return 2
    fusion_live, why = fusion_gate_live(os.environ.get(PACKAGE_DIR_ENV))
    standin = Standin(args, fusion_live, os.environ.get("SGLANG_STANDIN_POWER_FILE") or POWER_FILE)
    Handler.standin = standin
    if ":" in args.host:
        Server.address_family = socket.AF_INET6
    server = Server((args.host, args.port), Handler)
    sys.stderr.write("sglang_standin: FlashInfer allreduce-fusion gate patch live: %s (%s); emulating %.1f tokens/s "
                     "per request and %.0f W per GPU under load, %.0f W idle, in %s\n"
                     % ("yes" if fusion_live else "no", why, standin.tokens_per_second(), standin.power.load_w, IDLE_W,
                        standin.power.path))
    sys.stderr.write("sglang_standin: standing in for sglang.launch_server, serving %s from %s on %s:%d "
                     "(warm-up %.1f s, %.1f tokens/s per request); ignored flags: %s\n"
                     % (standin.model, args.model_path, args.host, args.port, args.standin_warmup,
                        standin.tokens_per_second(), " ".join(ignored) or "none"))
    standin.power.start()
    # systemd stops the unit with SIGTERM, possibly mid-request: leave the GPUs reading idle, as real ones would.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    timer = threading.Timer(args.standin_warmup, standin.ready.set)
    timer.daemon = True
    timer.start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        standin.power.close()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

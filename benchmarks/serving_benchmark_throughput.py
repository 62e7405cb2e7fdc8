# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How many streamed tokens per second one serving_benchmark run sustains on one core, next to sglang.bench_serving.

Both clients load the same local server in the same run, at the same concurrency and token counts, on the
same pinned core; the script prints each tool's own figures, the server's count, the client CPU seconds and
the ratio serving_benchmark / bench_serving. Target: at least 40,000 output tok/s and no slower than
bench_serving, so the measuring tool is never what limits a deployment that serves 3,740 tok/s.

The server is a stand-in for the model server (SGLang), not a model: stdlib asyncio on 127.0.0.1 at a random
port, pinned to core 0, answering /v1/completions the way SGLang 0.5.9 streams (HTTP/1.1 chunked transfer, one
SSE event and one write per token, the chunk JSON SGLang's CompletionStreamResponse serializes to, a usage chunk
with `choices: []` only when stream_options.include_usage asks for it, then `data: [DONE]`). It runs decode
"steps": each step sends one token to every open stream. Unpaced, it sends as fast as its core allows, so the
client is what limits throughput; paced, it sends at a deployment's rate, and the client's CPU share shows the
headroom left at that rate. The clients run on core 1 (the machines here have 2 cores).

Output tokens are single words of a word-level vocabulary. bench_serving counts output tokens as the requested
output length (SGLang sends no usage without include_usage, which bench_serving does not ask for) and also
re-tokenizes the generated text; a word-level tokenizer built here with the `tokenizers` library from that
vocabulary makes the re-tokenized count equal the streamed one, and the server's own count is printed beside
both. bench_serving's `random` dataset samples prompts from ShareGPT-format conversations; with no Hugging Face
access here, the script writes such a file from the same vocabulary and passes it as --dataset-path. Nothing
leaves 127.0.0.1.

Setup, once (a venv apart from the controller's, at $SM120_BENCH_VENV, by default
~/.cache/sm120-sglang/bench-serving-venv; sglang goes in without its serving stack; about 40 s, 700 MB):
    python3 benchmarks/serving_benchmark_throughput.py --setup
which runs
    python3 -m venv $SM120_BENCH_VENV
    $SM120_BENCH_VENV/bin/python -m pip install --no-deps sglang==0.5.9
    $SM120_BENCH_VENV/bin/python -m pip install -r benchmarks/requirements.txt
Run (any Python 3.9+; the serving_benchmark client runs under this one, standard library only):
    .venv/bin/python benchmarks/serving_benchmark_throughput.py
It finishes in about 1.5 minutes; every client and server has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Outside the checkout: inside, `ansible-galaxy collection build` would pack it (build_ignore names only the
# top-level .venv) and the device tool would carry it.
BENCH_VENV = Path(os.environ.get("SM120_BENCH_VENV") or Path.home() / ".cache" / "sm120-sglang" / "bench-serving-venv")
SGLANG_VERSION = "0.5.9"
SERVER_CORE, CLIENT_CORE = 0, 1
MODEL_NAME = "fast-stub"
DEPLOYMENT_TOK_S = 3740.0
TARGET_TOK_S = 40000.0

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


# ---------------------------------------------------------------- the stand-in server

class _Stream:
    """One streamed completion: its pre-rendered chunk parts and how far it has got."""

    __slots__ = ("conn", "prefix", "max_tokens", "sent", "offset", "usage_tail", "record")

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


_MID = b',"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n'
_LAST = b',"logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}\n\n'
_TOKENS = [json.dumps(" " + word).encode() for word in VOCAB]
_DONE = b"data: [DONE]\n\n"


def _http_chunk(payload):
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class FastServer:
    """Runs decode steps over the open streams: one token to each per step, paced or as fast as it can."""

    def __init__(self, step_s):
        self.step_s = step_s
        self.active = []
        self.records = []
        self.wake = asyncio.Event()

    def add(self, stream):
        self.active.append(stream)
        self.wake.set()

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
        token = _TOKENS[(stream.offset + index) % len(_TOKENS)]
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


class _Connection(asyncio.Protocol):
    def __init__(self, server):
        self.server = server
        self.buffer = b""
        self.busy = False
        self.closed = False
        self.keep_alive = True
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.closed = True

    def data_received(self, data):
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
        record = {"arrived": time.perf_counter(), "max_tokens": max_tokens, "prompt_tokens": prompt_tokens,
                  "stream": bool(request.get("stream")), "finished": None, "tokens": 0}
        self.server.records.append(record)
        model = request.get("model", MODEL_NAME)
        if not request.get("stream"):
            text = "".join(json.loads(_TOKENS[k % len(_TOKENS)]) for k in range(max_tokens))
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


def serve(step_s, lifetime_s):
    """Print the port, serve until stdin closes or lifetime_s passes (so it never outlives its parent)."""
    os.sched_setaffinity(0, {SERVER_CORE})

    async def main():
        server = FastServer(step_s)
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(lambda: _Connection(server), "127.0.0.1", 0, backlog=1024)
        decoder = asyncio.ensure_future(server.decode_loop())
        print(listener.sockets[0].getsockname()[1], flush=True)
        stop = asyncio.Event()
        threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)), daemon=True).start()
        try:
            await asyncio.wait_for(stop.wait(), lifetime_s)
        except asyncio.TimeoutError:
            pass
        decoder.cancel()
        listener.close()

    asyncio.run(main())


# ---------------------------------------------------------------- the two clients

def import_module_utils():
    """The collection's module_utils, through .collections (pytest.ini) or, without it, a temporary link."""
    collections = REPO / ".collections"
    if not (collections / "ansible_collections" / "sm120" / "sglang").exists():
        collections = Path(tempfile.mkdtemp(prefix="sm120-collections-"))
        (collections / "ansible_collections" / "sm120").mkdir(parents=True)
        (collections / "ansible_collections" / "sm120" / "sglang").symlink_to(REPO)
    sys.path.insert(0, str(collections))
    from ansible_collections.sm120.sglang.plugins.module_utils import serving_benchmark
    return serving_benchmark


def client_serving_benchmark(args):
    """One serving_benchmark run, as the module runs it (power sampling off: no GPU here); JSON on stdout."""
    os.sched_setaffinity(0, {CLIENT_CORE})
    sb = import_module_utils()
    plan = sb.BenchmarkPlan(url=args.url, model=MODEL_NAME, concurrency=args.concurrency,
                            num_requests=args.num_prompts, num_warmup=args.warmup, input_tokens=args.input_len,
                            output_tokens=args.output_len, timeout=args.client_timeout)
    started = time.process_time()
    try:
        result = sb.run_benchmark(plan, sb.PowerPlan(enabled=False))
    except sb.BenchmarkError as exc:
        result = dict(exc.result, failed=str(exc))
    result["process_cpu_s"] = time.process_time() - started
    print(json.dumps(result))


def make_assets(directory):
    """Runs in the bench venv: the word-level tokenizer and a ShareGPT-format file bench_serving's random dataset reads."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    directory = Path(directory)
    vocab = {"[UNK]": 0}
    vocab.update((word, number + 1) for number, word in enumerate(VOCAB))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]").save_pretrained(directory / "tokenizer")

    rng = random.Random(1)

    def words(low, high):
        return " ".join(rng.choice(VOCAB) for dummy in range(rng.randint(low, high)))

    conversations = [{"id": "stub-%d" % n, "conversations": [{"from": "human", "value": words(50, 400)},
                                                             {"from": "gpt", "value": words(50, 400)}]}
                     for n in range(4096)]
    (directory / "sharegpt.json").write_text(json.dumps(conversations))

    # The property the comparison rests on: the text the server streams re-tokenizes to one token per chunk.
    tokenizer = AutoTokenizer.from_pretrained(str(directory / "tokenizer"))
    streamed = "".join(json.loads(token) for token in _TOKENS * 3)
    count = len(tokenizer.encode(streamed, add_special_tokens=False))
    if count != 3 * len(_TOKENS) or tokenizer.num_special_tokens_to_add() != 0:
        raise SystemExit("test tokenizer does not count one token per streamed word: %d for %d"
                         % (count, 3 * len(_TOKENS)))
    print(json.dumps({"tokenizer": str(directory / "tokenizer"), "dataset": str(directory / "sharegpt.json")}))


# ---------------------------------------------------------------- orchestration

class CpuWatch:
    """Samples utime+stime of some processes every 10 ms, so CPU seconds can be read for any time window."""

    def __init__(self, pids):
        self.pids = pids
        self.samples = []
        self.tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cpu(self, pid):
        try:
            with open("/proc/%d/stat" % pid) as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self.tick

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), [self._cpu(pid) for pid in self.pids]))
            self._stop.wait(0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def at(self, when, which):
        """CPU seconds of pids[which] at time ``when``, linearly between samples."""
        points = [(t, cpus[which]) for t, cpus in self.samples if cpus[which] is not None]
        if not points:
            raise ValueError("no CPU samples of process %d" % self.pids[which])
        # Before the first sample the process had barely started; after the last one it had exited (reaped
        # only once wait() returned), so its CPU time no longer grew.
        if when <= points[0][0]:
            return points[0][1]
        if when >= points[-1][0]:
            return points[-1][1]
        for (t0, c0), (t1, c1) in zip(points, points[1:]):
            if t0 <= when <= t1:
                return c0 + (c1 - c0) * (when - t0) / (t1 - t0) if t1 > t0 else c0
        return points[-1][1]


def pinned_to_client_core():
    os.sched_setaffinity(0, {CLIENT_CORE})


def local_env():
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", PYTHONUNBUFFERED="1")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(name, None)
    return env


class Server:
    def __init__(self, step_s, lifetime_s):
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", "--step-s", repr(step_s),
                                      "--lifetime-s", str(lifetime_s)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=local_env())
        self.port = int(self.proc.stdout.readline())
        self.url = "http://127.0.0.1:%d" % self.port

    def stats(self):
        import urllib.request
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.url + "/stats", timeout=10) as answer:
            return json.loads(answer.read())

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measured(records, count):
    """The last ``count`` streamed requests the server saw (the warm-up ones come first)."""
    streamed = sorted((r for r in records if r["stream"]), key=lambda r: r["arrived"])
    return streamed[-count:]


def run_client(kind, server, args, workdir, assets, label):
    """Run one client to completion on the client core; return its figures next to the server's and the CPU clock's."""
    if kind == "serving_benchmark":
        command = [sys.executable, __file__, "--client-serving-benchmark", "--url", server.url]
        for name in ("concurrency", "num_prompts", "input_len", "output_len", "warmup", "client_timeout"):
            command += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    else:
        output_file = workdir / ("bench-serving-%s.jsonl" % label)
        command = [str(BENCH_VENV / "bin" / "python"), "-m", "sglang.bench_serving", "--backend", "sglang-oai",
                   "--base-url", server.url, "--model", assets["tokenizer"], "--served-model-name", MODEL_NAME,
                   "--tokenizer", assets["tokenizer"], "--dataset-name", "random", "--dataset-path", assets["dataset"],
                   "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
                   "--random-range-ratio", "1.0", "--num-prompts", str(args.num_prompts),
                   "--max-concurrency", str(args.concurrency), "--request-rate", "inf",
                   "--warmup-requests", str(args.warmup), "--disable-tqdm", "--seed", "1",
                   "--output-file", str(output_file)]
    log = workdir / ("%s-%s.log" % (kind, label))
    server.stats()  # clears the server's records
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=str(workdir), env=local_env(),
                                preexec_fn=pinned_to_client_core)
        with CpuWatch([proc.pid, server.proc.pid]) as watch:
            try:
                rc = proc.wait(args.client_timeout + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = "killed after %d s" % (args.client_timeout + 60)
    text = log.read_text()
    if rc != 0:
        return {"tool": kind, "label": label, "failed": "exit %s; log %s:\n%s" % (rc, log, text[-3000:])}
    if kind == "serving_benchmark":
        own = json.loads(text.strip().splitlines()[-1])
        if own.get("failed"):
            return {"tool": kind, "label": label, "failed": own["failed"]}
        duration, tok_s, tokens = own["duration_s"], own["output_tokens_per_s"], own["output_tokens_total"]
        detail = "token_count_source=%s, completed=%d, failed=%d" % (own["token_count_source"],
                                                                     own["completed_requests"], own["failed_requests"])
        retokenized = None
        ttft, itl = own["ttft_ms"]["p50"], own["itl_ms"]["p50"]
    else:
        own = json.loads(output_file.read_text().strip().splitlines()[-1])
        duration, tok_s, tokens = own["duration"], own["output_throughput"], own["total_output_tokens"]
        retokenized = own["total_output_tokens_retokenized"]
        detail = "completed=%d, retokenized=%d" % (own["completed"], retokenized)
        ttft, itl = own["median_ttft_ms"], own["median_itl_ms"]
    requests = measured(server.stats(), args.num_prompts)
    start = requests[0]["arrived"]
    end = start + duration
    client_cpu = watch.at(end, 0) - watch.at(start, 0)
    server_cpu = watch.at(end, 1) - watch.at(start, 1)
    server_tokens = sum(r["tokens"] for r in requests)
    firsts = [1000 * (r["first_token"] - r["arrived"]) for r in requests if r.get("first_token")]
    server_ttft = statistics.median(firsts) if firsts else float("nan")
    return {"tool": kind, "label": label, "duration_s": duration, "tok_s": tok_s, "tokens": tokens,
            "retokenized": retokenized, "server_tokens": server_tokens, "server_tok_s": server_tokens / duration,
            "client_cpu_s": client_cpu, "client_core": client_cpu / duration, "server_core": server_cpu / duration,
            "tok_per_cpu_s": server_tokens / client_cpu if client_cpu > 0 else float("nan"),
            "ttft_p50_ms": ttft, "itl_p50_ms": itl,
            "server_ttft_p50_ms": server_ttft, "detail": detail}


def print_rows(rows):
    columns = ("tool", "run", "tok/s own", "tok/s srv", "tokens own", "retok.", "tokens srv", "dur s",
               "client CPU s", "tok per client CPU s", "client core", "server core", "TTFT p50 ms", "srv TTFT p50 ms",
               "ITL p50 ms")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        if row.get("failed"):
            print("| %s | %s | FAILED: %s |" % (row["tool"], row["label"], row["failed"]))
            continue
        print("| %s | %s | %.1f | %.1f | %d | %s | %d | %.3f | %.3f | %.0f | %.2f | %.2f | %.2f | %.2f | %.3f |" % (
            row["tool"], row["label"], row["tok_s"], row["server_tok_s"], row["tokens"],
            "-" if row["retokenized"] is None else row["retokenized"], row["server_tokens"], row["duration_s"],
            row["client_cpu_s"], row["tok_per_cpu_s"], row["client_core"], row["server_core"], row["ttft_p50_ms"],
            row["server_ttft_p50_ms"], row["itl_p50_ms"]))


def setup():
    python = BENCH_VENV / "bin" / "python"
    steps = [[sys.executable, "-m", "venv", str(BENCH_VENV)],
             [str(python), "-m", "pip", "install", "--no-deps", "sglang==%s" % SGLANG_VERSION],
             [str(python), "-m", "pip", "install", "-r", str(REPO / "benchmarks" / "requirements.txt")]]
    for step in steps:
        print("+ " + " ".join(step), flush=True)
        subprocess.run(step, check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--setup", action="store_true", help="create the bench_serving venv, then stop")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--num-prompts", type=int, default=2048, help="measured requests per tool and round")
    parser.add_argument("--input-len", type=int, default=1024)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="unpaced rounds; the tools take turns, order alternating")
    parser.add_argument("--client-timeout", type=float, default=60.0)
    parser.add_argument("--skip-paced", action="store_true", help="leave out the run paced at the deployment's rate")
    parser.add_argument("--keep-workdir", action="store_true", help="keep the clients' logs (kept anyway on a failure)")
    # Internal modes: the server and the serving_benchmark client run as their own pinned processes.
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--step-s", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--lifetime-s", type=float, default=300.0, help=argparse.SUPPRESS)
    parser.add_argument("--client-serving-benchmark", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--make-assets", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.serve:
        return serve(args.step_s, args.lifetime_s)
    if args.client_serving_benchmark:
        return client_serving_benchmark(args)
    if args.make_assets:
        return make_assets(args.make_assets)
    if args.setup:
        return setup()

    if len(os.sched_getaffinity(0)) < 2 or not {SERVER_CORE, CLIENT_CORE} <= os.sched_getaffinity(0):
        raise SystemExit("needs cores %d and %d: the server and the client each get one" % (SERVER_CORE, CLIENT_CORE))
    bench_python = BENCH_VENV / "bin" / "python"
    if not bench_python.exists():
        raise SystemExit("no %s: run `python3 %s --setup` first" % (bench_python, __file__))
    # The orchestrator sleeps in wait() and samples /proc every 10 ms; it shares the server's core, not the client's.
    os.sched_setaffinity(0, {SERVER_CORE})
    began = time.perf_counter()
    load_before = os.getloadavg()[0]
    workdir = Path(tempfile.mkdtemp(prefix="serving-benchmark-throughput-"))
    made = subprocess.run([str(bench_python), __file__, "--make-assets", str(workdir)], stdout=subprocess.PIPE,
                          text=True, env=local_env(), timeout=120, check=True)
    assets = json.loads(made.stdout.strip().splitlines()[-1])
    version = subprocess.run([str(bench_python), "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
                             stdout=subprocess.PIPE, text=True, check=True).stdout.strip()

    print("serving_benchmark (module_utils run_benchmark) vs python -m sglang.bench_serving %s --backend sglang-oai"
          % version)
    print("one load for both: concurrency %d, %d measured requests of %d input / %d output tokens, %d warm-up"
          % (args.concurrency, args.num_prompts, args.input_len, args.output_len, args.warmup))
    print("stand-in server on core %d, clients on core %d" % (SERVER_CORE, CLIENT_CORE))
    print("columns: tok/s own, tokens own = the tool's own output figures (retok. = bench_serving's re-tokenized\n"
          "count); tok/s srv, tokens srv = tokens the server sent for the measured requests, over the tool's own\n"
          "duration; client CPU s = the client process's CPU time in that window, client/server core = CPU s per\n"
          "wall s; TTFT p50 = the tool's own median; srv TTFT p50 = request arrival to first token write, at the server\n")

    rows = []
    server = Server(0.0, lifetime_s=240)
    try:
        for number in range(1, args.rounds + 1):
            order = ("serving_benchmark", "bench_serving")
            for kind in order if number % 2 else order[::-1]:
                rows.append(run_client(kind, server, args, workdir, assets, "r%d" % number))
    finally:
        server.close()
    print("unpaced: the server sends as fast as its core allows; the client is the limit")
    print_rows(rows)

    medians, per_cpu = {}, {}
    for kind in ("serving_benchmark", "bench_serving"):
        done = [row for row in rows if row["tool"] == kind and not row.get("failed")]
        medians[kind] = statistics.median(row["tok_s"] for row in done) if done else None
        per_cpu[kind] = statistics.median(row["tok_per_cpu_s"] for row in done) if done else None
    print()
    for kind, value in medians.items():
        figure = "%.1f (%.0f per client CPU second)" % (value, per_cpu[kind]) if value else "no successful run"
        print("median output tok/s, %-17s: %s" % (kind, figure))
    if medians["serving_benchmark"] and medians["bench_serving"]:
        ratio = medians["serving_benchmark"] / medians["bench_serving"]
        print("ratio serving_benchmark / bench_serving: %.2f (per client CPU second: %.2f)"
              % (ratio, per_cpu["serving_benchmark"] / per_cpu["bench_serving"]))
        print("target >= %.0f tok/s: %s; no slower than bench_serving: %s"
              % (TARGET_TOK_S, "met" if medians["serving_benchmark"] >= TARGET_TOK_S else "MISSED",
                 "met" if ratio >= 1.0 else "MISSED"))
    starved = [row for row in rows if not row.get("failed") and row["client_core"] < 0.9]
    if starved:
        print("note: in %d of %d runs the client was on its core less than 0.9 of the time: the server or other\n"
              "processes on this machine held it back (load average now %.1f), so its tok/s understates what the\n"
              "client sustains; tok per client CPU second depends far less on that"
              % (len(starved), len(rows), os.getloadavg()[0]))

    paced = []
    if not args.skip_paced:
        step_s = args.concurrency / DEPLOYMENT_TOK_S
        paced_args = argparse.Namespace(**vars(args))
        paced_args.num_prompts = args.concurrency
        print("\npaced at the deployment's %.0f tok/s: one decode step every %.1f ms to each of %d streams, one wave"
              % (DEPLOYMENT_TOK_S, step_s * 1000, args.concurrency))
        server = Server(step_s, lifetime_s=120)
        try:
            for kind in ("serving_benchmark", "bench_serving"):
                paced.append(run_client(kind, server, paced_args, workdir, assets, "paced"))
        finally:
            server.close()
        print_rows(paced)
        for row in paced:
            if not row.get("failed"):
                print("%-17s used %.1f%% of its core at %.0f tok/s"
                      % (row["tool"], 100 * row["client_core"], row["server_tok_s"]))
    print("\ntotal %.1f s; load average %.1f at the start, %.1f at the end"
          % (time.perf_counter() - began, load_before, os.getloadavg()[0]))
    if args.keep_workdir or any(row.get("failed") for row in rows + paced):
        print("logs and bench_serving's result files are in %s" % workdir)
    else:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()

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

The stand-in server is serving_benchmark_throughput_server.py, the clients and their measurement
serving_benchmark_throughput_clients.py; this script runs them and prints the figures.

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
import base64
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from serving_benchmark_throughput_clients import (
    BENCH_VENV,
    CLIENT_CORE,
    REPO,
    Server,
    client_serving_benchmark,
    local_env,
    make_assets,
    run_client,
)
from serving_benchmark_throughput_server import SERVER_CORE, serve

SGLANG_VERSION = "0.5.9"
DEPLOYMENT_TOK_S = 3740.0
TARGET_TOK_S = 40000.0


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


_TRIM_STUBS = {
    "datasets": ('"""Stand-in for `datasets`: sglang.bench_serving imports load_dataset at the top and calls it'
                 ' only for datasets from the Hugging Face hub (MMMU and the like), never for `--dataset-name random'
                 ' --dataset-path FILE`."""\n\n\ndef load_dataset(*args, **kwargs):\n    raise NotImplementedError('
                 '"the trimmed bench_serving carries no datasets: the random dataset from a local file only")\n'),
    "pybase64": ('"""Stand-in for `pybase64`: sglang.bench_serving uses it only to encode images."""\n\n\n'
                 'def b64encode(*args, **kwargs):\n    raise NotImplementedError('
                 '"the trimmed bench_serving carries no pybase64: no image datasets")\n'),
}
_TRIM_PYTHON = """#!/bin/sh
# sglang.bench_serving %s (the wheel's file, verbatim, under an empty sglang/__init__.py) on this host's own
# aiohttp, numpy, requests, tqdm, Pillow and transformers; stubs for the two modules it imports and the random
# dataset never calls. Not the real venv: the host's versions of those packages, see `--trim-bench-serving`.
here=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$here:$here/stubs${PYTHONPATH:+:$PYTHONPATH}" exec "${SM120_TRIM_PYTHON:-python3}" "$@"
"""


def trim_bench_serving(directory):
    """A copy of bench_serving small enough to carry (136 KB, where the venv is 700 MB) to a host that has its
    third-party imports but not sglang: the wheel's sglang/bench_serving.py, checked against the wheel's RECORD,
    under an empty sglang/__init__.py (the real one imports the serving stack's utilities, IPython and
    pydantic, which bench_serving does not use), stubs for `datasets` and `pybase64`, and bin/python, which runs
    the host's python3 (or $SM120_TRIM_PYTHON) with them on the path. Point $SM120_BENCH_VENV at it."""
    site = next((BENCH_VENV / "lib").glob("python3*/site-packages"), None)
    if site is None or not (site / "sglang" / "bench_serving.py").exists():
        raise SystemExit("no sglang in %s: run `python3 %s --setup` first" % (BENCH_VENV, __file__))
    source = (site / "sglang" / "bench_serving.py").read_bytes()
    record = (site / ("sglang-%s.dist-info" % SGLANG_VERSION) / "RECORD").read_text()
    digest = base64.urlsafe_b64encode(hashlib.sha256(source).digest()).rstrip(b"=").decode()
    if "sglang/bench_serving.py,sha256=%s," % digest not in record:
        raise SystemExit("%s is not the file of the sglang %s wheel"
                         % (site / "sglang" / "bench_serving.py", SGLANG_VERSION))
    directory = Path(directory).resolve()
    for folder in ("sglang", "bin", "stubs/datasets", "stubs/pybase64"):
        (directory / folder).mkdir(parents=True, exist_ok=True)
    (directory / "sglang" / "bench_serving.py").write_bytes(source)
    (directory / "sglang" / "__init__.py").write_text("")
    for name, text in _TRIM_STUBS.items():
        (directory / "stubs" / name / "__init__.py").write_text(text)
    (directory / "bin" / "python").write_text(_TRIM_PYTHON % SGLANG_VERSION)
    (directory / "bin" / "python").chmod(0o755)
    print("SM120_BENCH_VENV=%s  # sglang/bench_serving.py sha256=%s (the wheel's RECORD)" % (directory, digest))


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
    parser.add_argument("--trim-bench-serving", metavar="DIR",
                        help="write a carryable copy of bench_serving to DIR (see trim_bench_serving), then stop")
    # Internal modes: the server and the serving_benchmark client run as their own pinned processes.
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--step-s", type=float, default=0.0, help=argparse.SUPPRESS)
    # serving_benchmark_accuracy.py's server: each stream on its own clock.
    parser.add_argument("--ttft-s", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--itl-s", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--lifetime-s", type=float, default=300.0, help=argparse.SUPPRESS)
    parser.add_argument("--client-serving-benchmark", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--make-assets", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.serve:
        return serve(args.step_s, args.lifetime_s, args.ttft_s, args.itl_s)
    if args.client_serving_benchmark:
        return client_serving_benchmark(args)
    if args.make_assets:
        return make_assets(args.make_assets)
    if args.setup:
        return setup()
    if args.trim_bench_serving:
        return trim_bench_serving(args.trim_bench_serving)

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

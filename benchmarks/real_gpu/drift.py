# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the drift comes from (issue 50, item 1): one server measured for minutes, the telemetry beside every run.

    python3 drift.py --url http://127.0.0.1:30000 --model llama-8b-random --tokenizer MODEL_DIR \\
        --inventory benchmarks/real_gpu/inventory --profile llama-8b-random --loads c256,c64 \\
        --schedule plain:240,flush:240,plain:120,clients:120 --label radix --out DIR

The schedule is segments of one server's life, in order, each ``kind:seconds``; within a segment the loads run in
turn (c256, c64, c256, ...) until its seconds are spent:

  plain    the smoke test's measurement (``run_benchmark``, its 4 warm-up requests), nothing between runs: the
           radix cache keeps every earlier run's prompts and evicts as it fills
  flush    the same with ``POST /flush_cache`` before every run (SGLang empties its radix cache; refused while
           requests run, so it is asked until it answers 200); the segments plain, flush, plain in that order tell a
           trend in time (all three fall) from the cache's state (plain falls, flush does not)
  clients  each load as one client process, then as two processes of half the concurrency and half the requests
           each, started at one instant: where the two sum to more than the one, the client, not the server, was
           the limit (every run here without warm-up, timed by the wall clock around the whole run, both arms alike)

``--label`` names the server start (e.g. ``radix``, ``noradix`` for a start with ``--disable-radix-cache``). Beside
the runs, two samplers write for the whole schedule:

  telemetry.jsonl  every second, nvidia-smi's SM and memory clock, power draw, enforced power limit, GPU and memory
                   temperature and the clock-event reasons (active mask, power cap, HW slowdown, HW/SW thermal,
                   power brake): what a drop in the rate can be laid against
  metrics.jsonl    every two seconds, SGLang's gauges and counters: token usage, running and queued requests,
                   retractions, evicted tokens and eviction time, cache hit rate, KV tokens used and evictable

and ``runs.jsonl`` a row per run: segment, load, wall-clock start and end, output tok/s, TTFT and ITL, the server's
counters over the run. ``benchmarks/drift_causes.py`` reads the three and says which cause the data supports.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark import BenchmarkPlan, run_benchmark
from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_power import PowerPlan
from compare_clients import loads_of, witness
from noise import counters

WARMUP = 4  # smoke_test_num_warmup
SEGMENTS = ("plain", "flush", "clients")
# nvidia-smi --query-gpu fields (the names of driver 580; the older clocks_throttle_reasons.* are aliases).
GPU_FIELDS = ("index", "clocks.current.sm", "clocks.current.memory", "power.draw", "enforced.power.limit",
              "temperature.gpu", "temperature.memory", "clocks_event_reasons.active",
              "clocks_event_reasons.sw_power_cap", "clocks_event_reasons.hw_slowdown",
              "clocks_event_reasons.hw_thermal_slowdown", "clocks_event_reasons.sw_thermal_slowdown",
              "clocks_event_reasons.hw_power_brake_slowdown", "utilization.gpu", "memory.used")
# SGLang 0.5.16's names (sglang/srt/observability/metrics_collector.py), summed over label sets.
SERVER_GAUGES = ("sglang:token_usage", "sglang:num_running_reqs", "sglang:num_queue_reqs",
                 "sglang:num_retracted_reqs", "sglang:num_retracted_requests_total", "sglang:evicted_tokens_total",
                 "sglang:eviction_duration_seconds_sum", "sglang:eviction_duration_seconds_count",
                 "sglang:cache_hit_rate", "sglang:kv_used_tokens", "sglang:kv_evictable_tokens",
                 "sglang:kv_available_tokens", "sglang:gen_throughput", "sglang:generation_tokens_total",
                 "sglang:cached_tokens_total", "sglang:prompt_tokens_total")


def schedule_of(text):
    """``plain:240,flush:120`` -> [("plain", 240.0), ("flush", 120.0)]; a kind or a duration that is not one, named."""
    segments = []
    for part in (piece.strip() for piece in text.split(",") if piece.strip()):
        kind, _colon, seconds = part.partition(":")
        if kind not in SEGMENTS:
            raise ValueError("--schedule names %r, not a segment: use %s" % (kind, ", ".join(SEGMENTS)))
        try:
            duration = float(seconds)
        except ValueError:
            raise ValueError("--schedule's %r wants kind:seconds, e.g. plain:240" % part) from None
        if duration <= 0:
            raise ValueError("--schedule's %r: the seconds must be more than 0" % part)
        segments.append((kind, duration))
    if not segments:
        raise ValueError("--schedule is empty: e.g. plain:240,flush:240,plain:120")
    return segments


def parse_gpu_line(line, at):
    """One line of ``nvidia-smi --query-gpu=GPU_FIELDS --format=csv,noheader,nounits`` as a row; None if it is not."""
    values = [value.strip() for value in line.split(",")]
    if len(values) != len(GPU_FIELDS):
        return None
    row = {"t": round(at, 3)}
    for name, value in zip(GPU_FIELDS, values):
        key = name.replace("clocks_event_reasons.", "reason_").replace(".", "_")
        if value.startswith("0x"):
            row[key] = int(value, 16)
        elif value in ("Active", "Not Active"):
            row[key] = value == "Active"
        else:
            try:
                row[key] = float(value)
            except ValueError:
                row[key] = None  # [N/A] (a field the card does not report, e.g. memory temperature on some)
    return row


class Sampler:
    """A thread writing a row every ``interval`` seconds to ``path`` until stopped."""

    def __init__(self, path, interval, sample):
        self.path, self.interval, self.sample = path, interval, sample
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        with open(self.path, "a") as out:
            while not self.stop.is_set():
                began = time.time()
                for row in self.sample(began):
                    out.write(json.dumps(row) + "\n")
                out.flush()
                self.stop.wait(max(self.interval - (time.time() - began), 0.05))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def gpu_sample(at):
    query = "--query-gpu=" + ",".join(GPU_FIELDS)
    try:
        done = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [{"t": round(at, 3), "error": str(exc)}]
    rows = [parse_gpu_line(line, at) for line in done.stdout.splitlines() if line.strip()]
    return [row for row in rows if row] or [{"t": round(at, 3), "error": (done.stderr or done.stdout)[-300:]}]


def server_sample(url):
    def sample(at):
        values = counters(url)
        row = {"t": round(at, 3)}
        row.update({name.split(":", 1)[1]: values[name] for name in SERVER_GAUGES if name in values})
        return [row]
    return sample


def flush(url, limit=120.0):
    """POST /flush_cache until SGLang answers 200 (it refuses while requests run); the seconds it took, or the
    status it kept answering (404: a server without the endpoint, e.g. a rehearsal's stand-in)."""
    began, status = time.time(), None
    while time.time() - began < limit:
        request = urllib.request.Request(url + "/flush_cache", data=b"", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError as exc:
            status = str(exc)
        if status == 200 or status == 404:
            break
        time.sleep(0.5)
    return {"status": status, "seconds": round(time.time() - began, 2)}


def plan_of(args, vocab_size, load, tag, share=1, warmup=WARMUP):
    return BenchmarkPlan(url=args.url, model=args.model, concurrency=max(load["concurrency"] // share, 1),
                         num_requests=max(load["num_requests"] // share, 1), num_warmup=warmup,
                         input_tokens=load["input_tokens"], output_tokens=load["output_tokens"], timeout=600,
                         run_tag=tag, vocab_size=vocab_size)


def measured(plan):
    """run_benchmark's figures, with the wall clock around the whole call."""
    began = time.time()
    result = run_benchmark(plan, PowerPlan(enabled=False))
    return began, time.time(), result


def one(args, vocab_size, loads):
    """``one``: a single run, started at ``--at`` (the clients segment's processes), its row printed as JSON."""
    load = dict(loads)[args.load]
    plan = plan_of(args, vocab_size, load, "%s-%d" % (args.tag, args.index), share=args.share, warmup=0)
    time.sleep(max(args.at - time.time(), 0))
    began, ended, result = measured(plan)
    print(json.dumps({"began": began, "ended": ended, "tokens": result["output_tokens_total"],
                      "failed": result["failed_requests"], "itl_ms": result["itl_ms"],
                      "ttft_ms": result["ttft_ms"]}))
    return 0


def processes(args, name, share, tag):
    """``share`` client processes of one load at one instant; the row of their sum over the union of their runs."""
    at = time.time() + 3.0  # each child imports the client first
    argv = [sys.executable, __file__, "one", "--url", args.url, "--model", args.model, "--tokenizer",
            str(args.tokenizer), "--inventory", str(args.inventory), "--profile", args.profile, "--loads", name, "--load", name,
            "--share", str(share), "--at", repr(at), "--tag", tag]
    children = [subprocess.Popen(argv + ["--index", str(index)], stdout=subprocess.PIPE, text=True)
                for index in range(share)]
    rows = []
    for child in children:
        out, _err = child.communicate(timeout=900)
        if child.returncode != 0:
            raise RuntimeError("a client process of %s exited with %d" % (name, child.returncode))
        rows.append(json.loads(out.strip().splitlines()[-1]))
    began, ended = min(row["began"] for row in rows), max(row["ended"] for row in rows)
    tokens = sum(row["tokens"] for row in rows)
    return {"began": began, "ended": ended, "output_tokens_per_s": round(tokens / (ended - began), 1),
            "output_tokens_total": tokens, "failed": sum(row["failed"] for row in rows),
            "duration_s": round(ended - began, 3), "processes": share,
            "itl_ms": rows[0]["itl_ms"], "ttft_ms": rows[0]["ttft_ms"]}


def record(args, vocab_size, loads):
    schedule = schedule_of(args.schedule)
    args.out.mkdir(parents=True, exist_ok=True)
    telemetry = Sampler(args.out / "telemetry.jsonl", 1.0, gpu_sample)
    server = Sampler(args.out / "metrics.jsonl", 2.0, server_sample(args.url))
    number = 0
    with telemetry, server, open(args.out / "runs.jsonl", "a") as out:
        for segment_index, (kind, seconds) in enumerate(schedule):
            ends = time.time() + seconds
            turn = 0
            while time.time() < ends:
                name, load = loads[turn % len(loads)]
                shares = (1, 2) if kind == "clients" else (1,)
                for share in shares:
                    tag = "drift-%s-%d-%s-%d" % (args.label, number, name, int(time.time()))
                    row = {"label": args.label, "segment": segment_index, "kind": kind, "number": number,
                           "load": name, "concurrency": load["concurrency"]}
                    if kind == "flush":
                        row["flush"] = flush(args.url)
                    before = counters(args.url)
                    if kind == "clients":
                        row.update(processes(args, name, share, tag))
                    else:
                        began, ended, result = measured(plan_of(args, vocab_size, load, tag))
                        row.update({"began": began, "ended": ended, "processes": 1,
                                    "output_tokens_per_s": result["output_tokens_per_s"],
                                    "output_tokens_total": result["output_tokens_total"],
                                    "failed": result["failed_requests"], "duration_s": result["duration_s"],
                                    "itl_ms": result["itl_ms"], "ttft_ms": result["ttft_ms"]})
                    row["server"] = witness(before, counters(args.url))
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print("%s %-7s #%-3d %-5s x%d %9.1f out tok/s in %6.2f s" % (
                        args.label, kind, number, name, row["processes"], row["output_tokens_per_s"],
                        row["duration_s"]), flush=True)
                    number += 1
                turn += 1
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="record", choices=("record", "one"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", type=Path, required=True, help="the model's folder (its config.json's vocab)")
    parser.add_argument("--inventory", type=Path, required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--loads", default="c256,c64", help="comma-separated load names, run in this order")
    parser.add_argument("--schedule", default="plain:240,flush:240,plain:120,clients:120")
    parser.add_argument("--label", default="radix", help="which server start the runs are of")
    parser.add_argument("--out", type=Path)
    # mode one (a client process of the clients segment)
    parser.add_argument("--load")
    parser.add_argument("--share", type=int, default=1)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--at", type=float, default=0.0)
    parser.add_argument("--tag", default="drift")
    args = parser.parse_args(argv)
    vocab_size = json.loads((args.tokenizer / "config.json").read_text())["vocab_size"]
    known = dict(loads_of(args.inventory, args.profile))
    names = [name for name in args.loads.split(",") if name]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        parser.error("--loads %s: the profile %s has %s" % (args.loads, args.profile, ", ".join(known)))
    loads = [(name, known[name]) for name in names]
    if args.mode == "one":
        return one(args, vocab_size, loads)
    if args.out is None:
        parser.error("--out is needed to record")
    try:
        schedule_of(args.schedule)
    except ValueError as exc:
        parser.error(str(exc))
    return record(args, vocab_size, loads)


if __name__ == "__main__":
    sys.exit(main())

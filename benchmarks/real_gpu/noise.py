# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A/A on a real SGLang server: the smoke test's own measurement of one configuration, repeated, raw timings kept.

    python3 noise.py --url http://127.0.0.1:30000 --model llama-8b-random --tokenizer MODEL_DIR \\
        --inventory benchmarks/real_gpu/inventory --profile llama-8b-random --rounds 4 --start 1 --out noise.jsonl

Every round measures each load of the profile once (the loads as the inventory defines them, each run with the
smoke test's 4 warm-up requests), the order of the loads turned by one each round so that no load always runs
first or after the same one. Each run is what the smoke test sends (``run_benchmark`` of
plugins/module_utils/serving_benchmark.py, the very code); besides its figures each row keeps what any other way
of counting needs, so that candidates are compared on the same runs (benchmarks/noise_floor.py):

  tokens_by_100ms  output tokens by 100 ms from the run's start (a chunk's tokens at its arrival time)
  requests         each request's start, first token and end (ms from the run's start) and its output tokens
  server           the server's own counters over the run (/metrics, --enable-metrics): generation tokens, ...
  power            the GPUs' power, SM clock and throttle reasons over the run, as the smoke test samples them

``--start`` labels the server start the rows belong to (the harness restarts the server between two calls).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark import BenchmarkPlan, run_benchmark
from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_power import PowerPlan
from compare_clients import loads_of, metrics, witness


def counters(url):
    """The server's counters, or none where it has no /metrics (a rehearsal's stand-in)."""
    try:
        return metrics(url)
    except (OSError, ValueError):
        return {}


WARMUP = 4  # smoke_test_num_warmup
BIN_S = 0.1


def timings(drive):
    """The run's raw timings: tokens by 100 ms bin and each completed request's (start, first token, end, tokens)."""
    origin = drive.started
    bins, requests = [], []
    for outcome in drive.outcomes:
        if outcome is None or not outcome.ok:
            continue
        times = outcome.token_times or []
        tokens = outcome.completion_tokens if outcome.completion_tokens is not None else len(times)
        requests.append([round((outcome.started - origin) * 1000, 1),
                         round(((outcome.first_token or outcome.finished) - origin) * 1000, 1),
                         round((outcome.finished - origin) * 1000, 1), tokens])
        if not times:
            continue
        share = tokens / len(times)
        for at in times:
            index = int((at - origin) / BIN_S)
            if index >= len(bins):
                bins.extend([0.0] * (index + 1 - len(bins)))
            bins[index] += share
    return {"tokens_by_100ms": [round(value, 2) for value in bins], "requests": requests}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", type=Path, required=True, help="the model's folder (its config.json's vocab)")
    parser.add_argument("--inventory", type=Path, required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--start", type=int, default=1,
                        help="which server start these runs are of (the harness: the unit's start time)")
    parser.add_argument("--loads", default="", help="comma-separated load names (all of the profile's if empty)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    vocab_size = json.loads((args.tokenizer / "config.json").read_text())["vocab_size"]
    loads = [(name, load) for name, load in loads_of(args.inventory, args.profile)
             if not args.loads or name in args.loads.split(",")]
    if not loads:
        parser.error("--loads %s names no load of the profile %s" % (args.loads, args.profile))
    with open(args.out, "a") as out:
        for number in range(args.rounds):
            turned = loads[number % len(loads):] + loads[:number % len(loads)]
            for position, (name, load) in enumerate(turned):
                tag = "noise-s%d-r%d-%s-%d" % (args.start, number, name, int(time.time()))
                plan = BenchmarkPlan(url=args.url, model=args.model, concurrency=load["concurrency"],
                                     num_requests=load["num_requests"], num_warmup=WARMUP,
                                     input_tokens=load["input_tokens"], output_tokens=load["output_tokens"],
                                     timeout=600, run_tag=tag, vocab_size=vocab_size)
                kept = {}
                before = counters(args.url)
                began = time.time()
                # The GPUs' power, SM clock and throttle reasons as the smoke test samples them: the first H100 run
                # drifted 20 % at c256 over 20 minutes while the smoke test saw the card power-capped.
                result = run_benchmark(plan, PowerPlan(enabled=True, interval=0.5),
                                       on_drive=lambda drive: kept.update(timings(drive)))
                ended = time.time()
                server = witness(before, counters(args.url))
                row = {"start": args.start, "round": number, "position": position, "load": name,
                       "concurrency": load["concurrency"], "num_requests": load["num_requests"], "began": began,
                       "ended": ended, "output_tokens_per_s": result["output_tokens_per_s"],
                       "duration_s": result["duration_s"], "output_tokens_total": result["output_tokens_total"],
                       "failed": result["failed_requests"], "ttft_ms": result["ttft_ms"], "itl_ms": result["itl_ms"],
                       "server": server, "power": result["power"]}
                row.update(kept)
                out.write(json.dumps(row) + "\n")
                out.flush()
                print("start %d round %d %-5s %9.1f out tok/s in %6.2f s (server counted %d tokens)" % (
                    args.start, number, name, result["output_tokens_per_s"], result["duration_s"],
                    server["generation_tokens"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

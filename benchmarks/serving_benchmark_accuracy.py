# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How close serving_benchmark's TTFT, ITL and output tok/s come to the truth at high concurrency, beside bench_serving.

The server is the stand-in of serving_benchmark_throughput_server.py with each stream on its own clock: its first
token TTFT after the request arrived (the kernel's receive time of its last bytes, however late the server's one
thread reads them), then one token every ITL, each write time recorded. So the truth is known
twice: analytically (TTFT, ITL, and concurrency x tokens per request / request time for output tok/s) and as the
server counted it (its write times, to the microsecond, which is what the error is taken against). At concurrency
64, 128 and 256 the script runs serving_benchmark's run_benchmark and `python -m sglang.bench_serving` against it,
one after the other, and prints each tool's TTFT and ITL (mean, p50, p99) and output tok/s next to the truth as
relative errors. Then each tool's ceiling: the server unpaced, so the client is the limit, and the ratio
serving_benchmark / bench_serving. Targets: every serving_benchmark figure within 2 % of the truth, and its ceiling
at least 2x bench_serving's, at every concurrency; the script exits 1 naming each target missed.

The server runs pinned to core 0 (and this script beside it, asleep); the clients run on every other core this
process may use, as the module runs on a host: not pinned to one core. Setup and the bench_serving venv are
serving_benchmark_throughput.py's (`--setup`, or `--trim-bench-serving` for a host without room for the venv);
`--skip-bench-serving` runs serving_benchmark alone (no ratio); `--breakdown` shows, request by request, where
serving_benchmark's time to first token goes.
    .venv/bin/python benchmarks/serving_benchmark_accuracy.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from serving_benchmark_throughput_clients import BENCH_VENV, Server, import_module_utils, local_env, run_client
from serving_benchmark_throughput_server import SERVER_CORE

TOLERANCE = 0.02
CEILING_RATIO = 2.0
TOOLS = ("serving_benchmark", "bench_serving")
# (label, key in serving_benchmark's result, its statistic, key in bench_serving's result)
FIGURES = (
    ("TTFT mean ms", "ttft_ms", "mean", "mean_ttft_ms"),
    ("TTFT p50 ms", "ttft_ms", "p50", "median_ttft_ms"),
    ("TTFT p99 ms", "ttft_ms", "p99", "p99_ttft_ms"),
    ("ITL mean ms", "itl_ms", "mean", "mean_itl_ms"),
    ("ITL p50 ms", "itl_ms", "p50", "median_itl_ms"),
    ("ITL p99 ms", "itl_ms", "p99", "p99_itl_ms"),
    ("output tok/s", "output_tokens_per_s", None, "output_throughput"),
)


def percentile(ordered, q):
    """numpy's default (linear) percentile of sorted values, as both tools compute theirs."""
    position = (len(ordered) - 1) * q / 100.0
    lower = int(math.floor(position))
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def truth_of(requests):
    """The figures as the server's write times give them, for the measured requests."""
    ttft = sorted(1000 * (r["times"][0] - r["arrived"]) for r in requests)
    itl = sorted(1000 * (b - a) for r in requests for a, b in zip(r["times"], r["times"][1:]))
    window = max(r["times"][-1] for r in requests) - min(r["arrived"] for r in requests)
    figures = {"output tok/s": sum(len(r["times"]) for r in requests) / window}
    for name, values in (("TTFT", ttft), ("ITL", itl)):
        figures[name + " mean ms"] = sum(values) / len(values)
        figures[name + " p50 ms"] = percentile(values, 50)
        figures[name + " p99 ms"] = percentile(values, 99)
    return figures


def analytic(args, concurrency):
    """What the schedule promises, with no time at all between one request's end and the next one's start."""
    request_s = args.ttft_s + (args.output_len - 1) * args.itl_s
    figures = {"output tok/s": concurrency * args.output_len / request_s}
    for stat in ("mean", "p50", "p99"):
        figures["TTFT %s ms" % stat] = 1000 * args.ttft_s
        figures["ITL %s ms" % stat] = 1000 * args.itl_s
    return figures


def reported(kind, own):
    """The tool's own figures, under the labels of FIGURES."""
    figures = {}
    for label, key, stat, bench_key in FIGURES:
        if kind == "serving_benchmark":
            figures[label] = own[key][stat] if stat else own[key]
        else:
            figures[label] = own[bench_key]
    return figures


def client_args(args, concurrency, prompts, input_len, output_len):
    return argparse.Namespace(concurrency=concurrency, num_prompts=prompts, input_len=input_len, output_len=output_len,
                              warmup=args.warmup, client_timeout=args.client_timeout)


def assets_for(workdir):
    bench_python = BENCH_VENV / "bin" / "python"
    made = subprocess.run([str(bench_python), str(Path(__file__).with_name("serving_benchmark_throughput.py")),
                           "--make-assets", str(workdir)], stdout=subprocess.PIPE, text=True, env=local_env(),
                          timeout=120, check=True)
    return json.loads(made.stdout.strip().splitlines()[-1])


def error(value, truth):
    return (value - truth) / truth


def accuracy_runs(args, tools, workdir, assets, cores, missed):
    """Each concurrency against the scheduled server; prints one table, returns nothing but what was missed."""
    print("| concurrency | figure | analytic | truth (server) | %s |" % " | ".join(
        "%s | error" % kind for kind in tools))
    print("|" + "---|" * (4 + 2 * len(tools)))
    server = Server(0.0, lifetime_s=600, ttft_s=args.ttft_s, itl_s=args.itl_s)
    try:
        for concurrency in args.concurrency:
            load = client_args(args, concurrency, args.waves * concurrency, args.input_len, args.output_len)
            rows = {kind: run_client(kind, server, load, workdir, assets, "accuracy-c%d" % concurrency, cores)
                    for kind in tools}
            if rows["serving_benchmark"].get("failed"):
                missed.append("serving_benchmark failed at concurrency %d: %s"
                              % (concurrency, rows["serving_benchmark"]["failed"]))
                continue
            truth = truth_of(rows["serving_benchmark"]["requests"])
            promised = analytic(args, concurrency)
            own = {kind: None if row.get("failed") else reported(kind, row["own"]) for kind, row in rows.items()}
            truths = {kind: truth if kind == "serving_benchmark" or own[kind] is None else truth_of(row["requests"])
                      for kind, row in rows.items()}
            for label, dummy, dummy2, dummy3 in FIGURES:
                cells = []
                for kind in tools:
                    if own[kind] is None:
                        cells.append("FAILED | -")
                        continue
                    err = error(own[kind][label], truths[kind][label])
                    cells.append("%.2f | %+.2f %%" % (own[kind][label], 100 * err))
                    if kind == "serving_benchmark" and abs(err) > TOLERANCE:
                        missed.append("serving_benchmark %s at concurrency %d: %.2f against %.2f, %+.2f %% (> %.0f %%)"
                                      % (label, concurrency, own[kind][label], truth[label], 100 * err,
                                         100 * TOLERANCE))
                row = (concurrency, label, promised[label], truth[label], " | ".join(cells))
                print("| %d | %s | %.2f | %.2f | %s |" % row)
            waits = sorted(1000 * (r["seen"] - r["arrived"]) for r in rows["serving_benchmark"]["requests"])
            print("note: the server read the requests %.2f ms (p50), %.2f ms (p99), %.2f ms (max) after they arrived;"
                  " it dates them by their arrival, the kernel's receive time" % (
                      percentile(waits, 50), percentile(waits, 99), waits[-1]))
            if not waits[-1]:
                print("note: no kernel receive times (SO_TIMESTAMPNS): requests dated by the server's select(),"
                      " which misses the time they waited for it")
            late = error(truth["ITL mean ms"], promised["ITL mean ms"])
            if abs(late) > 0.01:
                print("note: the server's ITL missed its schedule by %+.2f %% at concurrency %d: it, not the"
                      " client, is slow" % (100 * late, concurrency))
            for kind in tools:
                if own[kind] is None:
                    missed.append("%s failed at concurrency %d: %s" % (kind, concurrency, rows[kind]["failed"][:500]))
                else:
                    print("note: %s at concurrency %d: client %.2f cores, server %.2f cores"
                          % (kind, concurrency, rows[kind]["client_core"], rows[kind]["server_core"]))
    finally:
        server.close()


def ceiling_runs(args, tools, workdir, assets, cores, missed):
    """Each tool against the unpaced server: the client is the limit."""
    print("| concurrency | %s | ratio |" % " | ".join("%s tok/s | client cores | server core" % kind
                                                      for kind in tools))
    print("|" + "---|" * (2 + 3 * len(tools)))
    server = Server(0.0, lifetime_s=600)
    try:
        for concurrency in args.ceiling_concurrency:
            load = client_args(args, concurrency, args.ceiling_prompts, args.input_len, args.ceiling_output_len)
            rows = {kind: run_client(kind, server, load, workdir, assets, "ceiling-c%d" % concurrency, cores)
                    for kind in tools}
            cells, speeds = [], {}
            for kind in tools:
                row = rows[kind]
                if row.get("failed"):
                    cells.append("FAILED | - | -")
                    missed.append("%s failed its ceiling run at concurrency %d: %s"
                                  % (kind, concurrency, row["failed"][:500]))
                    continue
                speeds[kind] = row["tok_s"]
                cells.append("%.0f | %.2f | %.2f" % (row["tok_s"], row["client_core"], row["server_core"]))
            ratio = None
            if len(speeds) == 2:
                ratio = speeds["serving_benchmark"] / speeds["bench_serving"]
                if ratio < CEILING_RATIO:
                    missed.append("ceiling ratio serving_benchmark / bench_serving at concurrency %d: %.2f (< %.1f)"
                                  % (concurrency, ratio, CEILING_RATIO))
            print("| %d | %s | %s |" % (concurrency, " | ".join(cells), "-" if ratio is None else "%.2f" % ratio))
    finally:
        server.close()


def timings_client(url, concurrency, count, out):
    """serving_benchmark's request driver as run_benchmark drives it (one warm-up request first), every request's
    times written to ``out``: its start, when its last bytes were sent and when each token was read."""
    sb, dummy = import_module_utils()
    from ansible_collections.sm120.sglang.plugins.module_utils import serving_benchmark_requests as requests
    sent = {}
    send = requests._Stream._send

    def timed_send(stream):
        send(stream)
        if not stream.unsent:
            sent.setdefault(stream.index, time.perf_counter())

    requests._Stream._send = timed_send
    plan = sb.BenchmarkPlan(url=url, model="fast-stub", concurrency=concurrency, num_requests=count, num_warmup=1,
                            input_tokens=1024, output_tokens=128, timeout=60)
    target = requests.parse_target(plan.url, plan.endpoint)
    headers = requests.request_headers(None)
    deadline = time.perf_counter() + plan.timeout
    requests.drive_requests(target, sb._request_bodies(plan, "warm", 0), 1, 1, headers, deadline)
    sent.clear()
    drive = requests.drive_requests(target, sb._request_bodies(plan, "timed", 0), count, concurrency, headers,
                                    deadline)
    with open(out, "w") as answer:
        json.dump([{"started": o.started, "sent": sent.get(i), "tokens": o.token_times}
                   for i, o in enumerate(drive.outcomes)], answer)


def breakdown_runs(args, cores):
    """Where each request's time goes, on the one monotonic clock client and server share: client start to the
    request's arrival at the server, arrival to the server reading it, and each token's write to its read."""
    print("| concurrency | wave | client start -> arrival ms, p50 / p99 | arrival -> server read ms, p50 / p99 / max |"
          " write -> client read ms, every token, p50 / p99 / max | TTFT error ms, mean / p99 |")
    print("|---|---|---|---|---|---|")
    server = Server(0.0, lifetime_s=600, ttft_s=args.ttft_s, itl_s=args.itl_s)
    try:
        for concurrency in args.concurrency:
            server.stats()
            handle, out = tempfile.mkstemp(prefix="serving-benchmark-timings-", suffix=".json")
            os.close(handle)
            subprocess.run([sys.executable, __file__, "--timings-client", server.url, str(concurrency),
                            str(args.waves * concurrency), out], check=True, env=local_env(), timeout=120,
                           preexec_fn=lambda: os.sched_setaffinity(0, cores))
            with open(out) as timings:
                client = json.load(timings)
            os.unlink(out)
            seen = {r["tag"]: r for r in server.stats() if (r.get("tag") or "").startswith("timed-")}
            for wave in range(args.waves):
                pairs = [(c, seen["timed-%d" % i]) for i, c in enumerate(client) if i // concurrency == wave]
                ms = [sorted(1000 * v for v in values) for values in (
                    [s["arrived"] - c["started"] for c, s in pairs],
                    [s["seen"] - s["arrived"] for c, s in pairs],
                    [read - wrote for c, s in pairs for read, wrote in zip(c["tokens"], s["times"])],
                    [(c["tokens"][0] - c["started"]) - (s["times"][0] - s["arrived"]) for c, s in pairs])]
                print("| %d | %d | %.3f / %.3f | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f | %.3f / %.3f |" % (
                    concurrency, wave + 1, percentile(ms[0], 50), percentile(ms[0], 99),
                    percentile(ms[1], 50), percentile(ms[1], 99), ms[1][-1],
                    percentile(ms[2], 50), percentile(ms[2], 99), ms[2][-1], sum(ms[3]) / len(ms[3]),
                    percentile(ms[3], 99)))
    finally:
        server.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--ttft-s", type=float, default=0.1, help="the server's time to first token per stream")
    parser.add_argument("--itl-s", type=float, default=0.02, help="the server's time between tokens per stream")
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--input-len", type=int, default=1024)
    parser.add_argument("--waves", type=int, default=2, help="measured requests per tool: waves x concurrency")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--ceiling-concurrency", type=int, nargs="*", default=[64, 128, 256])
    parser.add_argument("--ceiling-prompts", type=int, default=2048)
    parser.add_argument("--ceiling-output-len", type=int, default=256)
    parser.add_argument("--client-timeout", type=float, default=120.0)
    parser.add_argument("--skip-bench-serving", action="store_true",
                        help="serving_benchmark alone (where the bench_serving venv is not at hand): no ratio")
    parser.add_argument("--keep-workdir", action="store_true")
    parser.add_argument("--breakdown", action="store_true",
                        help="instead: where serving_benchmark's time to first token goes, request by request")
    parser.add_argument("--timings-client", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.timings_client:
        url, concurrency, count, out = args.timings_client
        return timings_client(url, int(concurrency), int(count), out)

    allowed = os.sched_getaffinity(0)
    cores = allowed - {SERVER_CORE}
    if SERVER_CORE not in allowed or not cores:
        raise SystemExit("needs core %d for the server and at least one more for the clients" % SERVER_CORE)
    tools = TOOLS[:1] if args.skip_bench_serving else TOOLS
    if not args.skip_bench_serving and not (BENCH_VENV / "bin" / "python").exists():
        raise SystemExit("no %s: run `python3 benchmarks/serving_benchmark_throughput.py --setup` first, or pass "
                         "--skip-bench-serving" % (BENCH_VENV / "bin" / "python"))
    os.sched_setaffinity(0, {SERVER_CORE})
    if args.breakdown:
        return breakdown_runs(args, cores)
    began = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="serving-benchmark-accuracy-"))
    assets = None if args.skip_bench_serving else assets_for(workdir)
    print("serving_benchmark's accuracy against a server of known timing, %s" % (
        "alone" if args.skip_bench_serving else "next to python -m sglang.bench_serving"))
    print("machine: %s, %d cores (%s), Python %s; server on core %d, clients on cores %s; load average %.1f"
          % (platform.node(), os.cpu_count(), platform.processor() or platform.machine(), platform.python_version(),
             SERVER_CORE, ",".join(str(c) for c in sorted(cores)), os.getloadavg()[0]))
    print("each stream: first token %.0f ms after its request arrived, then one every %.1f ms; %d output tokens of"
          " %d input, %d waves of requests per concurrency, %d warm-up"
          % (1000 * args.ttft_s, 1000 * args.itl_s, args.output_len, args.input_len, args.waves, args.warmup))
    print("truth (server) = the server's own write times; error = (reported - truth) / truth\n")
    missed = []
    accuracy_runs(args, tools, workdir, assets, cores, missed)
    if args.ceiling_concurrency:
        print("\nceilings: the server unpaced, the client the limit; %d requests of %d input / %d output tokens"
              % (args.ceiling_prompts, args.input_len, args.ceiling_output_len))
        ceiling_runs(args, tools, workdir, assets, cores, missed)
    print("\ntotal %.0f s; load average %.1f at the end" % (time.perf_counter() - began, os.getloadavg()[0]))
    if args.keep_workdir or missed:
        print("logs are in %s" % workdir)
    else:
        shutil.rmtree(workdir)
    if missed:
        print("\nMISSED:\n- " + "\n- ".join(missed))
        return 1
    print("\nevery target met: serving_benchmark within %.0f %% of the truth%s"
          % (100 * TOLERANCE, "" if args.skip_bench_serving else
             ", its ceiling at least %.0fx bench_serving's" % CEILING_RATIO))
    return 0


if __name__ == "__main__":
    sys.exit(main())

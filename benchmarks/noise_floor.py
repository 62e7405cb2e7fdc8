# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The noise of the smoke test's measurement on a real server, where it comes from, and what the verdict can see.

Reads the A/A runs of the real-GPU harness's noise phase (benchmarks/real_gpu/noise.py: rounds of every load of one
configuration, a restart, as many rounds again; each run's output tokens by 100 ms and every request's times) and
counts each run three ways, on the very same runs:

  whole    output tokens / (last request's end - run's start): what the smoke test reports and decides on
  steady   output tokens counted only while the load's concurrency was streaming: from the first moment every one
           of its requests had its first token to the last such moment (the first wave's prefill and the drain
           left out), from the requests' own times
  server   the server's own generation-token counter (/metrics) over the client's run, divided by its wall time

For each way and load it prints the spread within a start (coefficient of variation, and (max - min) / median as
compare_load uses it), the change between the two starts' medians, and the first run of each start against the
rest. Then the band rule of plugins/plugin_utils/experiment_compare.py (compare_load, the very function) on pairs of k
runs (A/A: any verdict is false; within a start and across starts) and its power to see a known change (the
candidate's runs scaled by x0.90, x0.95, x1.05, x1.10), with the smallest change it calls at that k.

    python3 benchmarks/noise_floor.py docs/evidence/real-gpu-noise/noise.jsonl            # k 2
    python3 benchmarks/noise_floor.py docs/evidence/real-gpu-noise/noise.jsonl --k 3
    python3 benchmarks/noise_floor.py docs/evidence/real-gpu-noise/noise.jsonl --k 3 --budget 180

The last section measures the rule with a run budget (smoke_test_run_budget_s) on runs drawn as the real ones were
(each start's mean, the load's run-to-run CV within a start): each side measured k times and then as many more as
its own noise asks for the 10 % goal, within the budget; within a start and across starts.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import random
import statistics
import sys
from pathlib import Path

# Beside this script (run as a script, its directory is on sys.path).
from h200_power_sampling import put_collection_on_path

put_collection_on_path(None)
from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments, noise_band  # noqa: E402  pylint: disable=wrong-import-position

WAYS = ("whole", "steady", "server")
EFFECTS = (0.90, 0.95, 1.05, 1.10)
BIN_S = 0.1


def steady_window(requests, concurrency):
    """(start, end) in s of the time every one of min(concurrency, requests) requests was streaming (between its
    first token and its end), from each request's [start ms, first token ms, end ms, tokens]; None where the count
    never reached it."""
    target = min(concurrency, len(requests))
    events = sorted([(first / 1000.0, 1) for _s, first, _e, _t in requests] +
                    [(end / 1000.0, -1) for _s, _f, end, _t in requests], key=lambda item: (item[0], item[1]))
    streaming, begin, last_end = 0, None, None
    for at, step in events:
        was = streaming
        streaming += step
        if streaming >= target and was < target and begin is None:
            begin = at
        if was >= target and streaming < target:
            last_end = at
    if begin is None or last_end is None or last_end <= begin:
        return None
    return begin, last_end


def tokens_between(bins, begin, end):
    """Output tokens of the 100 ms bins between ``begin`` and ``end`` s, the edge bins taken in part."""
    total = 0.0
    for index, tokens in enumerate(bins):
        low, high = index * BIN_S, (index + 1) * BIN_S
        overlap = min(high, end) - max(low, begin)
        if overlap > 0:
            total += tokens * overlap / BIN_S
    return total


def ways(row):
    """The run's output tok/s counted each way, and the share of its time the steady window left out."""
    found = {"whole": row["output_tokens_per_s"]}
    window = steady_window(row["requests"], row["concurrency"])
    if window:
        found["steady"] = tokens_between(row["tokens_by_100ms"], *window) / (window[1] - window[0])
        found["left_out"] = 1 - (window[1] - window[0]) / row["duration_s"]
    wall = row["ended"] - row["began"]
    if row.get("server", {}).get("generation_tokens"):
        # The counter also counts the 4 warm-up requests', whose time is in the wall time too.
        found["server"] = row["server"]["generation_tokens"] / wall
    return found


def band_verdict(base, cand, multiple):
    found = experiments.compare_load([{"output_tokens_per_s": v} for v in base],
                                     [{"output_tokens_per_s": v} for v in cand],
                                     {"tolerance": 0.03, "noise_multiple": multiple})
    return found["verdict"], found["band"]


def changes_seen(base, cand, settings):
    """The band rule (compare_load) on one comparison of runs as measured, then again with the candidate's runs
    scaled by each known change (EFFECTS): the first comparison's result, and the changes the rule saw (a gain called
    above 1, a regression below). Both band sections count through this, so that they judge alike."""
    found = experiments.compare_load(base, cand, settings)
    seen = []
    for effect in EFFECTS:
        scaled = [dict(r, output_tokens_per_s=r["output_tokens_per_s"] * effect) for r in cand]
        verdict = experiments.compare_load(base, scaled, settings)["verdict"]
        if verdict == (experiments.GAIN if effect > 1 else experiments.REGRESSION):
            seen.append(effect)
    return found, seen


def pairs(by_start, k):
    """Ordered pairs of k-run measurements of one load: (kind, baseline runs, candidate runs); within a start only
    disjoint subsets, across starts every subset of one against every subset of the other."""
    found = []
    starts = sorted(by_start)
    for start in starts:
        for left, right in itertools.permutations(itertools.combinations(range(len(by_start[start])), k), 2):
            if not set(left) & set(right):
                found.append(("within", [by_start[start][i] for i in left], [by_start[start][i] for i in right]))
    for first, second in itertools.permutations(starts, 2):
        for left in itertools.combinations(by_start[first], k):
            for right in itertools.combinations(by_start[second], k):
                found.append(("across", list(left), list(right)))
    return found


def measured(start, k, budget, settings, rng):
    """One configuration measured as the smoke test does with a run budget: k runs, then the runs its noise asks for
    within the budget (noise_band.runs_to_add, the function the role's filter calls). A run is drawn as the real
    ones of its start were: a normal of that start's mean and the load's pooled run-to-run CV within a start, at
    its mean length (a start's 2 to 5 real runs drawn with replacement repeat each other, and three equal draws read
    as no noise at all)."""
    def draw():
        return {"output_tokens_per_s": rng.gauss(start["mean"], start["mean"] * start["cv"]),
                "duration_s": start["seconds"]}

    runs = [draw() for _run in range(k)]
    pairs = [(run["output_tokens_per_s"], run["duration_s"]) for run in runs]
    added = noise_band.runs_to_add({"load": pairs}, settings["resolution"], settings["tolerance"],
                                   settings["noise_multiple"], budget)["load"]["add"]
    return runs + [draw() for _run in range(added)]


def budgeted(rows, loads, args):
    """The band rule with a run budget on runs drawn as the real ones were: each comparison's baseline from one start
    and its candidate from the same start (within) or another (across: the drift between starts included, as the
    experiments meet it, a candidate on a restarted server), k each and then the runs each side's own noise asks
    for. A/A: any verdict but no change is false; a known change: the candidate's runs scaled."""
    settings = {"tolerance": 0.03, "noise_multiple": args.noise_multiple, "resolution": 0.10}
    rng = random.Random(0)
    print("\n## With a run budget of %g s a load (smoke_test_run_budget_s), k = %d, goal 10 %%: %d comparisons a load "
          "and kind, runs drawn as the real ones were\n" % (args.budget, args.k, args.trials))
    print("Each run a normal of its start's real mean and the load's pooled CV within a start; each figure a share "
          "of %d draws (±%.0f %% at 95 %% for a share near 50 %%).\n" % (args.trials, 100 * 1.96 * 0.5 / math.sqrt(
              args.trials)))
    print("| load | kind | false verdicts (A/A) | not decided (A/A) | sees x0.90 / x0.95 / x1.05 / x1.10 | runs a side "
          "(mean, max) | seconds a side (mean) |")
    print("| --- | --- | ---: | ---: | --- | --- | ---: |")
    for load in loads:
        by_start = {}
        for row in rows:
            if row["load"] == load:
                by_start.setdefault(row["start"], []).append(row)
        cv = noise_band.pooled_cv(*[[r["output_tokens_per_s"] for r in runs] for runs in by_start.values()])[0]
        starts = [{"mean": statistics.mean(r["output_tokens_per_s"] for r in runs), "cv": cv,
                   "seconds": statistics.mean(r["duration_s"] for r in runs)} for _s, runs in sorted(by_start.items())]
        for kind in ("within", "across"):
            if kind == "across" and len(starts) < 2:
                continue
            false = undecided = 0
            seen = collections.Counter()
            sizes, seconds = [], []
            for _trial in range(args.trials):
                first = rng.randrange(len(starts))
                second = first if kind == "within" else rng.choice([s for s in range(len(starts)) if s != first])
                base = measured(starts[first], args.k, args.budget, settings, rng)
                cand = measured(starts[second], args.k, args.budget, settings, rng)
                sizes += [len(base), len(cand)]
                seconds += [sum(r["duration_s"] for r in base), sum(r["duration_s"] for r in cand)]
                found, changes = changes_seen(base, cand, settings)
                false += found["verdict"] != experiments.NEUTRAL
                undecided += not found["decided"]
                seen.update(changes)
            print("| %s | %s | %.1f %% | %.1f %% | %s | %.1f, %d | %.0f |" % (
                load, kind, 100 * false / args.trials, 100 * undecided / args.trials,
                " / ".join("%.0f %%" % (100 * seen[e] / args.trials) for e in EFFECTS),
                statistics.mean(sizes), max(sizes), statistics.mean(seconds)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("noise", type=Path, help="noise.jsonl of the harness's noise phase")
    parser.add_argument("--k", type=int, default=2, help="runs a measurement (the smoke test's repeats)")
    parser.add_argument("--noise-multiple", type=float, default=experiments.DEFAULTS["noise_multiple"],
                        help="the band's noise_multiple (experiments_noise_multiple)")
    parser.add_argument("--budget", type=float, default=180.0,
                        help="seconds of added runs a load (smoke_test_run_budget_s) for the resampled section")
    parser.add_argument("--trials", type=int, default=2000, help="resampled comparisons a load and kind")
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in args.noise.read_text().splitlines() if line.strip()]
    concurrency = {row["load"]: row["concurrency"] for row in rows}
    loads = sorted(concurrency, key=concurrency.get)
    table = {}
    print("## The spread of one configuration, per load and way of counting (%s, %d runs)\n" % (args.noise, len(rows)))
    print("| load | way | runs | median tok/s | CV within each start | (max-min)/median within each start | last start vs first "
          "| first run of a start vs the rest | left out of the run |")
    print("| --- | --- | ---: | ---: | --- | --- | ---: | ---: | ---: |")
    for load in loads:
        mine = sorted((r for r in rows if r["load"] == load), key=lambda r: r["began"])
        counted = [(r, ways(r)) for r in mine]
        for way in WAYS:
            by_start = {}
            for row, found in counted:
                if way in found:
                    by_start.setdefault(row["start"], []).append(found[way])
            if not by_start:
                continue
            table[(load, way)] = by_start
            starts = list(by_start)  # in the order the runs were made
            everything = [v for s in starts for v in by_start[s]]
            medians = [experiments.median(by_start[s]) for s in starts]
            drift = medians[-1] / medians[0] - 1 if len(medians) > 1 else 0.0
            first = [by_start[s][0] for s in starts]
            rest = [v for s in starts for v in by_start[s][1:]]
            first_vs_rest = statistics.mean(first) / statistics.mean(rest) - 1 if rest else 0.0
            left_out = [found["left_out"] for _r, found in counted if "left_out" in found]
            print("| %s | %s | %d | %.1f | %s | %s | %+.1f %% | %+.1f %% | %s |" % (
                load, way, len(everything), experiments.median(everything),
                " / ".join("%.1f %%" % (100 * noise_band.pooled_cv(by_start[s])[0]) for s in starts),
                " / ".join("%.1f %%" % (100 * experiments.spread(by_start[s])) for s in starts),
                100 * drift, 100 * first_vs_rest,
                "%.0f %%" % (100 * statistics.mean(left_out)) if way == "steady" and left_out else ""))
    print("\n## Where it comes from: the session's drift and the order of the loads (whole runs)\n")
    print("| load | change per 10 min of the session (least squares) | mean by position in the round, against the "
          "load's mean |")
    print("| --- | ---: | --- |")
    origin = min(row["began"] for row in rows)
    for load in loads:
        mine = [row for row in rows if row["load"] == load]
        times = [(row["began"] - origin) / 600.0 for row in mine]
        values = [row["output_tokens_per_s"] for row in mine]
        mean_t, mean_v = statistics.mean(times), statistics.mean(values)
        denominator = sum((t - mean_t) ** 2 for t in times)
        slope = sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values)) / denominator if denominator else 0.0
        positions = sorted({row["position"] for row in mine})
        print("| %s | %+.1f %% | %s |" % (load, 100 * slope / mean_v, ", ".join(
            "%d: %+.1f %%" % (position, 100 * (statistics.mean(
                [row["output_tokens_per_s"] for row in mine if row["position"] == position]) / mean_v - 1))
            for position in positions)))
    print("\n## The band rule (experiments.compare_load, tolerance 3 %%, noise_multiple %g) on measurements of %d runs\n"
          % (args.noise_multiple, args.k))
    print("| load | way | A/A pairs within / across starts | false verdicts within / across | median band | "
          + " | ".join("sees x%.2f" % e for e in EFFECTS) + " |")
    print("| --- | --- | --- | --- | ---: | " + " | ".join("---:" for _effect in EFFECTS) + " |")
    for (load, way), by_start in table.items():
        found = pairs(by_start, args.k)
        if not found:
            continue
        false = {"within": [0, 0], "across": [0, 0]}
        bands, seen = [], collections.Counter()
        settings = {"tolerance": 0.03, "noise_multiple": args.noise_multiple}
        for kind, base, cand in found:
            same, changes = changes_seen([{"output_tokens_per_s": v} for v in base],
                                         [{"output_tokens_per_s": v} for v in cand], settings)
            false[kind][1] += 1
            false[kind][0] += same["verdict"] != experiments.NEUTRAL
            bands.append(same["band"])
            seen.update(changes)
        print("| %s | %s | %d / %d | %s | ±%.1f %% | %s |" % (
            load, way, false["within"][1], false["across"][1],
            " / ".join("%d (%.0f %%)" % (bad, 100 * bad / total) if total else "-" for bad, total in false.values()),
            100 * experiments.median(bands),
            " | ".join("%.0f %%" % (100 * seen[e] / len(found)) for e in EFFECTS)))
    print("\n## An order that cancels drift: 2k runs in a row of one load, as baseline and candidate (whole runs)\n")
    print("Blocked: the first k runs the baseline, the next k the candidate (the experiments role's order: the "
          "baseline measured as deployed, each candidate after it). Interleaved: the runs taken in turn, "
          "baseline, candidate, baseline, ... (what measuring the baseline again after a candidate approaches).\n")
    print("| load | order | A/A windows | false verdicts | median change, A/A | sees x0.90 | sees x1.10 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for load in loads:
        values = [row["output_tokens_per_s"] for row in sorted((r for r in rows if r["load"] == load),
                                                               key=lambda r: r["began"])]
        for order in ("blocked", "interleaved"):
            false, seen_low, seen_high, changes, windows = 0, 0, 0, [], 0
            for first in range(0, len(values) - 2 * args.k + 1):
                window = values[first:first + 2 * args.k]
                base, cand = ((window[:args.k], window[args.k:]) if order == "blocked"
                              else (window[0::2], window[1::2]))
                windows += 1
                verdict, _band = band_verdict(base, cand, args.noise_multiple)
                false += verdict != experiments.NEUTRAL
                changes.append(abs(experiments.median(cand) / experiments.median(base) - 1))
                seen_low += band_verdict(base, [v * 0.9 for v in cand], args.noise_multiple)[0] == experiments.REGRESSION
                seen_high += band_verdict(base, [v * 1.1 for v in cand], args.noise_multiple)[0] == experiments.GAIN
            if windows:
                print("| %s | %s | %d | %d (%.0f %%) | %.1f %% | %.0f %% | %.0f %% |" % (
                    load, order, windows, false, 100 * false / windows, 100 * experiments.median(changes),
                    100 * seen_low / windows, 100 * seen_high / windows))
    budgeted(rows, loads, args)
    print("\nThe smallest change a measurement of k runs can tell apart from a pooled CV, at 5 % false verdicts and "
          "80 % power (two-sided, normal): 2.8 x CV x sqrt(2 / k).\n")
    print("| load | way | pooled CV | smallest change, k = 2 / 3 / 5 / 8 |")
    print("| --- | --- | ---: | --- |")
    for (load, way), by_start in table.items():
        pooled, df = noise_band.pooled_cv(*by_start.values())
        if df < 2:
            continue
        print("| %s | %s | %.1f %% | %s |" % (load, way, 100 * pooled, " / ".join(
            "±%.1f %%" % (100 * 2.8 * pooled * math.sqrt(2 / k)) for k in (2, 3, 5, 8))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

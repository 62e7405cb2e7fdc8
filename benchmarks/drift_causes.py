# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which cause a drift recording supports (issue 50, item 1): benchmarks/real_gpu/drift.py's runs, read side by side.

    python3 benchmarks/drift_causes.py docs/evidence/real-sglang-drift-h100-2026-12-07/drift

Prints, per load:

  segments     each segment's runs: count, mean output tok/s, CV, range, and the least-squares trend per 10 minutes
               of the server's age (a trend in time shows in every segment; the cache's state in plain runs only)
  flush        plain against flushed runs of the same server: means, CVs, and the flushed/plain ratio with its 95 %
               interval (Welch); the evictions each kind of run paid (the server's evicted tokens over the run)
  radix        the start without the radix cache against the plain runs with it
  clients      two client processes against one, each pair adjacent in time: the paired ratio
  telemetry    each run's mean SM clock, power, share of samples with the power cap's reason, GPU and memory
               temperature; the correlation of the rate with the clock across runs; a thermal or HW slowdown, named

then what the data supports: a trend or none (the trend's interval against 0), the cache (flushed runs steadier or
faster), the client (two processes faster), the power cap (the rate following the clock). Nothing here is timed:
it reads what drift.py wrote.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

# Student's t at 97.5 % by degrees of freedom (a 95 % two-sided interval); above 30, the normal's.
T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 12: 2.18,
        15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04}


def t975(df):
    if df <= 0:
        return float("inf")
    known = [key for key in sorted(T975) if key <= df]
    return T975[known[-1]] if df <= 30 else 1.96


def rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def cv(values):
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def trend(points):
    """Least squares of rate on age: (slope per 10 min as a share of the mean, its 95 % half-interval), or None."""
    if len(points) < 3:
        return None
    xs, ys = [point[0] for point in points], [point[1] for point in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in points) / (len(points) - 2)
    half = t975(len(points) - 2) * math.sqrt(residual / sxx)
    return slope * 600 / my, half * 600 / my


def ratio(numerator, denominator):
    """Mean ratio b/a of two independent samples and its 95 % interval (Welch, on the log scale)."""
    la, lb = [math.log(v) for v in denominator], [math.log(v) for v in numerator]
    diff = statistics.mean(lb) - statistics.mean(la)
    va = statistics.variance(la) / len(la) if len(la) > 1 else 0.0
    vb = statistics.variance(lb) / len(lb) if len(lb) > 1 else 0.0
    se = math.sqrt(va + vb)
    if se == 0:
        return math.exp(diff), math.exp(diff), math.exp(diff)
    parts = (va ** 2 / (len(la) - 1) if len(la) > 1 else 0) + (vb ** 2 / (len(lb) - 1) if len(lb) > 1 else 0)
    df = (va + vb) ** 2 / parts
    half = t975(int(df)) * se
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half)


def paired(pairs):
    """Mean of per-pair ratios b/a (log scale) and its 95 % t-interval over the pairs."""
    logs = [math.log(b / a) for a, b in pairs]
    mean = statistics.mean(logs)
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else float("inf")
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def window(samples, began, ended):
    return [sample for sample in samples if began <= sample["t"] <= ended and "error" not in sample]


def run_telemetry(run, telemetry):
    inside = window(telemetry, run["began"], run["ended"])
    if not inside:
        return {}

    def mean(key):
        values = [sample[key] for sample in inside if isinstance(sample.get(key), (int, float))]
        return statistics.mean(values) if values else None

    def share(key):
        return sum(1 for sample in inside if sample.get(key) is True) / len(inside)

    return {"sm_mhz": mean("clocks_current_sm"), "power_w": mean("power_draw"),
            "limit_w": mean("enforced_power_limit"), "temp_c": mean("temperature_gpu"),
            "mem_temp_c": mean("temperature_memory"), "power_cap": share("reason_sw_power_cap"),
            "thermal": max(share("reason_hw_thermal_slowdown"), share("reason_sw_thermal_slowdown")),
            "hw_slowdown": max(share("reason_hw_slowdown"), share("reason_hw_power_brake_slowdown"))}


def evictions(run, metrics):
    """Tokens the server evicted over the run, from the counter sampled beside it (None where it has none)."""
    before = [sample for sample in metrics if sample["t"] <= run["began"] and "evicted_tokens_total" in sample]
    after = [sample for sample in metrics if sample["t"] >= run["ended"] and "evicted_tokens_total" in sample]
    if not before or not after:
        return None
    return after[0]["evicted_tokens_total"] - before[-1]["evicted_tokens_total"]


def pearson(xs, ys):
    if len(xs) < 3 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return None
    mx, my = statistics.mean(xs), statistics.mean(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    return cov / math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))


def fmt(interval):
    value, low, high = interval
    return "x%.3f [%.3f, %.3f]" % (value, low, high)


def analyse(folder):
    runs = [run for run in rows(folder / "runs.jsonl") if not run.get("failed")]
    telemetry = rows(folder / "telemetry.jsonl") if (folder / "telemetry.jsonl").exists() else []
    metrics = rows(folder / "metrics.jsonl") if (folder / "metrics.jsonl").exists() else []
    for run in runs:
        run["telemetry"] = run_telemetry(run, telemetry)
        run["evicted"] = evictions(run, metrics)
    origin = {label: min(run["began"] for run in runs if run["label"] == label) for label in {r["label"] for r in runs}}
    findings = {}
    highest = {}
    for run in runs:
        highest[run["load"]] = max(highest.get(run["load"], 0), run["concurrency"])
    for load in sorted(highest, key=lambda name: -highest[name]):
        mine = [run for run in runs if run["load"] == load]
        print("\n## %s (%d runs)\n" % (load, len(mine)))
        print("| start | segment | kind | runs | mean tok/s | CV | range | trend per 10 min [95 %] | evicted/run |")
        print("| --- | ---: | --- | ---: | ---: | ---: | --- | --- | ---: |")
        for label in sorted({run["label"] for run in mine}):
            for segment in sorted({run["segment"] for run in mine if run["label"] == label}):
                part = [run for run in mine if run["label"] == label and run["segment"] == segment
                        and run["processes"] == 1]
                rates = [run["output_tokens_per_s"] for run in part]
                if not rates:
                    continue
                slope = trend([(run["began"] - origin[label], run["output_tokens_per_s"]) for run in part])
                evicted = [run["evicted"] for run in part if run["evicted"] is not None]
                print("| %s | %d | %s | %d | %.1f | %.1f %% | %.0f-%.0f | %s | %s |" % (
                    label, segment, part[0]["kind"], len(rates), statistics.mean(rates), 100 * cv(rates),
                    min(rates), max(rates),
                    "%+.1f %% ± %.1f" % (100 * slope[0], 100 * slope[1]) if slope else "-",
                    "%.0f" % statistics.mean(evicted) if evicted else "-"))
        radix = [run for run in mine if run["label"] == "radix" and run["processes"] == 1]
        plain = [run["output_tokens_per_s"] for run in radix if run["kind"] == "plain"]
        flushed = [run["output_tokens_per_s"] for run in radix if run["kind"] == "flush"]
        whole = trend([(run["began"] - origin["radix"], run["output_tokens_per_s"]) for run in radix
                       if run["kind"] in ("plain", "flush")])
        finding = {"trend": whole}
        if whole:
            print("\nThe one server's trend, plain and flushed runs together: %+.1f %% per 10 min ± %.1f (95 %%)."
                  % (100 * whole[0], 100 * whole[1]))
        if len(plain) > 1 and len(flushed) > 1:
            finding["flush"] = ratio(flushed, plain)
            finding["flush_cv"] = (cv(plain), cv(flushed))
            print("Flushed against plain: %s; CV %.1f %% plain, %.1f %% flushed." % (
                fmt(finding["flush"]), 100 * cv(plain), 100 * cv(flushed)))
        noradix = [run["output_tokens_per_s"] for run in mine if run["label"] == "noradix"]
        if len(noradix) > 1 and len(plain) > 1:
            finding["noradix"] = ratio(noradix, plain)
            finding["noradix_cv"] = cv(noradix)
            print("Without the radix cache (its own start) against plain with it: %s; CV %.1f %%." % (
                fmt(finding["noradix"]), 100 * cv(noradix)))
        clients = [run for run in mine if run["kind"] == "clients"]
        pairs = [(one["output_tokens_per_s"], two["output_tokens_per_s"])
                 for one, two in zip(clients, clients[1:]) if one["processes"] == 1 and two["processes"] == 2]
        if pairs:
            finding["clients"] = paired(pairs)
            print("Two client processes against one, %d adjacent pairs: %s." % (len(pairs), fmt(finding["clients"])))
        measured = [run for run in radix if run["telemetry"].get("sm_mhz")]
        if measured:
            def mean_of(key):
                return statistics.mean(run["telemetry"][key] for run in measured)
            clock_r = pearson([run["telemetry"]["sm_mhz"] for run in measured],
                              [run["output_tokens_per_s"] for run in measured])
            finding.update(clock_r=clock_r, power_cap=mean_of("power_cap"), thermal=mean_of("thermal"),
                           hw_slowdown=mean_of("hw_slowdown"))
            temps = [run["telemetry"]["temp_c"] for run in measured]
            print("Telemetry over the runs: SM clock %.0f MHz (%.0f-%.0f), power %.0f W of %.0f, the power cap's "
                  "reason in %.0f %% of samples, thermal %.0f %%, HW slowdown %.0f %%; GPU %.0f-%.0f °C, memory "
                  "%.0f °C; rate against clock across runs: r = %s." % (
                      mean_of("sm_mhz"), min(run["telemetry"]["sm_mhz"] for run in measured),
                      max(run["telemetry"]["sm_mhz"] for run in measured), mean_of("power_w"), mean_of("limit_w"),
                      100 * finding["power_cap"], 100 * finding["thermal"], 100 * finding["hw_slowdown"],
                      min(temps), max(temps), mean_of("mem_temp_c") or float("nan"),
                      "%.2f" % clock_r if clock_r is not None else "-"))
        findings[load] = finding
    print("\n## What the data supports\n")
    for load, finding in findings.items():
        said = []
        slope = finding.get("trend")
        if slope:
            said.append("a trend of %+.1f %% per 10 min" % (100 * slope[0]) + (
                " (its interval excludes 0)" if abs(slope[0]) > slope[1] else " (within its interval of 0: none seen)"))
        if "flush" in finding:
            value, low, high = finding["flush"]
            plain_cv, flush_cv = finding["flush_cv"]
            said.append("flushing %s the rate (%s) and %s its spread (CV %.1f %% to %.1f %%)" % (
                "changes" if low > 1 or high < 1 else "does not change", fmt(finding["flush"]),
                "cuts" if flush_cv < plain_cv / 2 else "keeps", 100 * plain_cv, 100 * flush_cv))
        if "clients" in finding:
            value, low, high = finding["clients"]
            said.append("a second client process %s (%s)" % (
                "raises the rate: the client was a limit" if low > 1 else
                "lowers the rate" if high < 1 else "changes nothing measurable: the client is not the limit",
                fmt(finding["clients"])))
        if finding.get("power_cap") is not None:
            said.append("the power cap's reason in %.0f %% of samples%s" % (
                100 * finding["power_cap"], ", the rate following the clock (r = %.2f)" % finding["clock_r"]
                if finding.get("clock_r") is not None and finding["clock_r"] > 0.5 else ""))
            if finding["thermal"] or finding["hw_slowdown"]:
                said.append("thermal or HW slowdowns in %.0f %% of samples" % (
                    100 * max(finding["thermal"], finding["hw_slowdown"])))
        print("- %s: %s." % (load, "; ".join(said)))
    return findings


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not (Path(args[0]) / "runs.jsonl").exists():
        print("usage: drift_causes.py FOLDER (the folder drift.py wrote: runs.jsonl, telemetry.jsonl, metrics.jsonl)",
              file=sys.stderr)
        return 2
    analyse(Path(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

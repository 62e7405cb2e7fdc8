# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang's own decode log, per server start of one real-GPU run, side by side.

The real-GPU harness keeps every start of the server in one log (results/server.log: the
systemd stand-in writes "-- systemd-standin: starting UNIT: ARGV" before each). SGLang logs a
"Decode batch" line every --decode-log-interval steps with the requests running, the accept
length and its "gen throughput (token/s)". This script splits the log by start, names each start
by the flags that decide speculative decoding (algorithm, draft tokens, and the
max_running_requests the scheduler really took, from its "max_total_num_tokens=..." line), and
prints per start and per number of running requests the median gen throughput and accept length,
and each start's ratio to the first start that has the same number running.

It reads what the server measured of itself: decode steps only, a log line per interval, not the
client's view (bench_serving's output tok/s includes prefill and queueing). The client's figures
are in the run's reports; this one is for starts whose run ended before their report (a machine
taken back mid-measurement) and for a second opinion on the ratio.

    python3 benchmarks/real_gpu/decode_log.py RESULTS/server.log [--running 1,16,64,256] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from systemd_standin import START_MARKER  # noqa: E402  pylint: disable=wrong-import-position

START = re.compile(r"^%s (?P<unit>\S+): (?P<argv>.*)$" % re.escape(START_MARKER))
DECODE = re.compile(
    r"^\[(?P<at>[^\]]+)\] Decode batch, #running-req: (?P<running>\d+),.*?"
    r"(?:accept len: (?P<accept>[\d.]+),.*?)?gen throughput \(token/s\): (?P<tput>[\d.]+)"
)
ARG = re.compile(r"\b(speculative_algorithm|speculative_num_draft_tokens|speculative_num_steps)=('[^']*'|[^,)]+)")
TAKEN = re.compile(r"max_total_num_tokens=(\d+),.*\bmax_running_requests=(\d+)")


def split_starts(lines):
    """[(argv, [lines of that start])] in log order; lines before the first start are dropped."""
    starts = []
    for line in lines:
        m = START.match(line)
        if m:
            starts.append((m.group("argv"), []))
        elif starts:
            starts[-1][1].append(line)
    return starts


def describe(argv, lines):
    """The start's speculative flags as SGLang parsed them, and the request cap its scheduler took."""
    flags = {}
    taken = None
    for line in lines:
        if not flags and "server_args=ServerArgs(" in line:
            flags = {k: v.strip("'") for k, v in ARG.findall(line)}
        m = TAKEN.search(line)
        if m and taken is None:
            taken = {"max_total_num_tokens": int(m.group(1)), "max_running_requests": int(m.group(2))}
    algorithm = flags.get("speculative_algorithm", "None")
    label = "spec off" if algorithm in ("None", "") else (
        f"{algorithm}, {flags.get('speculative_num_draft_tokens')} draft tokens")
    if taken:
        label += f", max_running_requests {taken['max_running_requests']}"
    else:
        label += ", never served (no memory pool line)"
    return {"label": label, "flags": flags, "taken": taken,
            "argv_has_max_running": "--max-running-requests" in argv}


def decode_rows(lines):
    """{running: {'tput': [...], 'accept': [...]}} from the start's Decode batch lines."""
    rows = {}
    for line in lines:
        m = DECODE.match(line)
        if not m:
            continue
        row = rows.setdefault(int(m.group("running")), {"tput": [], "accept": []})
        row["tput"].append(float(m.group("tput")))
        if m.group("accept") is not None:
            row["accept"].append(float(m.group("accept")))
    return rows


def summarize(text, running):
    starts = []
    for argv, lines in split_starts(text.splitlines()):
        entry = describe(argv, lines)
        rows = decode_rows(lines)
        entry["by_running"] = {
            n: {"lines": len(rows[n]["tput"]),
                "median_gen_tput": statistics.median(rows[n]["tput"]),
                "median_accept": statistics.median(rows[n]["accept"]) if rows[n]["accept"] else None}
            for n in running if n in rows
        }
        starts.append(entry)
    for n in running:
        first = next((s["by_running"][n]["median_gen_tput"] for s in starts if n in s["by_running"]), None)
        for s in starts:
            if n in s["by_running"] and first:
                s["by_running"][n]["ratio_to_first"] = s["by_running"][n]["median_gen_tput"] / first
    return starts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--running", default="1,16,64,256",
                        help="numbers of running requests to report (the harness's loads), comma-separated")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    try:
        running = [int(n) for n in args.running.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--running takes integers separated by commas, not {args.running!r}")
    if not args.log.is_file():
        parser.error(f"{args.log} is not a file: give the server.log from a real-GPU run's results")
    starts = summarize(args.log.read_text(errors="replace"), running)
    if not starts:
        parser.error(f"{args.log} has no '{START_MARKER}' line: it is not a harness server log")
    print(f"{args.log}: {len(starts)} server starts; SGLang's decode-log gen throughput (median of its lines)")
    print("| Start | Running | Lines | Gen tok/s | Accept len | Ratio to first start |")
    print("|---|---:|---:|---:|---:|---:|")
    for i, s in enumerate(starts, 1):
        if not s["by_running"]:
            print(f"| {i}. {s['label']} | – | 0 | – | – | – |")
        for n, r in s["by_running"].items():
            accept = "–" if r["median_accept"] is None else f"{r['median_accept']:.2f}"
            ratio = f"{r['ratio_to_first']:.2f}" if "ratio_to_first" in r else "–"
            print(f"| {i}. {s['label']} | {n} | {r['lines']} | {r['median_gen_tput']:,.1f} | {accept} | {ratio} |")
    if args.json:
        args.json.write_text(json.dumps(starts, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""summary.md of a real-GPU harness run: the tables of docs/evidence/real-sglang-h200.md, from its results folder.

    python3 summarize.py RESULTS_DIR        # writes RESULTS_DIR/summary.md and prints it

Standard library only: it runs on the GPU host at the end of the run, and here on a fetched results.tar.gz.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def accept_lengths(info):
    """avg_spec_accept_length of each of a /server_info's internal states (None where it has none)."""
    return [state.get("avg_spec_accept_length") for state in info.get("internal_states") or []
            if isinstance(state, dict)]


def fmt(value, digits=1):
    return "n/a" if value is None else ("{:,.%df}" % digits).format(value)


def compare_table(rows):
    lines = ["| load | serving_benchmark out tok/s (runs) | bench_serving out tok/s (runs) | ratio of medians | "
             "TTFT p99 ms, ours / bs | TTFT p50 ms, ours / bs / server mean | input tokens sent per request, "
             "ours / bs (server) | output tokens, ours / bs (server) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    loads = sorted({(r["concurrency"], r["load"]) for r in rows})
    for _name, load in loads:
        mine = [r for r in rows if r["load"] == load and r["tool"] == "serving_benchmark"]
        theirs = [r for r in rows if r["load"] == load and r["tool"] == "bench_serving"]
        a = median(r["client"]["output_tok_s"] for r in mine)
        b = median(r["client"]["output_tok_s"] for r in theirs)

        def per_request(runs, key):
            values = [r["server"][key] / max(r["server"]["requests"], 1) for r in runs if r["server"]["requests"]]
            return median(values)

        lines.append("| %s | %s (%s) | %s (%s) | %s | %s / %s | %s / %s / %s | %s / %s (%s / %s) | %s / %s (%s / %s) |" % (
            load, fmt(a), ", ".join(fmt(r["client"]["output_tok_s"], 0) for r in mine),
            fmt(b), ", ".join(fmt(r["client"]["output_tok_s"], 0) for r in theirs),
            fmt(a / b if a and b else None, 3),
            fmt(median(r["client"]["ttft_ms"]["p99"] for r in mine)),
            fmt(median(r["client"]["ttft_ms"]["p99"] for r in theirs)),
            fmt(median(r["client"]["ttft_ms"]["p50"] for r in mine)),
            fmt(median(r["client"]["ttft_ms"]["p50"] for r in theirs)),
            fmt(median(r["server"]["ttft_mean_ms"] for r in mine)),
            fmt(median(r["client"]["input_tokens"] / max(r["client"]["completed"], 1) for r in mine)),
            fmt(median(r["client"]["input_tokens"] / max(r["client"]["completed"], 1) for r in theirs)),
            fmt(per_request(mine, "prompt_tokens")), fmt(per_request(theirs, "prompt_tokens")),
            fmt(median(r["client"]["output_tokens"] for r in mine), 0),
            fmt(median(r["client"]["output_tokens"] for r in theirs), 0),
            fmt(median(r["server"]["generation_tokens"] for r in mine), 0),
            fmt(median(r["server"]["generation_tokens"] for r in theirs), 0)))
    return lines


def cause_table(cause):
    lines = ["| load, sampler interval | out tok/s | sampler readings | sampler util median | sampler power of limit |"
             " trace util median (share at 0 %) | trace W | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, entry in cause.get("loads", {}).items():
        gpu = (entry["sampler"].get("gpus") or [{}])[0]
        activity = gpu.get("activity") or {}
        trace = entry["trace_measured_window"]
        host = entry["verdict"].get("host") or {}
        lines.append("| %s | %s | %s | %s | %s | %s (%s) | %s | %s: %s |" % (
            name, fmt(entry["output_tok_s"]), entry["sampler"].get("samples"), activity.get("median_util_pct"),
            activity.get("median_power_fraction"), trace.get("median_util_pct"), trace.get("share_util_zero"),
            trace.get("mean_w"), host.get("verdict"), (host.get("reason") or host.get("message") or "")[:200]))
    idle = cause.get("idle") or {}
    lines.append("")
    lines.append("Idle before the loads: util median %s, %s W, SM %s MHz." % (
        idle.get("median_util_pct"), idle.get("mean_w"), idle.get("median_sm_mhz")))
    return lines


def main(argv):
    results = Path(argv[1])
    out = ["# Real-GPU harness run", ""]
    phases = results / "phases.json"
    if phases.exists():
        out += ["## Phases", "", "| phase | ok | seconds | note |", "| --- | --- | --- | --- |"]
        for name, status in json.loads(phases.read_text()).items():
            note = (status.get("error") or status.get("skipped") or "")[:300].replace("\n", " ").replace("|", "/")
            out.append("| %s | %s | %s | %s |" % (name, status.get("ok"), status.get("seconds"), note))
        out.append("")
    versions = results / "versions.txt"
    if versions.exists():
        out += ["Versions: `%s`" % versions.read_text().strip().splitlines()[0], ""]
    for name in ("deploy", "experiments", "rerun"):
        record = results / (name + ".json")
        if record.exists():
            data = json.loads(record.read_text())
            out.append("%s: ansible-playbook %s s; last start to active %s s." % (
                name, data.get("seconds"), data.get("last_start_to_active_s")))
    crash = results / "crash.json"
    if crash.exists():
        data = json.loads(crash.read_text())
        out.append("crash: a server that died at start failed the playbook in %s s (health timeout %s s): %s" % (
            data.get("seconds"), data.get("health_timeout_s"), "; ".join(data.get("failure") or ["(no message)"])[:400]))
    out.append("")
    compare = results / "compare.jsonl"
    if compare.exists():
        rows = [json.loads(line) for line in compare.read_text().splitlines() if line.strip()]
        out += ["## The two clients on one server", ""] + compare_table(rows) + [""]
    cause = results / "cause.json"
    if cause.exists():
        out += ["## Causes", ""] + cause_table(json.loads(cause.read_text())) + [""]
    parity = results / "parity.json"
    if parity.exists():
        data = json.loads(parity.read_text())
        out += ["## Parity at temperature 0", "",
                "Restart %s s (health after %s s); same within a start: %s; same across the restart, prompt by "
                "prompt: %s" % (data["restart_s"], data["health_wait_s"], data["same_within_a_start"],
                                data["same_across_restart"]), ""]
        for record in data["records"]:
            out.append("- %s: %s" % (record["label"], json.dumps(record["texts"])[:400]))
        out.append("")
    infos = sorted(results.glob("*-server-info.json"))
    if infos:
        out += ["## The server each start of the speculative phase ran", "",
                "| start | algorithm | max running requests | KV tokens (max_total_num_tokens) | accept length |",
                "| --- | --- | --- | --- | --- |"]
        for path in infos:
            info = json.loads(path.read_text())
            accept = accept_lengths(info)
            out.append("| %s | %s | %s | %s | %s |" % (
                path.name[:-len("-server-info.json")], info.get("speculative_algorithm"),
                info.get("max_running_requests"), info.get("max_total_num_tokens"),
                ", ".join(fmt(value, 3) for value in accept) or info.get("error") or "n/a"))
        out.append("")
    for report in sorted(results.glob("reports*/*/*.md")):
        out += ["## Smoke test report %s (%s)" % (report.parent.name, report.parent.parent.name), "",
                report.read_text(), ""]
    text = "\n".join(out) + "\n"
    (results / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

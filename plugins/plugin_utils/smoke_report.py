# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the smoke check's runs as Markdown, on the controller; smoke_report_svg.py draws them.

Pure: a run in, text out; standard library only. A run is what
roles/smoke_test assembles for one host:

    {host, run_id, started_at, config: {profile, sglang_version, model, load},
     patches_live: [gate ids], thresholds: {min_output_tok_s, max_ttft_p99_ms, min_power_fraction},
     measurements: [{label, patches_live, result: <serving_benchmark result>, runs: [tok/s], spread}],
     verdicts: [experiment verdicts of plugin_utils/experiment_verdicts.py],
     verdict: {status: pass|fail|regression-rolled-back|warn, messages: [...], rolled_back: [gate ids]}}

The last measurement is the run's result. Every figure may be missing or None
(a failed benchmark, power without a source, a threshold turned off): it shows
as "n/a" and is never compared. Which figures miss a threshold is decided in
smoke_thresholds.py, the same decision the verdict takes.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import run_verdict
from ansible_collections.sm120.sglang.plugins.plugin_utils.cause_verdict import power_cause_verdicts, result_host_verdict
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiments import SLO_FIELDS, UNTRIED
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import (
    breached,
    get_in,
    gpu_fraction,
    low_power_gpus,
    mean_of_known,
    mean_power_fraction,
    number,
    power_gpus,
)

NA = "n/a"
STATUS_TITLES = {
    run_verdict.PASS: "PASS",
    run_verdict.FAIL: "FAIL",
    "warn": "WARN",
    run_verdict.REGRESSION_ROLLED_BACK: "REGRESSION ROLLED BACK",
    run_verdict.UPGRADE_ROLLED_BACK: "UPGRADE ROLLED BACK",
}


class ReportError(Exception):
    """The input is not a run (or a list of runs) at all."""


# ------------------------------------------------------------------ reading a run

def gate_names(value):
    """A list of gate ids from a list, None or anything else."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return [str(value)]
    return [str(item) for item in value]


def check_run(run):
    if not isinstance(run, Mapping):
        raise ReportError("a smoke check run must be a dict, got %s" % type(run).__name__)
    return run


def run_measurements(run):
    return [m for m in (run.get("measurements") or []) if isinstance(m, Mapping)]


def final_result(run):
    """The result of the run's last measurement, {} when it has none."""
    measurements = run_measurements(run)
    result = measurements[-1].get("result") if measurements else None
    return result if isinstance(result, Mapping) else {}


# ------------------------------------------------------------------ text

def format_number(value, digits=1):
    figure = number(value)
    return NA if figure is None else "{:,.{}f}".format(figure, digits)


def _count(value):
    figure = number(value)
    return NA if figure is None else "%d" % figure


def _inline(text):
    """Free text on one Markdown line: no HTML, no table breaks, no stray emphasis or links."""
    text = " ".join(str(text).split())
    for char in "\\`*[]<>|":
        text = text.replace(char, "\\" + char)
    return text


def _code(text):
    """An identifier as inline code, whatever backticks it holds; n/a for nothing."""
    text = " ".join(str(text).split()) if text is not None else ""
    if not text:
        return NA
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)


def _codes(names):
    return ", ".join(_code(name) for name in names) if names else "none"


def status_title(status):
    if status is None or status == "":
        return NA
    return STATUS_TITLES.get(str(status), str(status))


def _table(header, aligns, rows):
    """A GitHub table; aligns has an l or r per column."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if align == "r" else "---" for align in aligns) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _marked(text, missed):
    return "**%s** ✗" % text if missed and text != NA else text


def cost_text(run):
    """What the run spent in restarts, the price of an experiment on a real host."""
    restarts, seconds = number(get_in(run, "cost", "restarts")), number(get_in(run, "cost", "restart_s"))
    if restarts is None:
        return NA
    text = "%d restart%s of the server, %s min until it was healthy again" % (
        restarts, "" if restarts == 1 else "s", format_number(seconds / 60.0 if seconds is not None else None, 1))
    experiments, spent = number(get_in(run, "cost", "experiments")), number(get_in(run, "cost", "experiment_restarts"))
    measured = [verdict for verdict in run.get("verdicts") or [] if isinstance(verdict, Mapping)
                and not verdict.get("remembered")]
    if experiments and spent is not None and not measured:
        text += "; %d of them for %d experiment%s, whose verdicts were all kept from earlier runs" % (
            spent, experiments, "" if experiments == 1 else "s")
    elif experiments and spent is not None:
        held = [str(name) for name in get_in(run, "cost", "held_back") or []]
        baseline = ("kept from an earlier run" if get_in(run, "cost", "baseline_reused")
                    else "measured as deployed, the server started without %s" % ", ".join(held) if held
                    else "measured in this run")
        text += "; %d of them for %d experiment%s (the baseline %s)" % (
            spent, experiments, "" if experiments == 1 else "s", baseline)
    return text


# ------------------------------------------------------------------ Markdown, one host

def smoke_report_markdown(run):
    """A Markdown report of one host's run: verdict, figures per measurement, power per GPU."""
    run = check_run(run)
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    thresholds = run.get("thresholds") if isinstance(run.get("thresholds"), Mapping) else {}
    verdict = run.get("verdict") if isinstance(run.get("verdict"), Mapping) else {}
    measurements = run_measurements(run)

    lines = ["# Smoke check: %s — %s" % (_inline(run.get("host") or NA), status_title(verdict.get("status"))), ""]
    lines.append("- Started: %s" % _inline(run.get("started_at") or NA))
    lines.append("- Profile %s, SGLang %s, model %s" % (
        _code(config.get("profile")), _code(config.get("sglang_version")), _code(config.get("model"))))
    loads = config.get("loads") if isinstance(config.get("loads"), Mapping) else {}
    if loads:
        lines.append("- Loads (%s; concurrency/requests/input/output tokens): %s" % (
            _code(config.get("endpoint")), ", ".join("%s %s" % (_inline(name), _code("/".join(
                str(get_in(load, field)) for field in ("concurrency", "num_requests", "input_tokens", "output_tokens"))))
                for name, load in sorted(loads.items()))))
    lines.append("- Patches live now: %s" % _codes(gate_names(run.get("patches_live"))))
    lines.append("- Cost: %s" % cost_text(run))
    reused = run.get("reused") if isinstance(run.get("reused"), Mapping) else None
    if reused:
        lines.append("- Measured: not in this run; %s, so its measurement stands (smoke_test_reuse: false or "
                     "--tags smoke measures again)" % _inline(reused.get("reason") or NA))
    lines.append("- Thresholds: output at least %s tok/s, TTFT p99 at most %s ms, GPU power at least %s of the limit" % (
        format_number(thresholds.get("min_output_tok_s"), 1), format_number(thresholds.get("max_ttft_p99_ms"), 1),
        format_number(thresholds.get("min_power_fraction"), 2)))
    lines += ["", "## Verdict: %s" % status_title(verdict.get("status")), ""]
    messages = [m for m in gate_names(verdict.get("messages")) if m.strip()]
    lines.extend("- %s" % _inline(message) for message in messages)
    if not messages:
        lines.append("No messages.")
    rolled_back = gate_names(verdict.get("rolled_back"))
    if rolled_back:
        lines += ["", "Rolled back: %s" % _codes(rolled_back)]

    lines += upgrade_lines(run.get("upgrade"))
    lines += experiment_lines(run.get("verdicts"))
    lines += power_limit_lines(run.get("power_limit"))

    lines += ["", "## Measurements", ""]
    if not measurements:
        lines.append("No measurements.")
    else:
        rows = []
        # Speculative decoding's accept length (serving_benchmark's accept_length): a column only where a
        # measurement has one.
        speculative = any(number(get_in(measurement, "result", "accept_length")) is not None
                          for measurement in measurements)
        for position, measurement in enumerate(measurements, 1):
            result = measurement.get("result") if isinstance(measurement.get("result"), Mapping) else {}
            breaches = breached(result, thresholds) if position == len(measurements) else set()
            rows.append([
                "%d. %s" % (position, _inline(measurement.get("label") or NA)),
                _codes(gate_names(measurement.get("patches_live"))),
                _marked(format_number(result.get("output_tokens_per_s"), 1), "output_tokens_per_s" in breaches),
                _runs_text(measurement),
                format_number(result.get("total_tokens_per_s"), 1),
                format_number(result.get("requests_per_s"), 2),
                format_number(get_in(result, "ttft_ms", "p50"), 1),
                _marked(format_number(get_in(result, "ttft_ms", "p99"), 1), "ttft_p99_ms" in breaches),
                format_number(get_in(result, "itl_ms", "p50"), 1),
                format_number(get_in(result, "itl_ms", "p99"), 1),
                format_number(get_in(result, "e2e_latency_ms", "p99"), 1),
                _count(result.get("failed_requests")),
            ] + ([format_number(result.get("accept_length"), 2)] if speculative else []))
        lines += _table(["Measurement", "Patches live", "Output tok/s", "Repeats (spread)", "Total tok/s", "Req/s",
                         "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "E2E p99 ms", "Failed"]
                        + (["Accept length"] if speculative else []), "llrlrrrrrrrr" + ("r" if speculative else ""),
                        rows)
        lines += ["", "Each row is the median of its repeats; output tok/s counts generated tokens, total tok/s adds the "
                  "prompts'. The last measurement is the run's result; ✗ marks a figure that misses its threshold."]
        if speculative:
            lines += ["Accept length: the server's mean accepted tokens per speculative decoding step since its start "
                      "(SGLang's /server_info), with speculative decoding on."]

    for position, measurement in enumerate(measurements, 1):
        lines += ["", "## Power: %d. %s" % (position, _inline(measurement.get("label") or NA)), ""]
        lines += _power_lines(measurement.get("result"), thresholds if position == len(measurements) else None)
        errors = [e for e in gate_names(get_in(measurement, "result", "errors")) if e.strip()]
        if errors:
            lines += ["", "Errors:"] + ["- %s" % _inline(error) for error in errors]
    return "\n".join(lines) + "\n"


def _runs_text(measurement):
    runs = measurement.get("runs")
    runs = [format_number(value, 1) for value in runs if number(value) is not None] if isinstance(runs, list) else []
    if not runs:
        return NA
    spread = number(measurement.get("spread"))
    return "%s (%s %%)" % (", ".join(runs), format_number(spread * 100 if spread is not None else None, 1))


def _objective_text(verdict, load):
    """The latency objective's bounds the candidate missed at a load, "" where none (or none was set)."""
    objective = verdict.get("objective") if isinstance(verdict.get("objective"), Mapping) else {}
    misses = [miss for miss in objective.get("misses") or [] if isinstance(miss, Mapping) and miss.get("load") == load]
    texts = []
    for miss in misses:
        field = SLO_FIELDS.get(miss.get("field"))
        name, bound = field["short"] if field else _inline(miss.get("field")), number(miss.get("bound"))
        if number(miss.get("value")) is None:
            texts.append("%s not measured (objective %s ms)" % (name, format_number(bound, 0)))
        else:
            value = format_number(number(miss.get("value")), 1)
            texts.append("%s %s ms > %s ms" % (name, value, format_number(bound, 0)))
    return "".join(", objective missed: %s" % text for text in texts)


def _load_text(verdict):
    loads = verdict.get("loads") if isinstance(verdict.get("loads"), Mapping) else {}
    return "; ".join("%s %s %s %% (±%s)%s" % (
        _inline(load), _inline(("not decided (goal ±%s %%, about %s more runs a side)" % (
            format_number(number(figures.get("goal")) * 100, 1), figures.get("more_runs") or "many"))
            if figures.get("decided") is False else figures.get("verdict") or NA),
        "%+.1f" % (number(figures.get("change")) * 100) if number(figures.get("change")) is not None else NA,
        format_number(number(figures.get("band")) * 100 if number(figures.get("band")) is not None else None, 1),
        _objective_text(verdict, load))
        for load, figures in sorted(loads.items()) if isinstance(figures, Mapping)) or NA


def _parity_text(verdict):
    parity = verdict.get("parity") if isinstance(verdict.get("parity"), Mapping) else {}
    if number(parity.get("total")) is None:
        return NA
    ties = parity.get("ties") if isinstance(parity.get("ties"), list) else []
    return "%s of %s%s" % (_count(parity.get("matched")), _count(parity.get("total")),
                           " (%d at a near-tie)" % len(ties) if ties else "")


def power_limit_lines(power):
    """The power limit's search: each step, its decision, energy and throughput per load, and what the GPUs drew."""
    if not isinstance(power, Mapping) or not isinstance(power.get("verdicts"), list):
        return []
    rows = []
    for verdict in power["verdicts"]:
        if not isinstance(verdict, Mapping):
            continue
        energy = verdict.get("energy") if isinstance(verdict.get("energy"), Mapping) else {}
        per_load = "; ".join("%s %s J/token, %s tok/s" % (
            _inline(load), "%+.1f %%" % (number(figures.get("change")) * 100)
            if number(figures.get("change")) is not None else NA,
            "%+.1f %%" % (number(get_in(verdict, "loads", load, "change")) * 100)
            if number(get_in(verdict, "loads", load, "change")) is not None else NA)
            for load, figures in sorted(energy.items()) if isinstance(figures, Mapping)) or NA
        draw = verdict.get("draw") if isinstance(verdict.get("draw"), Mapping) else {}
        rows.append([format_number(verdict.get("limit_w"), 0), _inline(verdict.get("decision") or NA),
                     _inline(verdict.get("reason") or NA), per_load, format_number(draw.get("candidate_w"), 1),
                     format_number(draw.get("baseline_w"), 1)])
    start, kept = number(power.get("start_w")), number(power.get("limit_w"))
    if kept is None:
        summary = "The GPUs stay at %s W: no step down paid." % format_number(start, 0)
    else:
        summary = "The GPUs run at %s W, from %s W (set live, and kept across reboots by the driver role's unit)." % (
            format_number(kept, 0), format_number(start, 0))
    return ["", "## Power limit", ""] + _table(
        ["Limit W", "Decision", "Why", "Per load: change against the step before", "All GPUs W",
         "W the step before"], "rlllrr", rows) + ["", summary]


def upgrade_lines(upgrade):
    """The upgrade canary: the new release's medians against the baseline's on the one before, load by load."""
    if not isinstance(upgrade, Mapping) or not upgrade.get("release"):
        return []
    lines = ["", "## Upgrade canary: SGLang %s against %s — %s" % (
        _code(upgrade.get("release")), _code(upgrade.get("previous_release")), _inline(upgrade.get("decision") or NA)),
        ""]
    loads = upgrade.get("loads") if isinstance(upgrade.get("loads"), Mapping) else {}
    rows = [[_inline(load), format_number(get_in(figures, "baseline", "median"), 1), _runs_text(
        {"runs": get_in(figures, "baseline", "runs"), "spread": get_in(figures, "baseline", "spread")}),
        format_number(get_in(figures, "candidate", "median"), 1), _runs_text(
        {"runs": get_in(figures, "candidate", "runs"), "spread": get_in(figures, "candidate", "spread")}),
        "%+.1f %%" % (number(figures.get("change")) * 100) if number(figures.get("change")) is not None else NA,
        "±%s %%" % format_number(number(figures.get("band")) * 100 if number(figures.get("band")) is not None else None, 1),
        _inline(figures.get("verdict") or NA)]
        for load, figures in sorted(loads.items()) if isinstance(figures, Mapping)]
    if rows:
        lines += _table(["Load", "%s output tok/s" % _inline(upgrade.get("previous_release") or NA), "Its repeats (spread)",
                         "%s output tok/s" % _inline(upgrade.get("release") or NA), "Its repeats (spread)", "Change",
                         "Band", "Verdict"], "lrlrlrrl", rows) + [""]
    lines.append(_inline(upgrade.get("message") or NA))
    return lines


def _decided_by(verdict):
    if verdict.get("remembered"):
        return "remembered"
    if verdict.get("stopped_at"):
        return "not measured (its knob's search stopped)"
    return "not measured (restart budget)" if verdict.get("decision") == UNTRIED else "measured"


def experiment_lines(verdicts):
    """The experiments' verdicts: one row each, with the figures at every load, the parity and the cause."""
    verdicts = [verdict for verdict in (verdicts or []) if isinstance(verdict, Mapping)]
    if not verdicts:
        return []
    rows = [[_code(verdict.get("experiment")), _inline(verdict.get("decision") or NA), _inline(verdict.get("reason") or NA),
             _load_text(verdict), _parity_text(verdict), _inline(verdict.get("cause") or NA),
             _decided_by(verdict)] for verdict in verdicts]
    return ["", "## Experiments", ""] + _table(
        ["Experiment", "Decision", "Why", "Per load: change (band)", "Parity", "Cause", "Decided by"], "lllllll", rows) + [
        "", "Each experiment against the configuration it was added to, medians of the repeats. The band is the change "
        "each load's measurement could see (plugins/plugin_utils/noise_band.py): inside it is no measurable gain, and "
        "the shipped behaviour stays; a band wider than the goal (experiments_resolution) leaves the load "
        "not decided, with the runs that would decide it."]


def _power_lines(result, thresholds):
    """The per-GPU power table of one measurement; marks where it misses the thresholds (None: no marks)."""
    power = get_in(result, "power")
    power = power if isinstance(power, Mapping) else {}
    gpus = power_gpus(result)
    if not gpus:
        return ["Power: %s (%s)." % (NA, _inline(power.get("reason") or "no power figures"))]
    low = low_power_gpus(result, thresholds) if thresholds is not None else set()
    causes = power_cause_verdicts(power)
    by_index = {gpu["index"]: gpu for gpu in causes["gpus"]}
    rows = []
    for index, gpu in gpus:
        cause = by_index.get(index, {})
        rows.append(["%d" % index, format_number(gpu.get("mean_w"), 1), format_number(gpu.get("max_w"), 1),
                     format_number(gpu.get("limit_w"), 1),
                     _marked(format_number(gpu_fraction(gpu), 2), index in low),
                     format_number(cause.get("median_util_pct"), 0),
                     format_number(cause.get("median_clock_fraction"), 2),
                     _inline(cause.get("verdict") or NA)])
    if len(gpus) > 1:
        mean_missed = thresholds is not None and "power_fraction" in breached(result, thresholds)
        rows.append(["mean"] + [format_number(mean_of_known(number(gpu.get(key)) for _index, gpu in gpus), 1)
                                for key in ("mean_w", "max_w", "limit_w")]
                    + [_marked(format_number(mean_power_fraction(result), 2), mean_missed),
                       format_number(causes["host"].get("median_util_pct"), 0),
                       format_number(causes["host"].get("median_clock_fraction"), 2),
                       _inline(causes["host"].get("verdict") or NA)])
    lines = _table(["GPU", "Mean W", "Max W", "Limit W", "Mean fraction of limit", "Util % (median)",
                    "SM clock of max", "Cause"], "lrrrrrrl", rows)
    lines += ["", "Source %s; all GPUs together %s W on average, %s J per output token." % (
        _inline(power.get("source") or NA), format_number(power.get("total_mean_w"), 1),
        format_number(power.get("joules_per_output_token"), 3)),
        "", "Cause: %s" % _inline(causes["host"]["explanation"])]
    return lines


# ------------------------------------------------------------------ Markdown, the fleet

def _band_text(band):
    """The fleet band's cell: the host's share of its configuration's median, or that it is the first of it."""
    if not isinstance(band, Mapping) or number(band.get("median")) in (None, 0.0):
        return NA
    if band.get("status") == "alone":
        return "first of its configuration"
    share = "%d %% of the median %s of %d hosts" % (round(100 * number(band.get("value")) / number(band["median"])),
                                                    format_number(band["median"], 1), len(band.get("peers") or []))
    return "**%s** ✗" % share if band.get("status") == "fail" else share


def smoke_fleet_markdown(runs):
    """One table over the hosts: verdict and the figures of each host's final measurement."""
    if isinstance(runs, Mapping) or not isinstance(runs, (list, tuple)):
        raise ReportError("smoke_fleet_markdown wants a list of runs, got %s" % type(runs).__name__)
    runs = [check_run(run) for run in runs]
    counts = {}
    for run in runs:
        status = status_title(get_in(run, "verdict", "status"))
        counts[status] = counts.get(status, 0) + 1
    lines = ["# Smoke check: %d host%s" % (len(runs), "" if len(runs) == 1 else "s"), ""]
    if not runs:
        return "\n".join(lines + ["No runs."]) + "\n"
    lines += [", ".join("%s %d" % (status, count) for status, count in sorted(counts.items())), ""]
    rows = []
    for run in runs:
        result = final_result(run)
        breaches = breached(result, run.get("thresholds"))
        fraction = mean_power_fraction(result)
        rows.append([
            _inline(run.get("host") or NA),
            status_title(get_in(run, "verdict", "status")),
            _marked(format_number(result.get("output_tokens_per_s"), 1), "output_tokens_per_s" in breaches),
            _marked(format_number(get_in(result, "ttft_ms", "p99"), 1), "ttft_p99_ms" in breaches),
            _marked(format_number(fraction, 2), "power_fraction" in breaches),
            _inline(result_host_verdict(result)["verdict"]),
            _count(get_in(run, "cost", "restarts")),
            _codes(gate_names(run.get("patches_live"))),
            _codes(gate_names(get_in(run, "verdict", "rolled_back"))),
            _band_text(run.get("fleet_band")),
        ])
    lines += _table(["Host", "Verdict", "Output tok/s", "TTFT p99 ms", "Mean power fraction", "Cause", "Restarts",
                     "Patches live", "Rolled back", "Fleet band"], "llrrrlrlll", rows)
    lines += ["", "Figures of each host's final measurement; ✗ marks a miss of that host's threshold. The fleet band: "
                  "the host against the median of the hosts of its configuration measured so far in the run."]
    verdict_rows = [[_inline(run.get("host") or NA), _code(verdict.get("experiment")),
                     _inline(verdict.get("decision") or NA), _load_text(verdict), _parity_text(verdict),
                     _inline(verdict.get("cause") or NA), _decided_by(verdict)]
                    for run in runs for verdict in (run.get("verdicts") or []) if isinstance(verdict, Mapping)]
    if verdict_rows:
        lines += ["", "## Every verdict", ""] + _table(
            ["Host", "Experiment", "Decision", "Per load: change (band)", "Parity", "Cause", "Decided by"], "lllllll",
            verdict_rows)
    return "\n".join(lines) + "\n"

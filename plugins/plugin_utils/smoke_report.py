# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the smoke check's runs as Markdown and SVG, on the controller.

Pure: a run in, text out; standard library only. A run is what
roles/smoke_test assembles for one host:

    {host, run_id, started_at, config: {profile, sglang_version, model, load},
     patches_live: [gate ids], thresholds: {min_output_tok_s, max_ttft_p99_ms, min_power_fraction},
     measurements: [{label, patches_live, result: <serving_benchmark result>}],
     verdict: {status: pass|fail|regression-rolled-back|warn, messages: [...], rolled_back: [gate ids]}}

The last measurement is the run's result. Every figure may be missing or None
(a failed benchmark, power without a source, a threshold turned off): it shows
as "n/a" and is never compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from xml.sax.saxutils import escape, quoteattr

NA = "n/a"
STATUS_TITLES = {
    "pass": "PASS",
    "fail": "FAIL",
    "warn": "WARN",
    "regression-rolled-back": "REGRESSION ROLLED BACK",
}
# Colour-blind-safe (Tableau 10); one per measurement, in order.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f")


class ReportError(Exception):
    """The input is not a run (or a list of runs) at all."""


# ------------------------------------------------------------------ reading a run

def _get(data, *keys):
    """data[k1][k2]..., None where any level is missing or not a mapping."""
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _number(value):
    """A finite float, or None. Numeric strings count (a threshold from -e); booleans do not."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _names(value):
    """A list of gate ids from a list, None or anything else."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return [str(value)]
    return [str(item) for item in value]


def _check_run(run):
    if not isinstance(run, Mapping):
        raise ReportError("a smoke check run must be a dict, got %s" % type(run).__name__)
    return run


def _measurements(run):
    return [m for m in (run.get("measurements") or []) if isinstance(m, Mapping)]


def final_result(run):
    """The result of the run's last measurement, {} when it has none."""
    measurements = _measurements(run)
    result = measurements[-1].get("result") if measurements else None
    return result if isinstance(result, Mapping) else {}


def _power_gpus(result):
    """(index, gpu entry) of each GPU with figures, numbered by position where the index is missing."""
    gpus = _get(result, "power", "gpus")
    if not isinstance(gpus, (list, tuple)):
        return []
    return [(int(gpu["index"]) if _number(gpu.get("index")) is not None else position, gpu)
            for position, gpu in enumerate(gpus) if isinstance(gpu, Mapping)]


def _gpu_fraction(gpu):
    fraction = _number(gpu.get("mean_fraction_of_limit"))
    if fraction is None:
        mean, limit = _number(gpu.get("mean_w")), _number(gpu.get("limit_w"))
        fraction = mean / limit if mean is not None and limit else None
    return fraction


def gpu_fractions(result):
    """Each GPU's mean power as a fraction of its limit, by GPU index; None where unknown."""
    return {index: _gpu_fraction(gpu) for index, gpu in _power_gpus(result)}


def _mean(values):
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None


def mean_power_fraction(result):
    """The mean over the GPUs of their mean power as a fraction of the limit; None without figures."""
    return _mean(gpu_fractions(result).values())


def breached(result, thresholds):
    """The figures of a result beyond their thresholds, for marking in the reports.

    The verdict and its messages come from smoke_threshold_misses
    (plugin_utils/smoke_thresholds.py); this only says which cells to mark. A
    threshold that is None is off; a figure that is missing is not marked, as it
    shows as n/a.
    """
    thresholds = thresholds if isinstance(thresholds, Mapping) else {}
    marks = set()
    minimum = _number(thresholds.get("min_output_tok_s"))
    output = _number(_get(result, "output_tokens_per_s"))
    if minimum is not None and output is not None and output < minimum:
        marks.add("output_tokens_per_s")
    maximum = _number(thresholds.get("max_ttft_p99_ms"))
    ttft = _number(_get(result, "ttft_ms", "p99"))
    if maximum is not None and ttft is not None and ttft > maximum:
        marks.add("ttft_p99_ms")
    floor = _number(thresholds.get("min_power_fraction"))
    fraction = mean_power_fraction(result)
    if floor is not None and fraction is not None and fraction < floor:
        marks.add("power_fraction")
    return marks


# ------------------------------------------------------------------ text

def _fmt(value, digits=1):
    number = _number(value)
    return NA if number is None else "{:,.{}f}".format(number, digits)


def _count(value):
    number = _number(value)
    return NA if number is None else "%d" % number


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


def _marked(text, breached):
    return "**%s** ✗" % text if breached and text != NA else text


# ------------------------------------------------------------------ Markdown, one host

def smoke_report_markdown(run):
    """A Markdown report of one host's run: verdict, figures per measurement, power per GPU."""
    run = _check_run(run)
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    thresholds = run.get("thresholds") if isinstance(run.get("thresholds"), Mapping) else {}
    verdict = run.get("verdict") if isinstance(run.get("verdict"), Mapping) else {}
    measurements = _measurements(run)

    lines = ["# Smoke check: %s — %s" % (_inline(run.get("host") or NA), status_title(verdict.get("status"))), ""]
    lines.append("- Started: %s" % _inline(run.get("started_at") or NA))
    lines.append("- Profile %s, SGLang %s, model %s" % (
        _code(config.get("profile")), _code(config.get("sglang_version")), _code(config.get("model"))))
    if config.get("load"):
        lines.append("- Load (endpoint/concurrency/requests/input/output tokens): %s" % _code(config["load"]))
    lines.append("- Patches live now: %s" % _codes(_names(run.get("patches_live"))))
    lines.append("- Thresholds: output at least %s tok/s, TTFT p99 at most %s ms, GPU power at least %s of the limit" % (
        _fmt(thresholds.get("min_output_tok_s"), 1), _fmt(thresholds.get("max_ttft_p99_ms"), 1),
        _fmt(thresholds.get("min_power_fraction"), 2)))
    lines += ["", "## Verdict: %s" % status_title(verdict.get("status")), ""]
    messages = [m for m in _names(verdict.get("messages")) if m.strip()]
    lines.extend("- %s" % _inline(message) for message in messages)
    if not messages:
        lines.append("No messages.")
    rolled_back = _names(verdict.get("rolled_back"))
    if rolled_back:
        lines += ["", "Rolled back: %s" % _codes(rolled_back)]

    lines += ["", "## Measurements", ""]
    if not measurements:
        lines.append("No measurements.")
    else:
        rows = []
        for number, measurement in enumerate(measurements, 1):
            result = measurement.get("result") if isinstance(measurement.get("result"), Mapping) else {}
            breaches = breached(result, thresholds) if number == len(measurements) else set()
            rows.append([
                "%d. %s" % (number, _inline(measurement.get("label") or NA)),
                _codes(_names(measurement.get("patches_live"))),
                _marked(_fmt(result.get("output_tokens_per_s"), 1), "output_tokens_per_s" in breaches),
                _fmt(result.get("total_tokens_per_s"), 1),
                _fmt(result.get("requests_per_s"), 2),
                _fmt(_get(result, "ttft_ms", "p50"), 1),
                _marked(_fmt(_get(result, "ttft_ms", "p99"), 1), "ttft_p99_ms" in breaches),
                _fmt(_get(result, "itl_ms", "p50"), 1),
                _fmt(_get(result, "itl_ms", "p99"), 1),
                _fmt(_get(result, "e2e_latency_ms", "p99"), 1),
                _count(result.get("failed_requests")),
            ])
        lines += _table(["Measurement", "Patches live", "Output tok/s", "Total tok/s", "Req/s", "TTFT p50 ms",
                         "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "E2E p99 ms", "Failed"], "llrrrrrrrrr", rows)
        lines += ["", "The last measurement is the run's result; ✗ marks a figure that misses its threshold."]

    for number, measurement in enumerate(measurements, 1):
        lines += ["", "## Power: %d. %s" % (number, _inline(measurement.get("label") or NA)), ""]
        lines += _power_lines(measurement.get("result"),
                              _number(thresholds.get("min_power_fraction")) if number == len(measurements) else None)
        errors = [e for e in _names(_get(measurement, "result", "errors")) if e.strip()]
        if errors:
            lines += ["", "Errors:"] + ["- %s" % _inline(error) for error in errors]
    return "\n".join(lines) + "\n"


def _power_lines(result, floor):
    """The per-GPU power table of one measurement; floor marks fractions below it (None: no marks)."""
    power = _get(result, "power")
    power = power if isinstance(power, Mapping) else {}
    gpus = _power_gpus(result)
    if not gpus:
        return ["Power: %s (%s)." % (NA, _inline(power.get("reason") or "no power figures"))]
    rows = []
    for index, gpu in gpus:
        fraction = _gpu_fraction(gpu)
        rows.append(["%d" % index, _fmt(gpu.get("mean_w"), 1), _fmt(gpu.get("max_w"), 1), _fmt(gpu.get("limit_w"), 1),
                     _marked(_fmt(fraction, 2), floor is not None and fraction is not None and fraction < floor)])
    if len(gpus) > 1:
        mean = mean_power_fraction(result)
        rows.append(["mean"] + [_fmt(_mean(_number(gpu.get(key)) for _index, gpu in gpus), 1)
                                for key in ("mean_w", "max_w", "limit_w")]
                    + [_marked(_fmt(mean, 2), floor is not None and mean is not None and mean < floor)])
    lines = _table(["GPU", "Mean W", "Max W", "Limit W", "Mean fraction of limit"], "lrrrr", rows)
    lines += ["", "Source %s; all GPUs together %s W on average, %s J per output token." % (
        _inline(power.get("source") or NA), _fmt(power.get("total_mean_w"), 1),
        _fmt(power.get("joules_per_output_token"), 3))]
    return lines


# ------------------------------------------------------------------ Markdown, the fleet

def smoke_fleet_markdown(runs):
    """One table over the hosts: verdict and the figures of each host's final measurement."""
    if isinstance(runs, Mapping) or not isinstance(runs, (list, tuple)):
        raise ReportError("smoke_fleet_markdown wants a list of runs, got %s" % type(runs).__name__)
    runs = [_check_run(run) for run in runs]
    counts = {}
    for run in runs:
        status = status_title(_get(run, "verdict", "status"))
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
            status_title(_get(run, "verdict", "status")),
            _marked(_fmt(result.get("output_tokens_per_s"), 1), "output_tokens_per_s" in breaches),
            _marked(_fmt(_get(result, "ttft_ms", "p99"), 1), "ttft_p99_ms" in breaches),
            _marked(_fmt(fraction, 2), "power_fraction" in breaches),
            _codes(_names(run.get("patches_live"))),
            _codes(_names(_get(run, "verdict", "rolled_back"))),
        ])
    lines += _table(["Host", "Verdict", "Output tok/s", "TTFT p99 ms", "Mean power fraction", "Patches live",
                     "Rolled back"], "llrrrll", rows)
    lines += ["", "Figures of each host's final measurement; ✗ marks a miss of that host's threshold."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ SVG

WIDTH = 1000
PLOT_TOP, PLOT_BOTTOM = 96, 330
LEFT_PANEL = (70, 380)     # x range of the throughput panel's plot area
RIGHT_PANEL = (470, 980)   # x range of the power panel's plot area


def _nice_ceiling(value):
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above value (value > 0)."""
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * 10 ** exponent >= value:
            return step * 10 ** exponent
    return 10 ** (exponent + 1)


def _shorten(text, limit):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _text(x, y, content, size=12, anchor="start", weight=None, fill="#222", extra=""):
    return '<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s"%s fill="%s"%s>%s</text>' % (
        x, y, size, anchor, ' font-weight="%s"' % weight if weight else "", fill, extra, escape(str(content)))


def _axis(x0, x1, top, bottom, maximum, tick_format, title):
    parts = [_text((x0 + x1) / 2, top - 14, title, 13, "middle", "bold")]
    for step in range(5):
        value = maximum * step / 4
        y = bottom - (bottom - top) * step / 4
        parts.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>' % (x0, y, x1, y))
        parts.append(_text(x0 - 6, y + 4, tick_format(value), 11, "end", fill="#555"))
    parts.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>' % (x0, bottom, x1, bottom))
    return parts


def _threshold_line(x0, x1, top, bottom, maximum, value, label):
    if value is None or not 0 <= value <= maximum:
        return []
    y = bottom - (bottom - top) * value / maximum
    return ['<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c0392b" stroke-dasharray="6 4"/>' % (x0, y, x1, y),
            # A white halo keeps the label legible where it crosses a bar.
            _text(x1 - 2, y - 4, label, 10, "end", fill="#c0392b",
                  extra=' stroke="#fff" stroke-width="3" paint-order="stroke"')]


def _bar(x, width, top, bottom, maximum, value, colour, tooltip, say_na=True):
    if value is None:
        return [_text(x + width / 2, bottom - 4, NA, 10, "middle", fill="#888")] if say_na else []
    height = (bottom - top) * min(max(value, 0.0), maximum) / maximum
    return ['<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>'
            % (x, bottom - height, width, height, colour, escape(tooltip))]


def smoke_report_svg(run):
    """A self-contained SVG chart of one host's run: output tok/s and per-GPU power per measurement."""
    run = _check_run(run)
    thresholds = run.get("thresholds") if isinstance(run.get("thresholds"), Mapping) else {}
    measurements = _measurements(run)
    labels = [str(m.get("label") or "measurement %d" % (i + 1)) for i, m in enumerate(measurements)]
    results = [m.get("result") if isinstance(m.get("result"), Mapping) else {} for m in measurements]
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(measurements))]
    status = status_title(_get(run, "verdict", "status"))
    title = "Smoke check %s, %s: %s" % (run.get("host") or NA, run.get("started_at") or NA, status)
    # Room for the legend, two measurements a row.
    height = PLOT_BOTTOM + 44 + 20 * ((len(measurements) + 1) // 2) + 6

    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" '
        'aria-label=%s font-family="DejaVu Sans, Helvetica, Arial, sans-serif">' % (
            WIDTH, height, WIDTH, height, quoteattr(title)),
        "<title>%s</title>" % escape(title),
        '<rect width="100%" height="100%" fill="#fff"/>',
        _text(WIDTH / 2, 28, title, 16, "middle", "bold"),
    ]
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    subtitle = "profile %s, SGLang %s, model %s; patches live now: %s" % (
        config.get("profile") or NA, config.get("sglang_version") or NA, config.get("model") or NA,
        ", ".join(_names(run.get("patches_live"))) or "none")
    parts.append(_text(WIDTH / 2, 48, _shorten(subtitle, 140), 12, "middle", fill="#555"))

    # Panel 1: output tok/s, one bar per measurement.
    x0, x1 = LEFT_PANEL
    throughput = [_number(r.get("output_tokens_per_s")) for r in results]
    minimum = _number(thresholds.get("min_output_tok_s"))
    top_value = max([v for v in throughput if v is not None] + ([minimum] if minimum else []) + [0.0])
    maximum = _nice_ceiling(top_value * 1.1) if top_value > 0 else 1.0
    parts += _axis(x0, x1, PLOT_TOP, PLOT_BOTTOM, maximum, "{:,.0f}".format, "Output tokens/s")
    slot = (x1 - x0) / max(len(measurements), 1)
    for i, value in enumerate(throughput):
        width = slot * 0.6
        x = x0 + slot * i + (slot - width) / 2
        parts += _bar(x, width, PLOT_TOP, PLOT_BOTTOM, maximum, value, colours[i],
                      "%s: %s output tok/s" % (labels[i], _fmt(value, 1)))
        if value is not None:
            y = PLOT_BOTTOM - (PLOT_BOTTOM - PLOT_TOP) * min(value, maximum) / maximum
            parts.append(_text(x + width / 2, y - 4, _fmt(value, 0 if value >= 100 else 1), 11, "middle", "bold"))
        parts.append(_text(x + width / 2, PLOT_BOTTOM + 16, "%d" % (i + 1), 11, "middle"))
    if not measurements:
        parts.append(_text((x0 + x1) / 2, (PLOT_TOP + PLOT_BOTTOM) / 2, "no measurements", 12, "middle", fill="#888"))
    parts += _threshold_line(x0, x1, PLOT_TOP, PLOT_BOTTOM, maximum, minimum, "minimum %s" % _fmt(minimum, 0))

    # Panel 2: each GPU's mean power as a fraction of its limit, a group per GPU, a bar per measurement.
    x0, x1 = RIGHT_PANEL
    fractions = [gpu_fractions(r) for r in results]
    gpus = sorted(set().union(*fractions)) if fractions else []
    known = [f for per_gpu in fractions for f in per_gpu.values() if f is not None]
    maximum = max([1.0] + [_nice_ceiling(f) for f in known if f > 1.0])
    parts += _axis(x0, x1, PLOT_TOP, PLOT_BOTTOM, maximum, lambda v: "%.2f" % v,
                   "GPU mean power / power limit, per GPU")
    if gpus:
        group = (x1 - x0) / len(gpus)
        width = group * 0.8 / max(len(measurements), 1)
        for g, index in enumerate(gpus):
            start = x0 + group * g + group * 0.1
            for i, per_gpu in enumerate(fractions):
                value = per_gpu.get(index)
                parts += _bar(start + width * i, width, PLOT_TOP, PLOT_BOTTOM, maximum, value, colours[i],
                              "GPU %s, %s: %s of the limit" % (index, labels[i], _fmt(value, 2)), say_na=False)
            parts.append(_text(x0 + group * (g + 0.5), PLOT_BOTTOM + 16, "GPU %s" % index, 11, "middle"))
        # Too narrow for an n/a on each bar: one line names the measurements without figures.
        missing = ["%d" % (i + 1) for i, per_gpu in enumerate(fractions)
                   if not [f for f in per_gpu.values() if f is not None]]
        if missing:
            reasons = [_get(results[int(i) - 1], "power", "reason") for i in missing]
            note = "no power figures for %s" % ", ".join(missing)
            if reasons[-1]:
                note += " (%s)" % reasons[-1]
            parts.append(_text(x1, PLOT_BOTTOM + 30, _shorten(note, 90), 10, "end", fill="#888"))
    else:
        reasons = [str(_get(r, "power", "reason")) for r in results if _get(r, "power", "reason")]
        parts.append(_text((x0 + x1) / 2, (PLOT_TOP + PLOT_BOTTOM) / 2, "no power figures", 13, "middle", fill="#888"))
        if reasons:
            parts.append(_text((x0 + x1) / 2, (PLOT_TOP + PLOT_BOTTOM) / 2 + 18, _shorten(reasons[-1], 80), 10,
                               "middle", fill="#888"))
    floor = _number(thresholds.get("min_power_fraction"))
    parts += _threshold_line(x0, x1, PLOT_TOP, PLOT_BOTTOM, maximum, floor, "minimum %s" % _fmt(floor, 2))

    # Legend: the measurements, numbered as under the throughput bars.
    for i, label in enumerate(labels):
        column, row = i % 2, i // 2
        x, y = 70 + column * 460, PLOT_BOTTOM + 44 + row * 20
        parts.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (x, y - 10, colours[i]))
        parts.append(_text(x + 18, y, "%d. %s" % (i + 1, _shorten(label, 60)), 12))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"

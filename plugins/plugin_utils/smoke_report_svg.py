# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Draw one host's smoke check run as a self-contained SVG, on the controller.

Pure: a run in (as smoke_report.py describes it), text out; standard library
only. Output tok/s per measurement on the left, each GPU's mean power as a
fraction of its limit per measurement on the right, each with its threshold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_report import (
    NA,
    check_run,
    format_number,
    gate_names,
    run_measurements,
    status_title,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import (
    get_in,
    gpu_fractions,
    number,
    threshold,
)

# Colour-blind-safe (Tableau 10); one per measurement, in order.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f")

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
    run = check_run(run)
    thresholds = run.get("thresholds") if isinstance(run.get("thresholds"), Mapping) else {}
    measurements = run_measurements(run)
    labels = [str(m.get("label") or "measurement %d" % (i + 1)) for i, m in enumerate(measurements)]
    results = [m.get("result") if isinstance(m.get("result"), Mapping) else {} for m in measurements]
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(measurements))]
    status = status_title(get_in(run, "verdict", "status"))
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
        ", ".join(gate_names(run.get("patches_live"))) or "none")
    parts.append(_text(WIDTH / 2, 48, _shorten(subtitle, 140), 12, "middle", fill="#555"))

    # Panel 1: output tok/s, one bar per measurement.
    x0, x1 = LEFT_PANEL
    throughput = [number(r.get("output_tokens_per_s")) for r in results]
    minimum = threshold(thresholds, "output_tokens_per_s")
    top_value = max([v for v in throughput if v is not None] + ([minimum] if minimum else []) + [0.0])
    maximum = _nice_ceiling(top_value * 1.1) if top_value > 0 else 1.0
    parts += _axis(x0, x1, PLOT_TOP, PLOT_BOTTOM, maximum, "{:,.0f}".format, "Output tokens/s")
    slot = (x1 - x0) / max(len(measurements), 1)
    for i, value in enumerate(throughput):
        width = slot * 0.6
        x = x0 + slot * i + (slot - width) / 2
        parts += _bar(x, width, PLOT_TOP, PLOT_BOTTOM, maximum, value, colours[i],
                      "%s: %s output tok/s" % (labels[i], format_number(value, 1)))
        if value is not None:
            y = PLOT_BOTTOM - (PLOT_BOTTOM - PLOT_TOP) * min(value, maximum) / maximum
            parts.append(_text(x + width / 2, y - 4, format_number(value, 0 if value >= 100 else 1), 11, "middle", "bold"))
        parts.append(_text(x + width / 2, PLOT_BOTTOM + 16, "%d" % (i + 1), 11, "middle"))
    if not measurements:
        parts.append(_text((x0 + x1) / 2, (PLOT_TOP + PLOT_BOTTOM) / 2, "no measurements", 12, "middle", fill="#888"))
    parts += _threshold_line(x0, x1, PLOT_TOP, PLOT_BOTTOM, maximum, minimum, "minimum %s" % format_number(minimum, 0))

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
                              "GPU %s, %s: %s of the limit" % (index, labels[i], format_number(value, 2)), say_na=False)
            parts.append(_text(x0 + group * (g + 0.5), PLOT_BOTTOM + 16, "GPU %s" % index, 11, "middle"))
        # Too narrow for an n/a on each bar: one line names the measurements without figures.
        missing = ["%d" % (i + 1) for i, per_gpu in enumerate(fractions)
                   if not [f for f in per_gpu.values() if f is not None]]
        if missing:
            reasons = [get_in(results[int(i) - 1], "power", "reason") for i in missing]
            note = "no power figures for %s" % ", ".join(missing)
            if reasons[-1]:
                note += " (%s)" % reasons[-1]
            parts.append(_text(x1, PLOT_BOTTOM + 30, _shorten(note, 90), 10, "end", fill="#888"))
    else:
        reasons = [str(get_in(r, "power", "reason")) for r in results if get_in(r, "power", "reason")]
        parts.append(_text((x0 + x1) / 2, (PLOT_TOP + PLOT_BOTTOM) / 2, "no power figures", 13, "middle", fill="#888"))
        if reasons:
            parts.append(_text((x0 + x1) / 2, (PLOT_TOP + PLOT_BOTTOM) / 2 + 18, _shorten(reasons[-1], 80), 10,
                               "middle", fill="#888"))
    floor = threshold(thresholds, "power_fraction")
    parts += _threshold_line(x0, x1, PLOT_TOP, PLOT_BOTTOM, maximum, floor, "minimum %s" % format_number(floor, 2))

    # Legend: the measurements, numbered as under the throughput bars.
    for i, label in enumerate(labels):
        column, row = i % 2, i // 2
        x, y = 70 + column * 460, PLOT_BOTTOM + 44 + row * 20
        parts.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (x, y - 10, colours[i]))
        parts.append(_text(x + 18, y, "%d. %s" % (i + 1, _shorten(label, 60)), 12))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"

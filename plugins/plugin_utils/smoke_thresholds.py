# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which thresholds of the smoke test a serving_benchmark result misses. Pure.

The one place that decides: the verdict (the filter smoke_threshold_misses that
roles/smoke_test applies to the final measurement) and the reports' marks
(smoke_report.py, smoke_report_svg.py) both ask threshold_checks(), so a figure
the report marks is a figure the verdict names, and the other way round.
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils.cause_verdict import UNKNOWN, result_host_verdict

# figure -> (threshold key, the role variable that sets it, whether the figure must stay above it)
THRESHOLDS = {
    "output_tokens_per_s": ("min_output_tok_s", "smoke_test_min_output_tok_s", True),
    "ttft_p99_ms": ("max_ttft_p99_ms", "smoke_test_max_ttft_p99_ms", False),
    "power_fraction": ("min_power_fraction", "smoke_test_min_power_fraction", True),
}


# One threshold that is on, held against a result; value is None where the result lacks the figure.
Check = namedtuple("Check", "figure value threshold variable missed")


class ThresholdError(ValueError):
    """A threshold is set to something that is not a number."""


# ------------------------------------------------------------------ reading a result's figures

def get_in(data, *keys):
    """data[k1][k2]..., None where any level is missing or not a mapping."""
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def number(value):
    """A finite float, or None. Numeric strings count (a threshold from -e); booleans do not."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def power_gpus(result):
    """(index, gpu entry) of each GPU with figures, numbered by position where the index is missing."""
    gpus = get_in(result, "power", "gpus")
    if not isinstance(gpus, (list, tuple)):
        return []
    return [(int(gpu["index"]) if number(gpu.get("index")) is not None else position, gpu)
            for position, gpu in enumerate(gpus) if isinstance(gpu, Mapping)]


def gpu_fraction(gpu):
    """One GPU's mean power as a fraction of its limit: the result's own figure, else mean_w / limit_w."""
    fraction = number(gpu.get("mean_fraction_of_limit"))
    if fraction is None:
        mean, limit = number(gpu.get("mean_w")), number(gpu.get("limit_w"))
        fraction = mean / limit if mean is not None and limit else None
    return fraction


def gpu_fractions(result):
    """Each GPU's mean power as a fraction of its limit, by GPU index; None where unknown."""
    return {index: gpu_fraction(gpu) for index, gpu in power_gpus(result)}


def mean_of_known(values):
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None


def mean_power_fraction(result):
    """The mean over the GPUs of their mean power as a fraction of the limit; None without figures."""
    return mean_of_known(gpu_fractions(result).values())


def _figure(result, figure):
    if figure == "output_tokens_per_s":
        return number(get_in(result, "output_tokens_per_s"))
    if figure == "ttft_p99_ms":
        return number(get_in(result, "ttft_ms", "p99"))
    return mean_power_fraction(result)


# ------------------------------------------------------------------ deciding

def threshold(thresholds, figure):
    """The threshold set for a figure, None when it is off (null or empty). Raises ThresholdError on a non-number."""
    key, variable, _above = THRESHOLDS[figure]
    raw = thresholds.get(key) if isinstance(thresholds, Mapping) else None
    if raw is None or raw == "":
        return None
    value = number(raw)
    if value is None:
        raise ThresholdError("%s (%s) must be a number or null, got %r" % (variable, key, raw))
    return value


def beyond(value, limit, above):
    """Whether a known value misses a set limit: below a minimum, above a maximum."""
    if value is None or limit is None:
        return False
    return value < limit if above else value > limit


def threshold_checks(result, thresholds):
    """One Check per threshold that is on, in the order of THRESHOLDS.

    A figure the result does not carry is not compared (it shows as n/a, power
    that was not sampled is not checked), with one exception: a result that
    completed requests and carries no throughput misses the minimum throughput,
    since throughput is what the smoke test exists to check.
    """
    result = result if isinstance(result, Mapping) else {}
    checks = []
    for figure, (_key, variable, above) in THRESHOLDS.items():
        limit = threshold(thresholds, figure)
        if limit is None:
            continue
        value = _figure(result, figure)
        missed = beyond(value, limit, above)
        if figure == "output_tokens_per_s" and value is None:
            missed = bool(number(result.get("completed_requests")))
        checks.append(Check(figure, value, limit, variable, missed))
    return checks


def breached(result, thresholds):
    """The figures of a result beyond their thresholds, the cells the reports mark."""
    return {check.figure for check in threshold_checks(result, thresholds) if check.missed}


def low_power_gpus(result, thresholds):
    """The GPU indices whose own power fraction is below the power threshold, for marking in the per-GPU table."""
    floor = threshold(thresholds, "power_fraction")
    return {index for index, fraction in gpu_fractions(result).items() if beyond(fraction, floor, True)}


# ------------------------------------------------------------------ the verdict's messages

def _miss_message(result, check):
    figure, value, limit, variable = check.figure, check.value, check.threshold, check.variable
    if figure == "output_tokens_per_s":
        if value is None:
            return ("Output throughput is missing from a result with %d completed requests; the threshold is %.1f "
                    "tok/s (%s)." % (number(result.get("completed_requests")), limit, variable))
        return "Output throughput %.1f tok/s is below the threshold %.1f tok/s (%s)." % (value, limit, variable)
    if figure == "ttft_p99_ms":
        return "p99 time to first token %.0f ms is above the threshold %.0f ms (%s)." % (value, limit, variable)
    watts = ", ".join("GPU%s %.0f/%.0f W" % (gpu.get("index"), number(gpu.get("mean_w")) or 0,
                                             number(gpu.get("limit_w")) or 0)
                      for _index, gpu in power_gpus(result))
    return ("GPU power under load is %.2f of the limit on average, below the threshold %.2f (%s): %s."
            % (value, limit, variable, watts))


def cause_message(result):
    """Why the GPUs drew what they drew in this result (cause_verdict.py), None without activity samples."""
    host = result_host_verdict(result)
    if host["verdict"] == UNKNOWN:
        return None
    return "Cause: %s" % host["explanation"]


def threshold_misses(result, thresholds):
    """One message per missed threshold, each naming the figure and the threshold."""
    result = result if isinstance(result, Mapping) else {}
    if not result.get("completed_requests"):
        return ["No request completed (%s failed): %s." % (
            result.get("failed_requests", 0), "; ".join(result.get("errors") or []) or "no error reported")]
    misses = [_miss_message(result, check) for check in threshold_checks(result, thresholds) if check.missed]
    cause = cause_message(result) if misses else None
    if cause:
        misses.append(cause)
    if result.get("failed_requests"):
        misses.append("%d of %d requests failed: %s." % (
            result["failed_requests"], result["failed_requests"] + result["completed_requests"],
            "; ".join(result.get("errors") or [])))
    return misses

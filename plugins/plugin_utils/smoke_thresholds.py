# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which thresholds of the smoke test a serving_benchmark result misses. Pure."""

from __future__ import annotations


def _number(value):
    return None if value is None or value == "" else float(value)


def mean_power_fraction(result):
    """Mean over GPUs of mean power / limit during the load, or None when not sampled."""
    gpus = ((result.get("power") or {}).get("gpus") or [])
    fractions = [gpu["mean_fraction_of_limit"] for gpu in gpus if gpu.get("mean_fraction_of_limit") is not None]
    return sum(fractions) / len(fractions) if fractions else None


def threshold_misses(result, thresholds):
    """One message per missed threshold, each naming the figure and the threshold."""
    misses = []
    if not result.get("completed_requests"):
        return ["No request completed (%s failed): %s." % (
            result.get("failed_requests", 0), "; ".join(result.get("errors") or []) or "no error reported")]
    minimum = _number(thresholds.get("min_output_tok_s"))
    output = result.get("output_tokens_per_s") or 0.0
    if minimum is not None and output < minimum:
        misses.append("Output throughput %.1f tok/s is below the threshold %.1f tok/s (smoke_test_min_output_tok_s)."
                      % (output, minimum))
    maximum = _number(thresholds.get("max_ttft_p99_ms"))
    ttft_p99 = (result.get("ttft_ms") or {}).get("p99")
    if maximum is not None and ttft_p99 is not None and ttft_p99 > maximum:
        misses.append("p99 time to first token %.0f ms is above the threshold %.0f ms (smoke_test_max_ttft_p99_ms)."
                      % (ttft_p99, maximum))
    floor = _number(thresholds.get("min_power_fraction"))
    fraction = mean_power_fraction(result)
    if floor is not None and fraction is not None and fraction < floor:
        gpus = (result.get("power") or {}).get("gpus") or []
        watts = ", ".join("GPU%s %.0f/%.0f W" % (gpu.get("index"), gpu.get("mean_w") or 0, gpu.get("limit_w") or 0)
                          for gpu in gpus)
        misses.append("GPU power under load is %.2f of the limit on average, below the threshold %.2f "
                      "(smoke_test_min_power_fraction): the GPUs are underfed (%s)." % (fraction, floor, watts))
    if result.get("failed_requests"):
        misses.append("%d of %d requests failed: %s." % (
            result["failed_requests"], result["failed_requests"] + result["completed_requests"],
            "; ".join(result.get("errors") or [])))
    return misses

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary's decision: do the patches a run made live cost more throughput than the tolerance? Pure.

roles/smoke_test measures the server with the new patches and a baseline
without them (or the last good result for the host and configuration), and
keeps the patches unless their output throughput falls below the baseline's by
more than the tolerance. The sentence it prints carries both figures, the
change, the tolerance and, from the patched measurement's GPU samples, why the
GPUs draw what they draw (plugin_utils/cause_verdict.py): a collapse with GPUs
busy at low power is a spin-wait, one with idle GPUs an underfed server.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils.cause_verdict import UNKNOWN, result_host_verdict
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import number


class CanaryError(ValueError):
    """A measurement or the tolerance cannot be compared."""


def _throughput(measurement, which):
    result = measurement.get("result") if isinstance(measurement, Mapping) else None
    value = number(result.get("output_tokens_per_s")) if isinstance(result, Mapping) else None
    if value is None:
        raise CanaryError("the %s measurement has no output_tokens_per_s to compare: %r" % (which, measurement))
    return value


def tolerance_of(raw):
    value = number(raw)
    if value is None or not 0 <= value < 1:
        raise CanaryError("smoke_test_canary_tolerance must be a fraction from 0 up to 1 (0.1 is 10 %%), got %r" % (raw,))
    return value


def canary_comparison(patched, baseline, tolerance, gates):
    """The patched measurement against the baseline: regressed or not, the change, and the sentence to report.

    ``patched`` and ``baseline`` are the smoke test's measurements
    ({label, patches_live, result: <serving_benchmark result>}); ``tolerance`` a
    fraction (0.1: a loss of more than 10 % regresses); ``gates`` the new patches.
    """
    tolerance = tolerance_of(tolerance)
    with_gates = _throughput(patched, "patched")
    without = _throughput(baseline, "baseline")
    change = with_gates / max(without, 0.001) - 1
    regressed = with_gates < without * (1 - tolerance)
    cause = result_host_verdict(patched.get("result"))
    message = "%s gave %.1f output tok/s against a baseline of %.1f (%+.1f %%, tolerance -%.1f %%)" % (
        ", ".join(str(gate) for gate in gates) or "no patch", with_gates, without, change * 100, tolerance * 100)
    if cause["verdict"] != UNKNOWN:
        message += "; with them: %s" % cause["explanation"].rstrip(".")
    return {
        "regressed": regressed,
        "change": round(change, 4),
        "patched_output_tok_s": with_gates,
        "baseline_output_tok_s": without,
        "tolerance": tolerance,
        "cause": cause["verdict"],
        "message": message,
    }

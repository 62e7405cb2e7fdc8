# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: smoke_threshold_misses
short_description: List the smoke-test thresholds a serving_benchmark result misses
version_added: "0.1.0"
description:
  - Compares a result of M(sm120.sglang.serving_benchmark) with the smoke test's thresholds and returns one message per
    miss, naming the measured figure, the threshold and its variable. An empty list means the result passes.
  - A threshold set to V(null) or empty is not checked; one set to anything but a number fails the filter, naming it.
  - GPU power is checked only when it was sampled. A GPU's fraction of its limit is the result's
    C(mean_fraction_of_limit), or C(mean_w) divided by C(limit_w) where the entry has none; the threshold applies to
    the mean over the GPUs.
  - A result that completed requests but carries no output throughput misses C(min_output_tok_s).
  - The figures named here are the figures P(sm120.sglang.smoke_report_markdown#filter) and
    P(sm120.sglang.smoke_fleet_markdown#filter) mark, decided by the same code.
positional: thresholds
options:
  _input:
    description: The registered result of M(sm120.sglang.serving_benchmark).
    type: dict
    required: true
  thresholds:
    description: C(min_output_tok_s), C(max_ttft_p99_ms) and C(min_power_fraction).
    type: dict
    required: true
"""

EXAMPLES = r"""
misses: "{{ result | sm120.sglang.smoke_threshold_misses({'min_output_tok_s': 3000, 'min_power_fraction': 0.3}) }}"
"""

RETURN = r"""
_value:
  description: One message per missed threshold.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import ThresholdError, threshold_misses


def smoke_threshold_misses(result, thresholds):
    """One message per missed threshold, each naming the figure and the threshold."""
    try:
        return threshold_misses(result, thresholds)
    except ThresholdError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {"smoke_threshold_misses": smoke_threshold_misses}

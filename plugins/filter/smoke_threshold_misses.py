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
  - A threshold set to V(null) is not checked; GPU power is checked only when it was sampled.
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

from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import threshold_misses


class FilterModule:
    def filters(self):
        return {"smoke_threshold_misses": threshold_misses}

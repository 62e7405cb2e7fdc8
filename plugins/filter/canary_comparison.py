# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: canary_comparison
short_description: Decide whether new gate patches cost more throughput than the canary's tolerance
version_added: "0.1.0"
description:
  - Compares the smoke test's measurement with the new patches against its baseline (the same host and configuration
    without them) and decides whether the patches regress it, that is whether their output throughput is below the
    baseline's by more than the tolerance.
  - The sentence it returns names the gates, both throughputs, the change and the tolerance, and where the patched
    measurement sampled the GPUs' activity, the cause verdict (compute-bound, spin-wait, underfed, power-capped,
    thermal) with the numbers behind it.
  - A measurement without output throughput, or a tolerance that is not a fraction from 0 up to 1, fails the filter,
    naming it.
positional: baseline, tolerance, gates
options:
  _input:
    description: The measurement with the new patches, C({label, patches_live, result}).
    type: dict
    required: true
  baseline:
    description: The baseline measurement, of the same shape.
    type: dict
    required: true
  tolerance:
    description: The loss of output throughput allowed, as a fraction (V(0.1) is 10 %).
    type: float
    required: true
  gates:
    description: The ids of the new patches, for the sentence.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
comparison: "{{ patched | sm120.sglang.canary_comparison(baseline, 0.1, ['flashinfer_allreduce_fusion']) }}"
"""

RETURN = r"""
_value:
  description: The decision.
  type: dict
  contains:
    regressed:
      description: Whether the patched throughput is below the baseline's by more than the tolerance.
      type: bool
    change:
      description: Patched over baseline output throughput, minus 1.
      type: float
    patched_output_tok_s:
      description: Output throughput with the patches.
      type: float
    baseline_output_tok_s:
      description: Output throughput of the baseline.
      type: float
    tolerance:
      description: The tolerance used.
      type: float
    cause:
      description: The host's cause verdict for the patched measurement, V(unknown) without activity samples.
      type: str
    message:
      description: The sentence for the report and the verdict.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.plugin_utils.canary import CanaryError
from ansible_collections.sm120.sglang.plugins.plugin_utils.canary import canary_comparison as compare


def canary_comparison(patched, baseline, tolerance, gates):
    """Whether the new patches regress the server beyond the tolerance, and the sentence that says it."""
    try:
        return compare(patched, baseline, tolerance, gates)
    except CanaryError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {"canary_comparison": canary_comparison}

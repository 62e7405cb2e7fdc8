# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Two filters in one file, each documented in its own sidecar .yml of the same name beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import power_search as ps
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiments import ExperimentError
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import refusing


_wrap = refusing(ExperimentError)


def power_search_step(measurements, steps, baseline, settings):
    return ps.power_search_step(list(steps or []), dict(measurements or {}), baseline, settings)


class FilterModule:
    def filters(self):
        return {
            "power_limit_steps": _wrap(ps.power_steps),
            "power_search_step": _wrap(power_search_step),
        }

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in the .yml files of the same names beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import power_limit, preflight


class FilterModule:
    def filters(self):
        return {
            "preflight_problems": preflight.problems,
            "preflight_summary": preflight.summary,
            "preflight_driver_missing": preflight.driver_missing,
            "preflight_architecture_problem": preflight.architecture_problem,
            "gpu_power_limits": power_limit.effective_limits,
        }

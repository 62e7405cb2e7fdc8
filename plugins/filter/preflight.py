# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in the .yml files of the same names beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import driver_settings, p2p_prerequisites, power_limit, preflight
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import refusing

_refuse = refusing(p2p_prerequisites.PrerequisiteError, driver_settings.DriverSettingsError)


class FilterModule:
    def filters(self):
        return {
            "preflight_problems": preflight.problems,
            "preflight_summary": preflight.summary,
            "preflight_driver_missing": preflight.driver_missing,
            "preflight_architecture_problem": preflight.architecture_problem,
            "gpu_power_limits": power_limit.effective_limits,
            "p2p_prerequisite_problems": _refuse(p2p_prerequisites.problems),
            "p2p_prerequisite_warnings": _refuse(p2p_prerequisites.warnings),
            "p2p_prerequisite_summary": _refuse(p2p_prerequisites.summary),
            "nccl_p2p_level": _refuse(p2p_prerequisites.nccl_p2p_level),
            "gpu_driver_kernel_parameters": _refuse(driver_settings.kernel_parameters),
        }

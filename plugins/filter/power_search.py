# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Two filters in one file, each documented in its own sidecar .yml of the same name beside this file.

from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.plugin_utils import power_search as ps
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiments import ExperimentError


def _wrap(function):
    def run_filter(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except ExperimentError as exc:
            raise AnsibleFilterError(str(exc))

    run_filter.__name__ = function.__name__
    run_filter.__doc__ = function.__doc__
    return run_filter


def power_search_step(measurements, steps, baseline, settings):
    return ps.power_search_step(list(steps or []), dict(measurements or {}), baseline, settings)


class FilterModule:
    def filters(self):
        return {
            "power_limit_steps": _wrap(ps.power_steps),
            "power_search_step": _wrap(power_search_step),
        }

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the model once per fleet: plugins/plugin_utils/model_spread.py."""

from __future__ import annotations

from ansible_collections.sm120.sglang.plugins.plugin_utils import model_spread
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing

_refusing = refusing(model_spread.SpreadError)


class FilterModule:
    def filters(self):
        # Each takes its input and one mapping of the pure function's other arguments by name.
        return {
            "sglang_service_model_spread": _refusing(by_name(model_spread.spread_plan, "sglang_service_model_spread")),
            "sglang_service_model_disk_problem": _refusing(by_name(model_spread.disk_problem, "sglang_service_model_disk_problem")),
            "sglang_service_model_take_problem": _refusing(by_name(model_spread.take_problem, "sglang_service_model_take_problem")),
        }

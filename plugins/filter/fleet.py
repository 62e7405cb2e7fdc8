# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Several filters in one file, each documented in its own sidecar .yml of the same name beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import fleet
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing

_wrap = refusing(fleet.FleetError)


class FilterModule:
    def filters(self):
        return {
            "rollout_serial": _wrap(fleet.rollout_serial),
            "rollout_max_fail_percentage": _wrap(fleet.rollout_max_fail_percentage),
            "fleet_entry": _wrap(by_name(fleet.fleet_entry)),
            "fleet_band": _wrap(fleet.fleet_band),
        }

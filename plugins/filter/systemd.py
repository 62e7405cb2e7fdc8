# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Several filters in one file, each documented in its own sidecar .yml of the same name beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import systemd
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import refusing


class FilterModule:
    def filters(self):
        return {
            "systemd_command": systemd.command_line,
            "systemd_exec_start": systemd.exec_start,
            "systemd_env_value": systemd.environment_value,
            "systemd_restart_plan": refusing(ValueError)(systemd.restart_plan),
        }

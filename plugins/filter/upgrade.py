# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in upgrade_verdict.yml beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments
from ansible_collections.sm120.sglang.plugins.plugin_utils import upgrade
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing

upgrade_verdict = refusing(experiments.ExperimentError)(by_name(upgrade.upgrade_verdict, "upgrade_verdict"))


class FilterModule:
    def filters(self):
        return {"upgrade_verdict": upgrade_verdict}

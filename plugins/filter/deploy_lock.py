# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Several filters in one file, each documented in its own sidecar .yml of the same name beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import deploy_lock
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing


class FilterModule:
    def filters(self):
        refuse = refusing(deploy_lock.DeployLockError)
        return {
            "deploy_lock_run": refuse(by_name(deploy_lock.run_of, "deploy_lock_run")),
            "deploy_lock_decision": refuse(by_name(deploy_lock.decide, "deploy_lock_decision")),
        }

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Several filters in one file, each documented in its own sidecar .yml of the same name beside this file.

from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.plugin_utils import deploy_lock


def _wrap(function):
    def run_filter(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except deploy_lock.DeployLockError as exc:
            raise AnsibleFilterError(str(exc))

    run_filter.__name__ = function.__name__
    run_filter.__doc__ = function.__doc__
    return run_filter


class FilterModule:
    def filters(self):
        return {
            "deploy_lock_run": _wrap(deploy_lock.run_of),
            "deploy_lock_decision": _wrap(deploy_lock.decide),
        }

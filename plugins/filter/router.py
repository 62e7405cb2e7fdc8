# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in the .yml files of the same names beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import router
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing

# Its RouterError raised as the AnsibleFilterError that fails the task with its message.
_refusing = refusing(router.RouterError)


class FilterModule:
    def filters(self):
        return {
            "sglang_router_worker_urls": _refusing(by_name(router.worker_urls, "sglang_router_worker_urls")),
            "sglang_router_worker_url": _refusing(router.host_worker_url),
            "sglang_router_flags": _refusing(router.launch_words),
            "sglang_router_listed": _refusing(router.listed_workers),
            "sglang_router_add_call": _refusing(router.add_call),
            "sglang_router_remove_call": _refusing(router.remove_call),
            "sglang_router_changes": _refusing(router.worker_changes),
            "sglang_router_local_url": _refusing(router.local_url),
            "sglang_router_smoke_summary": _refusing(router.smoke_summary),
        }

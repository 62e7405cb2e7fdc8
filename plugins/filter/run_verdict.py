# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in their sidecars, smoke_run_verdict.yml and smoke_put_back_release.yml, beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import run_verdict
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing

_wrap = refusing(run_verdict.RunVerdictError)


class FilterModule:
    def filters(self):
        return {"smoke_run_verdict": _wrap(by_name(run_verdict.run_verdict, "smoke_run_verdict")),
                "smoke_put_back_release": _wrap(run_verdict.put_back_release)}

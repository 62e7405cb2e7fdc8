# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the run_module fixture raises; import from here, not from conftest."""

from __future__ import annotations


class ModuleExit(Exception):
    """exit_json was called; .result holds what the module returned."""

    def __init__(self, result):
        super().__init__(result)
        self.result = result


class ModuleFail(Exception):
    """fail_json was called; .result holds msg and the other keys."""

    def __init__(self, result):
        super().__init__(result.get("msg"))
        self.result = result

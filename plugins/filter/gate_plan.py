# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in the .yml files of the same names beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import gate_plan, sglang_releases
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing


_wrap = refusing(sglang_releases.ReleaseDataError)


def _gate_plan(enabled, version, installed=None, tp_size=None, turned_off=None):
    return gate_plan.plan(sglang_releases.load(), version, enabled, installed, tp_size, turned_off)


def _gates_enabled(enabled, turned_off=None):
    return gate_plan.enabled_map(sglang_releases.load(), enabled, turned_off)


def _release_inputs(_ignored=None):
    return gate_plan.release_inputs(sglang_releases.load())


def _driver_problem(branch, version):
    return sglang_releases.driver_problem(sglang_releases.load(), version, branch) or ""


def _gate_ledger(results, previous, planned, facts, python, now):
    return gate_plan.ledger(previous, planned, results, facts, python, now)


class FilterModule:
    def filters(self):
        return {
            "gate_plan": _wrap(by_name(_gate_plan, "gate_plan")),
            "release_inputs": _wrap(_release_inputs),
            "gate_ledger": _wrap(by_name(_gate_ledger, "gate_ledger")),
            "sglang_driver_problem": _wrap(_driver_problem),
            "gate_undo_edits": _wrap(gate_plan.undo_edits),
            "gate_restored_files": _wrap(lambda results, previous: gate_plan.restored_files(previous, results)),
            "gates_live": _wrap(gate_plan.live),
            "gates_enabled": _wrap(_gates_enabled),
        }

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in its sidecar, smoke_measurement_reuse.yml, beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import measurement_reuse
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiments import ExperimentError
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing

_BY_NAME = by_name(measurement_reuse.reuse_decision, "smoke_measurement_reuse")


def smoke_measurement_reuse(stored, question):
    """The reuse decision. ``question`` is one mapping of reuse_decision's arguments by name (seven positional
    arguments were too many to read); the parameter keeps the name its sidecar documents, rather than by_name's
    ``arguments``, so that a call naming it goes on working."""
    return _BY_NAME(stored, question)


class FilterModule:
    def filters(self):
        return {"smoke_measurement_reuse": refusing(ExperimentError)(smoke_measurement_reuse)}

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in its sidecar, smoke_measurement_reuse.yml, beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_data
from ansible_collections.sm120.sglang.plugins.plugin_utils import measurement_reuse
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiments import ExperimentError
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import named_arguments, refusing

REQUIRED = ("experiments", "deployed", "settings")
OPTIONAL = ("memory", "key", "retry", "server_started", "reuse_on", "run_tags")


def smoke_measurement_reuse(stored, question):
    """The reuse decision, the stepped knobs (data/experiments.yml) read, as experiment_step reads them. ``question``
    is one mapping of reuse_decision's arguments by name (nine positional arguments were too many to read)."""
    arguments = named_arguments("smoke_measurement_reuse", question, REQUIRED, OPTIONAL)
    return measurement_reuse.reuse_decision(stored, knobs=experiment_data.stepped(), **arguments)


class FilterModule:
    def filters(self):
        return {"smoke_measurement_reuse": refusing(ExperimentError, experiment_data.ExperimentDataError)(smoke_measurement_reuse)}

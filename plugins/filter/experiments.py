# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Several filters in one file, each documented in its own sidecar .yml of the same name beside this file.

from ansible.utils.display import Display

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_data, experiment_io, experiment_settings
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing
from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments as ex


_wrap = refusing(ex.ExperimentError, experiment_data.ExperimentDataError)


def experiments_deprecated_names(defined):
    """The deprecated names of the experiments' settings among ``defined``, each shown as Ansible's deprecation warning
    (the names are decided by experiment_settings.deprecated_names_in_use; showing them is all this adds)."""
    messages = experiment_settings.deprecated_names_in_use(defined)
    for message in messages:
        # The literal ansible-test's pylint checks against galaxy.yml's version; test_experiment_settings.py holds it
        # to experiment_settings.DEPRECATED_NAMES_REMOVED_IN, which the messages name.
        Display().deprecated(message, version="0.2.0", collection_name="sm120.sglang")
    return messages


def experiment_step(measurements, experiments, settings, memory=None, key="", retry=None, stored_baseline=None,
                    deployed=None):
    """The next configuration to measure, or the decisions, with the verdicts kept under key applied."""
    remembered = ex.remembered_verdicts(memory, key, retry) if key else {}
    return ex.plan_step(list(experiments or []), dict(measurements or {}), settings, remembered, stored_baseline,
                        deployed, experiment_data.stepped())


def experiments_held(wanted, live_before, decided):
    """The experiments a deploy starts the server without, the stepped knobs (data/experiments.yml) read."""
    return ex.held_at_start(wanted, live_before, decided, experiment_data.stepped())


def experiments_decision_order(experiments, deployed):
    """The order to decide the experiments in, the steps of each stepped knob (data/experiments.yml) in order."""
    return ex.decision_order(experiments, deployed, experiment_data.stepped())


def experiment_measurement(runs, parity, config, label="", patches_live=None, tuning_live=None):
    measurement = ex.measurement_of(runs, parity, config, label)
    return {"key": ex.config_key(measurement["config"]), "measurement": measurement,
            "rows": ex.report_entries(measurement, patches_live, tuning_live)}


def experiment_result(measurement, loads):
    load = ex.threshold_load(loads)
    row = [entry for entry in ex.report_entries(measurement, [], []) if entry["load"] == load]
    if not row:
        raise ex.ExperimentError("the measurement of %s has no run at load %s, the one the thresholds hold for"
                                 % (measurement.get("label"), load))
    return {"load": load, "result": row[0]["result"]}


def experiment_remember(memory, runs, run_id):
    return ex.remember_runs(memory, runs, run_id)


class FilterModule:
    def filters(self):
        return {
            "experiment_step": _wrap(by_name(experiment_step)),
            "experiment_config_key": _wrap(ex.config_key),
            "experiment_measurement": _wrap(by_name(experiment_measurement)),
            "experiment_memory_key": _wrap(by_name(ex.memory_key, "experiment_memory_key")),
            "experiment_remember": _wrap(experiment_remember),
            "experiment_switch": _wrap(by_name(ex.switch_to, "experiment_switch")),
            "experiment_switch_problem": _wrap(ex.switch_problem),
            "experiment_rejections": _wrap(ex.rejections),
            "experiment_rejected_record": _wrap(ex.rejected_record),
            "experiment_result": _wrap(experiment_result),
            "experiment_final_rows": _wrap(ex.final_rows),
            "experiment_reported": _wrap(ex.report_entries),
            "experiment_warmup_requests": _wrap(ex.warmup_requests),
            "experiment_more_runs": _wrap(experiment_io.more_runs),
            "smoke_cap_misses": _wrap(ex.cap_misses),
            "experiment_rounds": _wrap(ex.experiment_rounds),
            "experiments_among": _wrap(experiment_data.experiments_among),
            "experiments_held": _wrap(experiments_held),
            "experiments_decision_order": _wrap(experiments_decision_order),
            "experiments_decided_by_smoke": _wrap(ex.smoke_decides),
            "experiments_deprecated_names": _wrap(experiments_deprecated_names),
            "tuning_settings": _wrap(by_name(experiment_data.tuning_settings, "tuning_settings")),
        }

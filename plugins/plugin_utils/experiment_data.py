# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The experiment data (data/experiments.yml): the tuning options and which gates are experiments.

A tuning option is an environment or flag setting the service renders when the
inventory turns it on (sglang_service_tuning); the smoke test measures it like a
gate. Runs on the controller (filters, tests); PyYAML comes with ansible-core.
"""

from __future__ import annotations

import os
import re

from ansible_collections.sm120.sglang.plugins.plugin_utils.data_files import read_checked

DATA_PATH = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "data", "experiments.yml"))
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
OPTION_KEYS = {"description", "env", "flags", "source"}


class ExperimentDataError(Exception):
    """The experiment data or a request of it is wrong; the message says why and what to do."""


def check(data, where=DATA_PATH):
    if not isinstance(data, dict) or not isinstance(data.get("options"), dict):
        raise ExperimentDataError("%s needs a mapping 'options' of tuning option name to its settings" % where)
    for key in ("profile_gates", "gates_by_risk"):
        gates = data.get(key, [])
        if not isinstance(gates, list) or not all(isinstance(gate, str) for gate in gates):
            raise ExperimentDataError("%s: %s must be a list of gate ids" % (where, key))
    for name, option in data["options"].items():
        if not isinstance(option, dict):
            raise ExperimentDataError("%s: tuning option %s must be a mapping" % (where, name))
        unknown = set(option) - OPTION_KEYS
        if unknown:
            raise ExperimentDataError("%s: tuning option %s has unknown keys %s (known: %s)"
                                      % (where, name, ", ".join(sorted(unknown)), ", ".join(sorted(OPTION_KEYS))))
        env, flags = option.get("env") or {}, option.get("flags") or {}
        if not env and not flags:
            raise ExperimentDataError("%s: tuning option %s sets neither env nor flags" % (where, name))
        for variable, value in env.items():
            if not ENV_NAME.match(str(variable)) or not isinstance(value, str):
                raise ExperimentDataError("%s: tuning option %s: env %s=%r needs a valid name and a quoted string "
                                          "value" % (where, name, variable, value))
        for flag in flags:
            if not str(flag).startswith("--"):
                raise ExperimentDataError("%s: tuning option %s: flag %s must start with --" % (where, name, flag))
        if not option.get("description") or not option.get("source"):
            raise ExperimentDataError("%s: tuning option %s needs a description and a source" % (where, name))
    return data


def load(path=DATA_PATH):
    """The checked experiment data, read once per file version."""
    return read_checked(path, lambda data: check(data, path), ExperimentDataError, "experiment data")


def tuning_settings(names, off=None, data=None):
    """{env, flags, names} of the tuning options turned on, less those in off (rejected on record).

    An unknown name is refused, naming the known ones; two options that set the same variable or flag are refused.
    """
    data = data or load()
    if names is None:
        names = []
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)):
        raise ExperimentDataError("sglang_service_tuning must be a list of tuning option names, got %r" % (names,))
    unknown = [name for name in names if name not in data["options"]]
    if unknown:
        raise ExperimentDataError("sglang_service_tuning names %s, which data/experiments.yml does not define; "
                                  "known tuning options: %s" % (", ".join(map(str, unknown)),
                                                                ", ".join(sorted(data["options"]))))
    env, flags, owner = {}, {}, {}
    names = [name for name in names if name not in set(off or ())]
    for name in sorted(set(names)):
        option = data["options"][name]
        for key, value in list((option.get("env") or {}).items()) + list((option.get("flags") or {}).items()):
            if key in owner:
                raise ExperimentDataError("the tuning options %s and %s both set %s: turn one of them off"
                                          % (owner[key], name, key))
            owner[key] = name
        env.update(option.get("env") or {})
        flags.update(option.get("flags") or {})
    return {"names": sorted(set(names)), "env": env, "flags": flags}


def experiments_among(gates, tuning, data=None):
    """The experiments among live gates and tuning options, in the order to decide them.

    Every tuning option (by name) and every gate but the profile's, the gates from
    least to most risky (gates_by_risk; one not listed goes before those listed).
    """
    data = data or load()
    profile = set(data.get("profile_gates") or [])
    risk = list(data.get("gates_by_risk") or [])
    chosen = [gate for gate in gates or [] if gate not in profile]
    ordered = sorted(chosen, key=lambda gate: (risk.index(gate) + 1 if gate in risk else 0, chosen.index(gate)))
    return sorted(set(tuning or [])) + ordered

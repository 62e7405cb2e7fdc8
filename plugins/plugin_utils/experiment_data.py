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

from ansible_collections.sm120.sglang.plugins.plugin_utils.data_files import read_checked, version_range

DATA_PATH = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "data", "experiments.yml"))
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
OPTION_KEYS = {"description", "env", "flags", "source", "versions", "refused", "needs", "max_running_requests"}
# What an option may need of the checkpoint, checked on the host before the restart (model_config.py).
NEEDS = ("mtp_layer",)
# --max-running-requests set to the highest concurrency the profile measures: SGLang resets it to 48 when
# speculative decoding is on and it is unset (../shared/research/launch-knobs-2026-12.md, 0.5.9 server_args.py:2363,
# 0.5.23 speculative_hook.py:1086-1094), which would cap a load of 64.
MAX_RUNNING_REQUESTS = ("highest_load",)


class ExperimentDataError(Exception):
    """The experiment data or a request of it is wrong; the message says why and what to do."""


def _check_stepped(data, where):
    """stepped: knob -> [option, ...], each an option of the data, in one knob at most, two steps or more."""
    knobs = data.get("stepped", {})
    if not isinstance(knobs, dict):
        raise ExperimentDataError("%s: stepped must be a mapping of knob name to the list of its steps (tuning "
                                  "options), in the order they are searched" % where)
    seen = {}
    for knob, steps in knobs.items():
        if not isinstance(steps, list) or len(steps) < 2 or not all(isinstance(step, str) for step in steps):
            raise ExperimentDataError("%s: the stepped knob %s needs a list of two or more tuning options, got %r"
                                      % (where, knob, steps))
        for step in steps:
            if step not in data["options"]:
                raise ExperimentDataError("%s: the stepped knob %s names %s, which is not a tuning option under "
                                          "options" % (where, knob, step))
            if step in seen:
                raise ExperimentDataError("%s: %s is a step of both %s and %s: an option is a step of one knob at "
                                          "most" % (where, step, seen[step], knob))
            seen[step] = knob


def check(data, where=DATA_PATH):
    if not isinstance(data, dict) or not isinstance(data.get("options"), dict):
        raise ExperimentDataError("%s needs a mapping 'options' of tuning option name to its settings" % where)
    _check_stepped(data, where)
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
        if "versions" in option:
            _specifier(option["versions"], "%s: tuning option %s" % (where, name))
            if not option.get("refused"):
                raise ExperimentDataError("%s: tuning option %s has versions but no 'refused': say why a release "
                                          "outside them cannot take it" % (where, name))
        needs = option.get("needs") or []
        if not isinstance(needs, list) or any(need not in NEEDS for need in needs):
            raise ExperimentDataError("%s: tuning option %s: needs must be a list of %s"
                                      % (where, name, ", ".join(NEEDS)))
        if option.get("max_running_requests") not in (None,) + MAX_RUNNING_REQUESTS:
            raise ExperimentDataError("%s: tuning option %s: max_running_requests must be %s" % (
                where, name, " or ".join(MAX_RUNNING_REQUESTS)))
    return data


def _specifier(text, where):
    return version_range(text, "%s: versions" % where, ExperimentDataError)


def release_problem(name, option, release):
    """Why ``release`` of SGLang cannot take the option ("" where it can, or where the release is not known)."""
    if not release or "versions" not in option:
        return ""
    if _specifier(option["versions"], "tuning option %s" % name).contains(str(release), prereleases=True):
        return ""
    return "SGLang %s cannot take the tuning option %s (it runs on %s): %s" % (
        release, name, option["versions"], option["refused"])


def load(path=DATA_PATH):
    """The checked experiment data, read once per file version."""
    return read_checked(path, lambda data: check(data, path), ExperimentDataError, "experiment data")


def stepped(data=None):
    """knob -> [its steps, in the order they are searched] (the data's ``stepped``; {} without)."""
    data = data or load()
    return {knob: list(steps) for knob, steps in (data.get("stepped") or {}).items()}


def knob_of(knobs):
    """step -> its knob, of the stepped knobs (knob -> [steps])."""
    return {step: knob for knob, steps in (knobs or {}).items() for step in steps}


def in_step_order(names, knobs):
    """``names`` with the steps of each knob (knob -> [steps]) in the knob's order, in the places the knob's steps
    had, everything else where it was: the order the search goes up a knob's steps in."""
    names = list(names or [])
    rank = {step: (knob, index) for knob, steps in (knobs or {}).items() for index, step in enumerate(steps)}
    by_knob = {}
    for name in names:
        if name in rank:
            by_knob.setdefault(rank[name][0], []).append(name)
    for knob in by_knob:
        by_knob[knob].sort(key=lambda step: rank[step][1])
    return [by_knob[rank[name][0]].pop(0) if name in rank else name for name in names]


def _highest_concurrency(loads):
    values = [load.get("concurrency") for load in (loads or {}).values() if isinstance(load, dict)]
    values = [int(value) for value in values if str(value).isdigit()]
    return max(values) if values else None


def tuning_settings(names, off=None, data=None, release=None, loads=None, searched=False):
    """{env, flags, names, needs} of the tuning options turned on, less those in off (rejected on record).

    An unknown name is refused, naming the known ones; two options that set the same variable or flag are refused;
    two steps of one stepped knob are refused too (one step runs at a time), unless ``searched``: the options asked
    for, which the smoke test decides one at a time (the service's wanted set, before the new ones are held back),
    where several steps of a knob are its search;
    an option the installed ``release`` cannot take is refused naming the release and the reason (an unknown
    release, None, is not judged). An option with ``max_running_requests: highest_load`` sets
    --max-running-requests to the highest concurrency of ``loads`` (the profile's), unless another option sets it.
    ``needs`` is what the options need of the checkpoint, for the service to check before the restart.
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
    env, flags, owner, needs, capped = {}, {}, {}, set(), []
    names = [name for name in names if name not in set(off or ())]
    knobs = knob_of(stepped(data))
    on_knob = {}
    for name in sorted(set(names)):
        if name in knobs:
            on_knob.setdefault(knobs[name], []).append(name)
    for knob, steps in sorted(on_knob.items()):
        if len(steps) > 1 and not searched:
            raise ExperimentDataError(
                "sglang_service_tuning turns on %s, which are steps of one knob, %s, and one step runs at a time: "
                "keep one of them, or let the smoke test search them (experiments_enabled: true, the smoke phase "
                "in the run, and not -e sm120_deploy_hold_new=false), which starts the server without them and "
                "keeps the step that pays" % (" and ".join(steps), knob))
    for name in sorted(set(names)):
        option = data["options"][name]
        problem = release_problem(name, option, release)
        if problem:
            raise ExperimentDataError("%s. Take it out of sglang_service_tuning for this release." % problem)
        for key, value in list((option.get("env") or {}).items()) + list((option.get("flags") or {}).items()):
            if key in owner and searched and owner[key] in knobs and knobs[owner[key]] == knobs.get(name):
                continue
            if key in owner:
                raise ExperimentDataError("the tuning options %s and %s both set %s: turn one of them off"
                                          % (owner[key], name, key))
            owner[key] = name
        env.update(option.get("env") or {})
        flags.update(option.get("flags") or {})
        needs.update(option.get("needs") or [])
        if option.get("max_running_requests") == "highest_load":
            capped.append(name)
    if capped and "--max-running-requests" not in flags:
        highest = _highest_concurrency(loads)
        if highest is None:
            raise ExperimentDataError("the tuning option %s sets --max-running-requests to the profile's highest "
                                      "load, but the profile has no loads with a concurrency: give it loads"
                                      % capped[0])
        flags["--max-running-requests"] = highest
    return {"names": sorted(set(names)), "env": env, "flags": flags, "needs": sorted(needs)}


def experiments_among(gates, tuning, data=None):
    """The experiments among live gates and tuning options, in the order to decide them.

    Every tuning option (by name; the steps of a stepped knob in the knob's order) and every gate but the
    profile's, the gates from least to most risky (gates_by_risk; one not listed goes before those listed).
    """
    data = data or load()
    profile = set(data.get("profile_gates") or [])
    risk = list(data.get("gates_by_risk") or [])
    chosen = [gate for gate in gates or [] if gate not in profile]
    ordered = sorted(chosen, key=lambda gate: (risk.index(gate) + 1 if gate in risk else 0, chosen.index(gate)))
    return in_step_order(sorted(set(tuning or [])), stepped(data)) + ordered

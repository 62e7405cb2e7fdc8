# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The search: which configuration to measure next, until every experiment is decided. Pure.

roles/experiments switches the server between configurations (which of the run's experiments are live), has
roles/smoke_test measure each, and asks plan_step() what to measure next, until it says what to keep.
Experiments are decided one after the other, each on top of the configuration before it (what was kept, and what had
no measurable gain, which stays on until the end since it changes nothing measurable; a rejected one comes off at
once). Where the whole set regressed, this finds the culprit, and it decides every other experiment of the set on its
own as well, which a binary bisection would not. The deploy starts the server without the new experiments
(held_at_start), so the configuration it runs is their baseline, measured at no restart of its own: k new
experiments take k restarts to measure, k + 1 with the deploy's, and one more to what is kept only where the last
one decided is not kept. So they go riskiest first (decision_order: the reverse of experiment_data.py's order,
tuning options after the gates), and what is not kept comes off at once, so that the chain always runs what is kept.
plan_step() replays the decisions from the measurements known so far, so the role keeps no state but those.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_data import (
    in_step_order,
    knob_of as steps_by_knob,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import (
    KEPT,
    NO_GAIN,
    REJECTED,
    SUPERSEDED,
    UNTRIED,
    ExperimentError,
    config_key,
    settings_of,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_verdicts import (
    decided_verdict,
    experiment_verdict,
    remembered_verdict,
    stopped_verdict,
    superseded_verdict,
    untried_verdict,
)


def experiment_rounds(experiments):
    """The rounds the role's loop gives the plan (roles/experiments/tasks/main.yml): k experiments need at most
    k + 1 configurations besides the deployed one (the start and each experiment on top of what came before, every
    one rejected in the worst case), and one round more finds the plan done."""
    if isinstance(experiments, (str, bytes)) or not hasattr(experiments, "__len__"):
        raise ExperimentError("the experiments must be a list of names, got %r" % (experiments,))
    return len(experiments) + 2


def plan_step(experiments, measurements, settings, remembered=None, stored_baseline=None, deployed=None, knobs=None):
    """What to measure next, or, once every experiment is decided, what to keep.

    ``experiments``: the run's new experiments, in the order to decide them;
    ``measurements``: config_key -> measurement, every configuration measured so
    far (the key of the baseline is that of the remembered kept ones, '' without);
    ``remembered``: name -> a verdict kept for this configuration on the
    controller, applied without measuring; ``stored_baseline``: the host's last
    kept measurement, the baseline when its configuration is the one the
    decisions start from; ``deployed``: the experiments the server ran as the
    decisions began (measured at no restart of their own), every one when not
    given, none of the new ones where the deploy held them back
    (held_at_start); ``knobs``: the stepped knobs (knob -> its steps in
    order, experiment_data.stepped), whose steps are searched one at a time.
    Returns {"done": false, "measure": [names]} or {"done": true, "keep":
    [names], "verdicts": [...], "measured": n, "baseline_reused": bool,
    "restarts": n, "restart_budget": n, "untried": [names the budget left],
    "stopped": [steps after a step that did not pay]}.
    """
    settings = settings_of(settings)
    remembered = {name: verdict for name, verdict in (remembered or {}).items() if name in experiments}
    for name, verdict in remembered.items():
        if not isinstance(verdict, Mapping) or verdict.get("decision") not in (KEPT, REJECTED, NO_GAIN, SUPERSEDED):
            raise ExperimentError("the remembered verdict of %s has no decision: %r; delete it from the verdict "
                                  "file to measure it again" % (name, verdict))
    verdicts, superseded = {}, {}
    knob_of = steps_by_knob(knobs)
    experiments = in_step_order(experiments, knobs)
    # What the decisions start from: the experiments kept on record. Of a stepped knob, its highest step that paid:
    # one remembered as superseded counts where the step that superseded it is not among them (not asked for, or
    # retried), and a lower step remembered as kept is superseded by a higher one.
    paid = [name for name in experiments if remembered.get(name, {}).get("decision") in (KEPT, SUPERSEDED)]
    start = [name for name in _one_step_each(paid, knob_of)
             if remembered[name]["decision"] == KEPT or name in knob_of]
    for name in paid:
        if name in knob_of and name not in start and remembered[name]["decision"] == KEPT:
            later = [step for step in start if knob_of.get(step) == knob_of[name]][0]
            superseded[name] = superseded_verdict(name, remembered[name], later)
    revived = {name: decided_verdict(name, remembered[name], KEPT, (
        "kept: superseded on record by %s, which this run does not run, so it is its knob's step kept (as measured: "
        "%s)" % (remembered[name].get("superseded_by") or "a later step", remembered[name].get("reason", ""))))
        for name in start if remembered[name]["decision"] == SUPERSEDED}
    kept_step = {knob_of[name]: name for name in start if name in knob_of}
    pending = [name for name in experiments if name not in remembered]
    measurements = dict(measurements)
    reused = (isinstance(stored_baseline, Mapping) and isinstance(stored_baseline.get("loads"), Mapping)
              and config_key(stored_baseline.get("config") or []) == config_key(start)
              and config_key(start) not in measurements and bool(pending))
    if reused:
        measurements[config_key(start)] = stored_baseline

    # The restarts the measurements took: every configuration measured but the one deployed (measured as it runs)
    # and a stored baseline (measured by an earlier run).
    budget = settings["restart_budget"]
    deployed_key = config_key(experiments if deployed is None else deployed)
    spent = len([key for key in measurements if key != deployed_key]) - int(reused)

    def missing(*configs):
        """The first of the configurations not measured yet, or None where every one is."""
        return next((sorted(config) for config in configs if config_key(config) not in measurements), None)

    # The chain: each experiment on top of the configuration before it. What is kept stays on; what is rejected
    # comes off at once. What has no measurable gain stays on for the next one only where the server as deployed
    # ran it (it changes nothing measurable, and the chain may then end on the deployed configuration, measured at
    # no restart); otherwise it comes off at once too, so that the chain runs what is kept.
    deployed_names = set(experiments if deployed is None else deployed)
    current, keep = list(start), list(start)

    # A step of a stepped knob goes in place of the knob's step on before it, and only where that step paid (kept,
    # or superseded by a later one that did): the first step that does not pay ends the knob's search. The search
    # goes up from the knob's step kept on record: a step below it is not tried.
    def decision_of(name):
        found = superseded.get(name) or verdicts.get(name) or revived.get(name) or remembered.get(name) or {}
        return found.get("decision"), found.get("stopped_at")

    spent_out = False
    for name in pending:
        knob = knob_of.get(name)
        steps = [step for step in experiments if knob and knob_of.get(step) == knob]
        if knob in kept_step and steps.index(name) < steps.index(kept_step[knob]):
            verdicts[name] = stopped_verdict(name, knob, kept_step[knob], KEPT, below=True)
            continue
        before = steps[:steps.index(name)] if knob else []
        if before:
            decision, stopped_at = decision_of(before[-1])
            if decision == UNTRIED and not stopped_at:
                verdicts[name] = untried_verdict(name, budget)
                continue
            if decision not in (KEPT, SUPERSEDED):
                at = stopped_at or before[-1]
                verdicts[name] = stopped_verdict(name, knob, at, decision_of(at)[0])
                continue
        if spent_out:
            verdicts[name] = untried_verdict(name, budget)
            continue
        siblings = [step for step in current if knob and knob_of.get(step) == knob]
        with_it = [step for step in current if step not in siblings] + [name]
        wanted = missing(current, with_it)
        if wanted is not None and budget is not None and spent >= budget:
            spent_out = True
            verdicts[name] = untried_verdict(name, budget)
            continue
        if wanted is not None:
            return {"done": False, "measure": wanted}
        verdicts[name] = experiment_verdict(name, measurements[config_key(current)], measurements[config_key(with_it)],
                                            settings)
        if siblings:
            # Judged against the knob's step kept before it, which stays where it is not kept: a step that loses
            # ends the search, it does not roll a regression back (run_verdict).
            verdicts[name]["in_place_of"] = siblings[0]
        decision = verdicts[name]["decision"]
        if decision == KEPT:
            current = [step for step in current if step not in siblings] + [name]
            keep = [step for step in keep if step not in siblings] + [name]
            for step in siblings:
                superseded[step] = superseded_verdict(
                    step, verdicts.get(step) or revived.get(step) or remembered[step], name)
        elif decision == NO_GAIN and name in deployed_names and not knob:
            current = current + [name]

    def final(name):
        if name in superseded:
            return superseded[name]
        if name in revived:
            return revived[name]
        return remembered_verdict(name, remembered[name]) if name in remembered else dict(verdicts[name], remembered=False)

    ordered = [final(name) for name in experiments]
    return {"done": True, "keep": sorted(keep), "verdicts": ordered, "measured": len(measurements) - int(reused),
            "baseline_reused": reused, "restarts": spent, "restart_budget": budget,
            "untried": [verdict["experiment"] for verdict in ordered
                        if verdict["decision"] == UNTRIED and not verdict.get("stopped_at")],
            "stopped": [verdict["experiment"] for verdict in ordered if verdict.get("stopped_at")]}


def _one_step_each(names, knob_of):
    """``names`` with, of each stepped knob, its last step only (knob_of: step -> knob; names in step order)."""
    last = {knob_of[name]: name for name in names if name in knob_of}
    return [name for name in names if name not in knob_of or last[knob_of[name]] == name]


def decision_order(experiments, deployed, knobs=None):
    """The order to decide the experiments in: ``experiments`` in order of risk, least risky first
    (experiment_data.experiments_among), where the server as deployed runs them all; the riskiest first where the
    deploy held some back. Then the server starts on the baseline and each experiment is measured on top of what was
    kept before it, so the restart back to what is kept is needed only where the last one decided is not kept: the
    least risky last makes that the least likely (and a rejection decided first is off before anything else is
    measured). With all of them deployed, the riskiest goes last, decided against the set's own measurement as
    deployed. The steps of a stepped knob (``knobs``) go up in the knob's order either way."""
    experiments = list(experiments or [])
    deployed = set(experiments if deployed is None else deployed)
    if all(name in deployed for name in experiments):
        return in_step_order(experiments, knobs)
    return in_step_order(list(reversed(experiments)), knobs)


def _tags(name, tags):
    if isinstance(tags, (str, bytes)) or not isinstance(tags, (list, tuple)):
        raise ExperimentError("%s must be a list of tags, got %r" % (name, tags))
    return {str(tag) for tag in tags}


def smoke_named(run_tags):
    """Whether the smoke phase was asked for by name (C(--tags smoke): ansible_run_tags holds smoke)."""
    return "smoke" in _tags("ansible_run_tags", run_tags)


def smoke_decides(run_tags, skip_tags, experiments_on):
    """Whether this run's smoke test decides experiments: they are on (experiments_enabled) and the smoke phase
    runs (ansible_run_tags holds all, tagged or smoke; ansible_skip_tags does not hold smoke). Not in check mode's
    sense: a check shows what the run would do, so it holds back what the run would."""
    if not isinstance(experiments_on, bool):
        raise ExperimentError("experiments_enabled must be true or false, got %r" % (experiments_on,))
    runs = smoke_named(run_tags) or bool({"all", "tagged"} & _tags("ansible_run_tags", run_tags))
    return experiments_on and runs and "smoke" not in _tags("ansible_skip_tags", skip_tags)


def held_at_start(wanted, live_before, decided, knobs=None):
    """The experiments a deploy starts the server without, for the smoke test to add one at a time.

    ``wanted``: the experiments asked for and not turned off on record; ``live_before``: those the server ran before
    this run; ``decided``: whether this run's smoke test decides experiments (smoke_decides). A new one (wanted, not
    live before) waits off: the server starts on the decisions' first configuration, their baseline, which the smoke
    test measures as deployed, so that k new experiments cost k + 1 restarts with the deploy's own (k where the
    host's baseline is stored) instead of a start with everything on and the baseline after it. One live before
    stays on: an earlier run kept it, or decides it now against the configuration without it. Where no smoke test
    decides, nothing waits: what is asked for runs, but for the steps of a stepped knob (``knobs``) beside the one
    the server ran before (a step a search left untried, or a deploy that does not search: --tags service, the
    upgrade canary's put-back), since one step runs at a time.
    """
    for name, value in (("wanted", wanted), ("live_before", live_before)):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ExperimentError("the %s experiments must be a list of names, got %r" % (name, value))
    before = set(live_before)
    if decided:
        return [name for name in wanted if name not in before]
    knob_of = steps_by_knob(knobs)
    running = {knob_of[name] for name in wanted if name in knob_of and name in before}
    return [name for name in wanted if knob_of.get(name) in running and name not in before]

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One experiment's verdict, and the verdicts the plan gives without measuring. Pure.

experiment_verdict: wrong output, a capped load, a regression at any load or a broken objective rejects it; a gain
at one load or more, and none lost, keeps it; otherwise the shipped behaviour stays (it is turned off) and the
verdict says "no measurable gain", or that a load was too noisy for the goal to decide. The others: untried (the
restart budget was spent), stopped (a stepped knob's search ended before it), superseded (a later step paid on top
of it), decided and remembered (taken from an earlier run's verdict).
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils.cause_verdict import UNKNOWN, result_host_verdict
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_compare import (
    CAP_BOUND,
    capped_loads,
    compare_load,
    describe_cap,
    describe_load,
    describe_miss,
    loads_of,
    objective_against,
    parity_check,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import (
    GAIN,
    KEPT,
    NO_GAIN,
    REGRESSION,
    REJECTED,
    SUPERSEDED,
    UNTRIED,
    settings_of,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import number


def _cause(measurement, loads):
    """The host's cause verdict of a measurement: its highest load's median run."""
    for load in reversed(loads):
        runs = measurement["loads"].get(load) or []
        usable = [run for run in runs if isinstance(run, Mapping) and number(run.get("output_tokens_per_s")) is not None]
        if usable:
            middle = sorted(usable, key=lambda run: number(run["output_tokens_per_s"]))[len(usable) // 2]
            return result_host_verdict(middle)
    return {"verdict": UNKNOWN, "explanation": ""}


def experiment_verdict(name, baseline, candidate, settings):
    """Keep, reject or leave off (no measurable gain) one experiment, from two measurements that differ by it."""
    settings = settings_of(settings)
    loads = loads_of(baseline, settings, "the baseline of %s" % name)
    loads_of(candidate, settings, "the measurement with %s" % name)
    by_load = {load: compare_load(baseline["loads"].get(load), candidate["loads"].get(load), settings,
                                  "%s (%s)" % (load, name))
               for load in loads}
    parity = parity_check(baseline.get("parity") or [], candidate.get("parity") or [], settings["parity_min_match"],
                          settings["parity_min_prefix"], settings["parity_tie_nats"])
    cause = _cause(candidate, loads)
    regressed = [load for load in loads if by_load[load]["verdict"] == REGRESSION]
    gained = [load for load in loads if by_load[load]["verdict"] == GAIN]
    objective = objective_against(baseline, candidate, settings["slo"], loads)
    broken = objective["broken"]
    capped_before = {cap["load"] for cap in capped_loads(baseline, settings["concurrency"], loads)}
    capped = [cap for cap in capped_loads(candidate, settings["concurrency"], loads) if cap["load"] not in capped_before]
    if not parity["ok"]:
        decision, reason = REJECTED, ("wrong output: %d of %d prompts agree with the baseline on at least their "
                                      "first %.0f %% or part from it at a near-tie (%.0f %% of the prompts needed)"
                                      % (parity["matched"], parity["total"], parity["min_prefix"] * 100,
                                         parity["min_match"] * 100))
    elif capped:
        decision, reason = REJECTED, (
            "the server capped the requests it runs at once below the load (%s, from its /server_info), so the rest "
            "queue and the load is not measured as asked. %s; an option that turns speculative decoding on takes "
            "max_running_requests: highest_load in its data/experiments.yml entry"
            % ("; ".join(describe_cap(cap) for cap in capped), CAP_BOUND))
    elif regressed:
        decision, reason = REJECTED, "slower at load %s" % ", ".join(regressed)
    elif broken:
        decision, reason = REJECTED, "breaks the latency objective: %s" % "; ".join(
            describe_miss(miss) for miss in broken)
    elif gained:
        decision, reason = KEPT, "faster at load %s" % ", ".join(gained)
    else:
        undecided = [load for load in loads if not by_load[load]["decided"]]
        decision, reason = NO_GAIN, ("not decided at load %s (too noisy for the goal): the shipped behaviour stays"
                                     % ", ".join(undecided) if undecided
                                     else "no measurable gain at any load: the shipped behaviour stays")
    figures = "; ".join("%s %s: %.1f against %.1f output tok/s, CV %.1f %%" % (
        load, describe_load(by_load[load]), by_load[load]["candidate"]["median"], by_load[load]["baseline"]["median"],
        by_load[load]["cv"] * 100) for load in loads)
    message = "%s %s, %s. %s" % (name, decision, reason, figures)
    if objective["shared"]:
        message += ". Missed with and without it: %s" % "; ".join(describe_miss(miss) for miss in objective["shared"])
    if cause["verdict"] != UNKNOWN and decision == REJECTED:
        message += ". With it: %s" % cause["explanation"].rstrip(".")
    return {"experiment": name, "decision": decision, "reason": reason, "loads": by_load, "parity": parity,
            "capped": capped, "cause": cause["verdict"], "baseline_config": list(baseline.get("config") or []),
            "candidate_config": list(candidate.get("config") or []),
            "objective": {key: objective[key] for key in ("misses", "baseline_misses", "broken")},
            "message": message + "."}


def untried_verdict(name, budget):
    """The verdict of an experiment the restart budget left no restart for: off this run, measured by the next."""
    reason = ("the restart budget of %d was spent before it could be measured (experiments_restart_budget): it stays "
              "off this run, and the next run measures it" % budget)
    return {"experiment": name, "decision": UNTRIED, "reason": reason, "loads": {}, "parity": {}, "cause": UNKNOWN,
            "baseline_config": [], "candidate_config": [], "objective": {"misses": [], "baseline_misses": [],
                                                                         "broken": []},
            "message": "%s %s, %s." % (name, UNTRIED, reason)}


def stopped_verdict(name, knob, step, decision, below=False):
    """The verdict of a step of a stepped knob after one that did not pay, or below the knob's step kept on record:
    not tried, at no restart, and recorded as turned off (so no later deploy runs it beside the step kept)."""
    if below:
        reason = ("not tried: below %s, the step of the stepped knob %s kept on record, and the search goes up from "
                  "the step kept; it stays off, recorded as turned off. To search the knob from its first step, set "
                  "experiments_retry: [%s] and sglang_service_tuning_retry_rejected: true" % (
                      step, knob, step))
    else:
        reason = ("not tried: the search of the stepped knob %s stopped at %s (%s), and a step is tried only where "
                  "the one before it paid; it stays off, recorded as turned off. To search again, set "
                  "experiments_retry: [%s] and sglang_service_tuning_retry_rejected: true" % (
                      knob, step, decision or "not decided", step))
    return decided_verdict(name, untried_verdict(name, 0), UNTRIED, reason, stopped_at=step)


def superseded_verdict(name, verdict, by):
    """A kept step of a stepped knob, replaced by the next step, which paid on top of it."""
    reason = ("kept, then replaced by the next step of its knob, %s, which paid on top of it: one step of a knob "
              "runs at a time (as measured: %s)" % (by, verdict.get("reason", "")))
    return decided_verdict(name, verdict, SUPERSEDED, reason, superseded_by=by)


def decided_verdict(name, verdict, decision, reason, **fields):
    """``verdict`` as this run decides it: its decision, its reason and the sentence the reports show."""
    return dict(verdict, experiment=name, decision=decision, reason=reason, remembered=False,
                message="%s %s, %s." % (name, decision, reason), **fields)


def remembered_verdict(name, verdict):
    """A verdict kept from an earlier measurement of the configuration, with the sentence the reports show."""
    return dict(verdict, experiment=name, remembered=True, message="%s %s, %s: kept from %s's measurement in run %s." % (
        name, verdict["decision"], verdict.get("reason", "no reason recorded"), verdict.get("host", "another host"),
        verdict.get("run_id", "?")))

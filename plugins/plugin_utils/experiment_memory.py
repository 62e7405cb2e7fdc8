# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts kept across hosts and runs, and what is recorded on a host as turned off. Pure.

The controller's memory holds each measured verdict under the key of what it holds for (release, TP size,
topology, GPU model, loads): a twin of the canary or a rerun takes it instead of measuring again. rejections() is
what the patch role and the service record on the host, so that the next deploy keeps it off until retried, and
rejected_record() the record each of them writes: the one place the record and this run's rejections are merged.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils.cause_verdict import UNKNOWN
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import (
    KEPT,
    UNTRIED,
    ExperimentError,
    check_slo,
    slo_of,
)


def memory_key(release, tp_size, topology, gpu_model, loads):
    """The configuration a verdict holds for: release, TP size, topology, GPU model and the loads measured."""
    parts = [release, tp_size, topology, gpu_model]
    if any(part in (None, "") for part in parts):
        raise ExperimentError("a verdict is kept per release, TP size, topology and GPU model; got %r" % (parts,))
    if not isinstance(loads, Mapping) or not loads:
        raise ExperimentError("a verdict is kept per load; the loads are %r" % (loads,))
    # The objective is part of what a verdict holds for (a bound changes what is kept); a load without one keeps
    # the key it had before objectives existed.

    def one(name):
        figures = "/".join(str(loads[name].get(field, "")) for field in
                           ("concurrency", "num_requests", "input_tokens", "output_tokens"))
        bounds = sorted(check_slo(slo_of({name: loads[name]})).get(name, {}).items())
        return "%s=%s%s" % (name, figures, "".join(" %s<=%g" % (field, bound) for field, bound in bounds))

    signature = ",".join(one(name) for name in sorted(loads))
    return "sglang %s | TP %s | %s | %s | %s" % (release, tp_size, topology, gpu_model, signature)


def remembered_verdicts(memory, key, retry=()):
    """name -> verdict kept for this configuration, less those asked to be measured again."""
    entry = (memory or {}).get(key) or {}
    if not isinstance(entry, Mapping):
        raise ExperimentError("the verdict file's entry %r is not a mapping of experiment to verdict" % key)
    return {name: verdict for name, verdict in entry.items() if name not in set(retry or ())}


def _load_kept(figures):
    """One load's verdict as the memory keeps it; a load the run could not decide says so, with its goal and the
    runs a side that would decide it, as the reports do (its decision is the same: the shipped behaviour stays)."""
    kept = {"verdict": figures["verdict"], "change": figures["change"], "band": figures["band"]}
    if figures.get("decided") is False:
        kept.update(decided=False, goal=figures.get("goal"), more_runs=figures.get("more_runs"))
    return kept


def remember(memory, key, verdicts, host, run_id):
    """The memory with this run's measured verdicts added under key (remembered ones unchanged)."""
    updated = {name: dict(entry) for name, entry in (memory or {}).items()}
    entry = dict(updated.get(key) or {})
    for verdict in verdicts:
        if verdict.get("remembered") or verdict.get("decision") == UNTRIED:
            continue
        entry[verdict["experiment"]] = {
            "decision": verdict["decision"], "reason": verdict["reason"], "cause": verdict.get("cause", UNKNOWN),
            "loads": {load: _load_kept(figures) for load, figures in verdict.get("loads", {}).items()},
            "parity": {field: verdict.get("parity", {}).get(field) for field in ("matched", "total")},
            "host": host, "run_id": run_id}
        # A stepped knob's: the step that superseded it (a later run revives it where that step is not asked for),
        # and the step it was judged against.
        entry[verdict["experiment"]].update({field: verdict[field] for field in ("superseded_by", "in_place_of")
                                             if verdict.get(field)})
    updated[key] = entry
    return updated


def rejections(verdicts, tuning, run_id, at):
    """What the patch role and the service record as turned off: {gates: {...}, tuning: {...}}.

    Every experiment not kept, with its reason and run: the rejected ones,
    those with no measurable gain (the shipped behaviour stays), a step of a
    stepped knob superseded by a later one and the steps a search stopped short
    of, so that the next deploy does not turn them on again until retried. An
    untried one (the restart budget ran out) is not recorded: the next run
    measures it.
    """
    found = {"gates": {}, "tuning": {}}
    for verdict in verdicts or []:
        if verdict.get("decision") == KEPT or (verdict.get("decision") == UNTRIED and not verdict.get("stopped_at")):
            continue
        kind = "tuning" if verdict["experiment"] in set(tuning or ()) else "gates"
        found[kind][verdict["experiment"]] = {
            "reason": "smoke test %s: %s, %s" % (run_id, verdict["decision"], verdict.get("reason", "")),
            "rejected_at": at, "run_id": run_id}
    return found


def rejected_record(recorded, rejected_now, retry):
    """What a host records as turned off after this run, for the patch role (gates) and the service (tuning options)
    alike: the record read from the host, or nothing where the user retries what it holds, with this run's
    rejections (those of rejections(), or given by hand) over it. Each name maps to {reason, rejected_at, run_id}.

    ``retry`` must be a boolean: a string such as "false" would read as true and forget every rejection.
    """
    if not isinstance(retry, bool):
        raise ExperimentError("retrying the rejected experiments is true or false, got %r" % (retry,))
    for what, value in (("the record of rejected experiments", recorded), ("this run's rejections", rejected_now)):
        if value is not None and not isinstance(value, Mapping):
            raise ExperimentError("%s maps each name to its reason, got %r" % (what, value))
    record = {} if retry else dict(recorded or {})
    record.update(rejected_now or {})
    return record


def remember_runs(memory, runs, run_id):
    """The memory with the measured verdicts of every host's run ({host, memory_key, verdicts}) added."""
    for run in runs or []:
        if isinstance(run, Mapping) and run.get("verdicts"):
            memory = remember(memory, run["memory_key"], run["verdicts"], run.get("host", "?"), run_id)
    return memory or {}

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The experiments' vocabulary and settings. Pure.

The decisions an experiment can get (kept, rejected, no measurable gain, untried, superseded) and the verdicts of one
load (gain, no measurable change, regression); the checked settings (tolerance, noise multiple, resolution goal,
parity, restart budget, the loads and their latency objectives) and the key of a configuration. Every other
experiment_* module reads them from here.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import number


KEPT = "kept"
REJECTED = "rejected"
NO_GAIN = "no measurable gain"
# Not measured: the run's restart budget was spent first. Off for this run (the shipped behaviour), neither recorded
# as turned off nor remembered, so the next run measures it. Or the search of its stepped knob stopped at a step
# before it that did not pay (``stopped_at``): recorded as turned off, not remembered (the step before is).
UNTRIED = "untried"
# A step of a stepped knob kept, then replaced by the next step, which paid on top of it: one step runs at a time.
# Recorded as turned off and remembered; the search goes on past it.
SUPERSEDED = "superseded"
GAIN, NEUTRAL, REGRESSION = "gain", "no measurable change", "regression"
DEFAULTS = {"tolerance": 0.03, "noise_multiple": 3.0, "parity_min_match": 1.0, "parity_min_prefix": 0.25,
            "parity_tie_nats": 0.5, "restart_budget": None, "resolution": 0.10}


# The experiments role's arguments were named after the smoke test before the experiments had their own role
# (issue 39). The old names are still read for one release, through a default() chain in
# roles/experiments/defaults/main.yml, and each one set warns (deprecated_names_in_use). New name -> old name.
DEPRECATED_NAMES = {
    "experiments_enabled": "smoke_test_experiments",
    "experiments_retry": "smoke_test_experiments_retry",
    "experiments_tolerance": "smoke_test_experiment_tolerance",
    "experiments_noise_multiple": "smoke_test_experiment_noise_multiple",
    "experiments_resolution": "smoke_test_experiment_resolution",
    "experiments_restart_budget": "smoke_test_restart_budget",
    "experiments_parity_min_match": "smoke_test_parity_min_match",
    "experiments_parity_min_prefix": "smoke_test_parity_min_prefix",
    "experiments_power_limit_steps_w": "smoke_test_power_limit_steps_w",
    "experiments_nvidia_smi": "smoke_test_nvidia_smi",
    "experiments_verdict_file": "smoke_test_verdict_file",
}
# The release that stops reading the old names.
DEPRECATED_NAMES_REMOVED_IN = "0.2.0"


def deprecated_names_in_use(defined):
    """One message per deprecated name among ``defined`` (the names of the variables set for the host, e.g.
    C(query('ansible.builtin.varnames', '^smoke_test_'))), in the order of DEPRECATED_NAMES, naming its new name.
    A host that sets the new name too gets the new one, and is told the old one is ignored."""
    defined = set(defined or [])
    messages = []
    for new, old in DEPRECATED_NAMES.items():
        if old not in defined:
            continue
        if new in defined:
            messages.append("%s is deprecated and ignored here, since %s is set too; remove %s (the old name is "
                            "no longer read from release %s)." % (old, new, old, DEPRECATED_NAMES_REMOVED_IN))
        else:
            messages.append("%s is deprecated: rename it %s, the experiments role's own argument (the old name "
                            "is no longer read from release %s)." % (old, new, DEPRECATED_NAMES_REMOVED_IN))
    return messages


class ExperimentError(ValueError):
    """A measurement or a setting cannot be used; the message names it and the fix."""


def settings_of(raw):
    """The checked settings: tolerance (0..<1), noise_multiple (>= 0), parity_min_match (0..1), loads.

    ``loads`` is a list of load names, lowest first, or the loads themselves (a mapping of name to
    {concurrency, ...}, as smoke_test_loads), ordered here by concurrency: the last is the highest, whose
    median run a verdict's cause is read from. A mapping's order is no guide: an inventory written by a tool
    (molecule's is) sorts its keys, and "high" sorts before "low".
    """
    raw = dict(raw or {})
    merged = dict(DEFAULTS, **{key: value for key, value in raw.items() if value is not None})
    tolerance = number(merged["tolerance"])
    if tolerance is None or not 0 <= tolerance < 1:
        raise ExperimentError("experiments_tolerance must be a fraction from 0 up to 1 (0.03 is 3 %%), "
                              "got %r" % (merged["tolerance"],))
    multiple = number(merged["noise_multiple"])
    if multiple is None or multiple < 0:
        raise ExperimentError("experiments_noise_multiple must be a number of 0 or more, got %r"
                              % (merged["noise_multiple"],))
    parity = number(merged["parity_min_match"])
    if parity is None or not 0 <= parity <= 1:
        raise ExperimentError("experiments_parity_min_match must be a fraction from 0 to 1 (1 is every prompt), "
                              "got %r" % (merged["parity_min_match"],))
    prefix = number(merged["parity_min_prefix"])
    if prefix is None or not 0 < prefix <= 1:
        raise ExperimentError("experiments_parity_min_prefix must be a fraction above 0 up to 1 (1 is the whole text, "
                              "token-exact), got %r" % (merged["parity_min_prefix"],))
    tie = merged["parity_tie_nats"]
    if isinstance(tie, bool) or number(tie) is None or number(tie) < 0:
        raise ExperimentError("experiments_parity_tie_nats must be a number of nats, 0 or more (0.5: two tokens "
                              "whose logprobs differ by at most half a nat are a near-tie; 0: no ties), got %r"
                              % (tie,))
    resolution = merged["resolution"]
    if isinstance(resolution, bool) or number(resolution) is None or not 0 <= number(resolution) < 1:
        raise ExperimentError("experiments_resolution must be a fraction from 0 up to 1 (0.10: a verdict "
                              "must see a change of 10 %%; 0: no goal), got %r" % (resolution,))
    resolution = number(resolution) or None
    budget = merged["restart_budget"]
    if budget is not None and (isinstance(budget, bool) or number(budget) is None or number(budget) < 0
                               or number(budget) != int(number(budget))):
        raise ExperimentError("experiments_restart_budget must be a whole number of restarts, 0 or more (null: no "
                              "bound), got %r" % (budget,))
    loads, slo, concurrency = merged.get("loads") or [], merged.get("slo"), merged.get("concurrency") or {}
    if isinstance(loads, Mapping):
        slo = slo if slo is not None else slo_of(loads)
        concurrency = {name: int(number(load["concurrency"])) for name, load in loads.items()}
        loads = loads_by_concurrency(loads)
    if isinstance(loads, (str, bytes)) or not all(isinstance(name, str) for name in loads):
        raise ExperimentError("the loads to compare must be a list of load names, lowest first, or the loads "
                              "themselves (smoke_test_loads), got %r" % (loads,))
    return {"tolerance": tolerance, "noise_multiple": multiple, "parity_min_match": parity,
            "parity_min_prefix": prefix, "parity_tie_nats": number(tie), "loads": list(loads), "slo": check_slo(slo or {}),
            "restart_budget": None if budget is None else int(number(budget)), "concurrency": dict(concurrency),
            "resolution": resolution}


def config_key(names):
    """The key of a configuration: its live experiments, sorted, joined by '+'; '' for none."""
    return "+".join(sorted(set(names)))


# What a load's objective may bound: the p99 of time to first token and of inter-token latency, in ms. The one
# table of their names: in serving_benchmark's result (ttft_ms.p99, itl_ms.p99), in bench_serving's records
# (p99_ttft_ms, p99_itl_ms; bench_record), in words (the verdicts) and in the reports' tables (smoke_report).
SLO_FIELDS = {"ttft_p99_ms": {"result": "ttft_ms", "record": "p99_ttft_ms", "what": "p99 time to first token",
                              "short": "TTFT p99"},
              "itl_p99_ms": {"result": "itl_ms", "record": "p99_itl_ms", "what": "p99 inter-token latency",
                             "short": "ITL p99"}}


def slo_of(loads):
    """load name -> its objective ({ttft_p99_ms, itl_p99_ms}), from the loads of the profile (each load's ``slo``)."""
    return {name: load["slo"] for name, load in (loads or {}).items()
            if isinstance(load, Mapping) and load.get("slo") is not None}


def check_slo(slo):
    """The objectives, checked: each a mapping of SLO_FIELDS to a number of milliseconds above 0."""
    if not isinstance(slo, Mapping):
        raise ExperimentError("the latency objectives must map each load to {ttft_p99_ms, itl_p99_ms}; got %r" % (slo,))
    checked = {}
    for load, objective in slo.items():
        if not isinstance(objective, Mapping) or not objective:
            raise ExperimentError("the objective (slo) of load %s must be a mapping with ttft_p99_ms and/or "
                                  "itl_p99_ms in ms, e.g. {ttft_p99_ms: 2000, itl_p99_ms: 50}; got %r" % (load, objective))
        unknown = sorted(set(objective) - set(SLO_FIELDS))
        if unknown:
            raise ExperimentError("the objective (slo) of load %s has %s, which is not one of %s: write the p99 "
                                  "bounds in ms under those names"
                                  % (load, ", ".join(unknown), ", ".join(sorted(SLO_FIELDS))))
        bounds = {}
        for field, value in objective.items():
            bound = number(value)
            if bound is None or bound <= 0:
                raise ExperimentError("the objective (slo) of load %s has %s = %r: give a number of milliseconds "
                                      "above 0" % (load, field, value))
            bounds[field] = bound
        checked[str(load)] = bounds
    return checked


def loads_by_concurrency(loads):
    """The names of ``loads`` (smoke_test_loads), lowest concurrency first, ties by name."""
    check_loads(loads)
    return sorted(loads, key=lambda name: (number(loads[name]["concurrency"]), name))


def check_loads(loads):
    if not isinstance(loads, Mapping) or not loads:
        raise ExperimentError("smoke_test_loads must name at least one load: name -> {concurrency, num_requests, "
                              "input_tokens, output_tokens}; got %r" % (loads,))
    for name, load in loads.items():
        if not isinstance(load, Mapping) or any(number(load.get(field)) is None or number(load.get(field)) < 1
                                                for field in ("concurrency", "num_requests", "input_tokens",
                                                              "output_tokens")):
            raise ExperimentError("smoke_test_loads: load %s needs concurrency, num_requests, input_tokens and "
                                  "output_tokens, each 1 or more; got %r" % (name, load))
    check_slo(slo_of(loads))

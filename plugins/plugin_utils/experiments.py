# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Experiments: each new gate or tuning option decided alone, by repeated measurement at several loads. Pure.

roles/experiments switches the server between configurations (which of the run's
experiments are live), has roles/smoke_test measure each, and asks plan_step() what
to measure next, until it says what to keep. A measurement of one configuration is

    {"config": [names live], "loads": {load: [serving_benchmark result, ...]}, "parity": [text, ...]}

with every load of the profile repeated, and the outputs of fixed prompts at
temperature 0. An experiment is compared with the configuration it was added to:

- at each load, the medians of the repeats; the band is the larger of the
  configured tolerance and ``noise_multiple`` times the larger measured spread
  (max - min over median); above it a gain, below it a regression, inside it
  no measurable gain. A verdict may differ by load, and each is kept;
- the parity check: the outputs against those of the configuration without it,
  prompt by prompt; a prompt agrees where the candidate's text begins with at least
  ``parity_min_prefix`` of the baseline's (a real server is not token-exact across
  restarts, see parity_check); fewer agreeing prompts than the minimum fraction is
  wrong output;
- the latency objective: a load may bound the p99 time to first token and the
  p99 inter-token latency (its ``slo``); a bound the baseline met and the
  candidate misses breaks the objective (one the baseline misses too is
  reported, not held against the candidate);
- the server's own bound: a load of more concurrent requests than the server
  says it runs at once (its /server_info, after each run) was not measured as
  asked, since the rest queued (SGLang's silent 48 with speculative decoding);
- wrong output, a capped load, a regression at any load or a broken objective rejects it; a
  gain at one load or more, and none lost, keeps it; otherwise the shipped
  behaviour stays (it is turned off) and the verdict says "no measurable gain".

The search: experiments are decided one after the other, each on top of the
configuration before it (what was kept, and what had no measurable gain, which
stays on until the end since it changes nothing measurable; a rejected one comes
off at once). Where the whole set regressed, this finds the culprit, and it
decides every other experiment of the set on its own as well, which a binary
bisection would not. The deploy starts the server without the new
experiments (held_at_start), so the configuration it runs is their baseline,
measured at no restart of its own: k new experiments take k restarts to measure,
k + 1 with the deploy's, and one more to what is kept only where the last one
decided is not kept. So they go riskiest first (decision_order: the reverse of
experiment_data.py's order, tuning options after the gates), and what is not
kept comes off at once, so that the chain always runs what is kept. plan_step() replays the decisions
from the measurements known so far, so the role keeps no state but those.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import noise_band
from ansible_collections.sm120.sglang.plugins.plugin_utils.cause_verdict import UNKNOWN, result_host_verdict
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_data import in_step_order, knob_of as steps_by_knob
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
            "restart_budget": None, "resolution": 0.10}


class ExperimentError(ValueError):
    """A measurement or a setting cannot be used; the message names it and the fix."""


# ------------------------------------------------------------------ settings and keys

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
        raise ExperimentError("smoke_test_experiment_tolerance must be a fraction from 0 up to 1 (0.03 is 3 %%), "
                              "got %r" % (merged["tolerance"],))
    multiple = number(merged["noise_multiple"])
    if multiple is None or multiple < 0:
        raise ExperimentError("smoke_test_experiment_noise_multiple must be a number of 0 or more, got %r"
                              % (merged["noise_multiple"],))
    parity = number(merged["parity_min_match"])
    if parity is None or not 0 <= parity <= 1:
        raise ExperimentError("smoke_test_parity_min_match must be a fraction from 0 to 1 (1 is every prompt), "
                              "got %r" % (merged["parity_min_match"],))
    prefix = number(merged["parity_min_prefix"])
    if prefix is None or not 0 < prefix <= 1:
        raise ExperimentError("smoke_test_parity_min_prefix must be a fraction above 0 up to 1 (1 is the whole text, "
                              "token-exact), got %r" % (merged["parity_min_prefix"],))
    resolution = merged["resolution"]
    if isinstance(resolution, bool) or number(resolution) is None or not 0 <= number(resolution) < 1:
        raise ExperimentError("smoke_test_experiment_resolution must be a fraction from 0 up to 1 (0.10: a verdict "
                              "must see a change of 10 %%; 0: no goal), got %r" % (resolution,))
    resolution = number(resolution) or None
    budget = merged["restart_budget"]
    if budget is not None and (isinstance(budget, bool) or number(budget) is None or number(budget) < 0
                               or number(budget) != int(number(budget))):
        raise ExperimentError("smoke_test_restart_budget must be a whole number of restarts, 0 or more (null: no "
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
            "parity_min_prefix": prefix, "loads": list(loads), "slo": check_slo(slo or {}),
            "restart_budget": None if budget is None else int(number(budget)), "concurrency": dict(concurrency),
            "resolution": resolution}


def config_key(names):
    """The key of a configuration: its live experiments, sorted, joined by '+'; '' for none."""
    return "+".join(sorted(set(names)))


# ------------------------------------------------------------------ one load, one parity check

def throughputs(results, where):
    """Output tok/s of each repeat; a result without it is an error naming where."""
    if not isinstance(results, (list, tuple)) or not results:
        raise ExperimentError("%s has no measurement to compare" % where)
    values = []
    for result in results:
        value = number(result.get("output_tokens_per_s")) if isinstance(result, Mapping) else None
        if value is None:
            raise ExperimentError("%s has a run without output_tokens_per_s: %r" % (where, result))
        values.append(value)
    return values


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def spread(values):
    """(max - min) / median of the repeats; 0 for one run."""
    centre = median(values)
    return (max(values) - min(values)) / centre if centre > 0 else 0.0


def summary(results, where="a measurement"):
    values = throughputs(results, where)
    return {"runs": [round(value, 1) for value in values], "median": round(median(values), 1),
            "spread": round(spread(values), 4)}


def compare_load(baseline_results, candidate_results, settings, load=""):
    """One load: the candidate's median against the baseline's, in a band set by the tolerance and the noise, and
    what this comparison could see.

    The band (plugin_utils/noise_band.py) is the larger of the tolerance and noise_multiple / 2 times the 95 %
    confidence half-width of the difference, from the runs' pooled coefficient of variation: it narrows as runs are
    added. The range rule before it ((max - min) / median of the repeats, times noise_multiple) could not: on 10
    real runs a load of one configuration on an H100 (docs/evidence/real-sglang-h100-2026-12-05.md) it called 10 to
    12 % of A/A pairs at c64 a change and saw a true x1.10 at c256 in 9 % of pairs. The band is what the verdict could
    see: "no measurable change" means within it. Where it is wider than the goal (settings' resolution, 0.10) and
    the change is inside it, the load is not decided (``decided`` false), and ``more_runs`` says how many runs a
    side would narrow the band to the goal at the measured noise (None: more than noise_band.MOST_RUNS, or a
    tolerance wider than the goal), ``more_s`` what they cost at the runs' own length.
    """
    settings = settings_of(settings)
    base = summary(baseline_results, "the baseline at load %s" % load)
    cand = summary(candidate_results, "the candidate at load %s" % load)
    noise = noise_band.band(base["runs"], cand["runs"], settings["tolerance"], settings["noise_multiple"])
    band = noise["band"]
    change = cand["median"] / max(base["median"], 0.001) - 1
    verdict = GAIN if change > band else REGRESSION if change < -band else NEUTRAL
    goal = settings["resolution"]
    decided = verdict != NEUTRAL or goal is None or band <= goal
    found = {"load": load, "verdict": verdict, "change": round(change, 4), "band": round(band, 4),
             "cv": round(noise["cv"], 4), "goal": goal, "decided": decided, "baseline": base, "candidate": cand}
    if not decided:
        runs = noise_band.runs_needed(noise["cv"], goal, settings["tolerance"], settings["noise_multiple"])
        have = min(len(base["runs"]), len(cand["runs"]))
        found["more_runs"] = None if runs is None else max(1, runs - have)
        lengths = [number(result.get("duration_s")) for result in list(baseline_results) + list(candidate_results)
                   if isinstance(result, Mapping) and number(result.get("duration_s")) is not None]
        found["more_s"] = (round(2 * found["more_runs"] * sum(lengths) / len(lengths))
                           if lengths and found["more_runs"] is not None else None)
    return found


def describe_load(figures):
    """One load's verdict as the messages say it: what it could see, and for a load not decided what would do."""
    band = figures["band"] * 100
    if figures["verdict"] != NEUTRAL:
        return "%s %+.1f %% (beyond ±%.1f %%)" % (figures["verdict"], figures["change"] * 100, band)
    if figures.get("decided", True):
        return "no measurable change, within ±%.1f %% (%+.1f %%)" % (band, figures["change"] * 100)
    seconds = " (%d s)" % figures["more_s"] if figures.get("more_s") is not None else ""
    more = ("about %d more runs a side%s" % (figures["more_runs"], seconds) if figures.get("more_runs") is not None
            else "more runs than %d a side" % noise_band.MOST_RUNS)
    return "not decided: within ±%.1f %% (%+.1f %%), the goal ±%.1f %% needs %s" % (
        band, figures["change"] * 100, figures["goal"] * 100, more)


def agreement(baseline, candidate):
    """The share of the baseline's text the candidate's begins with (1.0 when they are the same)."""
    baseline, candidate = str(baseline), str(candidate)
    if baseline == candidate:
        return 1.0
    common = 0
    for left, right in zip(baseline, candidate):
        if left != right:
            break
        common += 1
    return round(common / len(baseline), 4) if baseline else 0.0


def parity_check(baseline_outputs, candidate_outputs, min_match=1.0, min_prefix=1.0):
    """The outputs of fixed prompts at temperature 0 against the baseline's, prompt by prompt.

    A prompt agrees where the candidate's text begins with at least ``min_prefix`` of the baseline's (1.0:
    the same text). Why not the same text: a real SGLang server is not token-exact at temperature 0 across
    restarts of one configuration, nor always within one start. Greedy decoding follows the largest logit,
    and where two are nearly tied the order of a kernel's floating-point sums decides; Triton's autotuning,
    the batch a request lands in and the CUDA graph replayed change that order. On the H200 harness (a Llama
    of random weights, whose near-flat logits make it the hardest case) 3 of 4 prompts came out different
    after a restart of the same configuration, and 2 of 4 between two askings after it, each sharing its
    first 38 to 99 characters (0.41 to 0.74) with the first start's (docs/evidence/real-sglang-h200.md). A
    wrong-output bug, the FP8 KV cache of GLM-5 on SM120 or a gate that breaks a kernel, changes the text
    from its first token. So the default asks for the first quarter.
    """
    if not isinstance(baseline_outputs, (list, tuple)) or not isinstance(candidate_outputs, (list, tuple)):
        raise ExperimentError("the parity check needs the outputs of both configurations as lists of texts")
    if len(baseline_outputs) != len(candidate_outputs):
        raise ExperimentError("the parity check got %d outputs of the baseline and %d of the candidate: the same "
                              "prompts must be asked of both" % (len(baseline_outputs), len(candidate_outputs)))
    total = len(baseline_outputs)
    shares = [agreement(left, right) for left, right in zip(baseline_outputs, candidate_outputs)]
    mismatched = [index for index, share in enumerate(shares) if share < min_prefix]
    matched = total - len(mismatched)
    fraction = matched / total if total else 1.0
    result = {"ok": fraction >= min_match, "matched": matched, "total": total, "fraction": round(fraction, 4),
              "min_match": min_match, "min_prefix": min_prefix, "agreement": shares,
              "identical": sum(1 for share in shares if share == 1.0)}
    if mismatched:
        first = mismatched[0]
        result["first_mismatch"] = {"prompt": first, "agreement": shares[first],
                                    "baseline": str(baseline_outputs[first])[:80],
                                    "candidate": str(candidate_outputs[first])[:80]}
    return result


# ------------------------------------------------------------------ the latency objective

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


def latency_p99(results, field):
    """The median over the repeats of each run's p99 of ``field`` (ttft_ms or itl_ms); None where no run has it."""
    values = []
    for result in results or []:
        figures = result.get(field) if isinstance(result, Mapping) else None
        value = number(figures.get("p99")) if isinstance(figures, Mapping) else None
        if value is not None:
            values.append(value)
    return median(values) if values else None


def objective_misses(measurement, slo, loads):
    """Each bound of the objectives the measurement misses: [{load, field, value, bound}], lowest load first.

    A bound with no figure to judge it by (no run reported it) is a miss too, with value None: nothing is kept
    on a latency nobody measured.
    """
    misses = []
    for load in loads:
        for field, bound in sorted((slo or {}).get(load, {}).items()):
            value = latency_p99((measurement.get("loads") or {}).get(load), SLO_FIELDS[field]["result"])
            if value is None or value > bound:
                misses.append({"load": load, "field": field, "value": value, "bound": bound})
    return misses


def objective_against(baseline, candidate, slo, loads):
    """The objective of a candidate against its baseline: {misses, baseline_misses, broken, shared}.

    A configuration faster in tok/s that makes a user wait past the bound is not better. A miss the baseline has as
    well is not the candidate's doing (the host cannot meet that bound either way): only a bound the baseline met
    and the candidate misses is ``broken``; the misses both have are ``shared``, reported beside the verdict.
    """
    base_misses = objective_misses(baseline, slo, loads)
    cand_misses = objective_misses(candidate, slo, loads)
    missed_before = {(miss["load"], miss["field"]) for miss in base_misses}
    return {"misses": cand_misses, "baseline_misses": base_misses,
            "broken": [miss for miss in cand_misses if (miss["load"], miss["field"]) not in missed_before],
            "shared": [miss for miss in cand_misses if (miss["load"], miss["field"]) in missed_before]}


def describe_miss(miss):
    what = SLO_FIELDS[miss["field"]]["what"]
    if miss["value"] is None:
        return "%s %s not measured (objective %.0f ms)" % (miss["load"], what, miss["bound"])
    return "%s %s %.1f ms above its objective %.0f ms" % (miss["load"], what, miss["value"], miss["bound"])


# ------------------------------------------------------------------ the server's own bound on running requests

def capped_loads(measurement, concurrency, loads):
    """The loads the server ran below their concurrency: [{load, concurrency, max_running}], lowest load first.

    ``max_running`` is the bound the server's /server_info gave after a run (serving_benchmark's
    max_running_requests), the lowest of the load's runs. SGLang sets it to 48 by itself when speculative decoding
    is on and --max-running-requests is not given (server_args.py of 0.5.9 to 0.5.23; read on a real server, docs/
    evidence/real-sglang-h200.md, sixth run): a load of more concurrent requests then queues the rest, and what
    was measured is not the configuration asked for. A load whose concurrency is unknown is not judged.
    """
    capped = []
    for load in loads:
        runs = (measurement.get("loads") or {}).get(load) or []
        bounds = [bound for bound in (number(run.get("max_running_requests")) for run in runs if isinstance(run, Mapping))
                  if bound is not None]
        wanted = (concurrency or {}).get(load)
        if bounds and wanted and min(bounds) < wanted:
            capped.append({"load": load, "concurrency": int(wanted), "max_running": int(min(bounds))})
    return capped


# Where a server's bound on the requests it runs at once comes from, for the messages of a load it capped: the
# option's or the inventory's own flag (max_running_requests_64 at a load of 256 on the real H200,
# docs/evidence/real-sglang-h200.md, eleventh run), or SGLang's default with speculative decoding on.
CAP_BOUND = ("The bound is the server's --max-running-requests, or 48 where SGLang sets it by itself: with "
             "speculative decoding on and that flag unset")


def describe_cap(cap):
    return "load %s runs %d requests at once, the server at most %d" % (
        cap["load"], cap["concurrency"], cap["max_running"])


def cap_misses(measurement, settings):
    """One message per load of ``measurement`` (the smoke test's result) that the server ran below its concurrency.

    The experiments reject a candidate that brought a cap in (experiment_verdict); this is the same check held
    against what runs as deployed, where a cap comes from the inventory itself: speculative decoding turned on in
    sglang_service_extra_args with --max-running-requests left to SGLang (48), or a bound below the loads measured.
    Such a load was not measured as asked (the rest queue), so the smoke test names it rather than report it. A
    server that gives no bound (SGLang's /server_info says null where nothing set one) is not judged.
    """
    settings = settings_of(settings)
    loads = _loads(measurement, settings, "the smoke test's result")
    return ["The server ran fewer requests at once than the load asks: %s (max_running_requests of its /server_info), "
            "so the rest queued and the load was not measured as asked. %s. Fix: give --max-running-requests %d "
            "(sglang_service_extra_args), or measure loads of at most %d requests at once (smoke_test_loads)."
            % (describe_cap(cap), CAP_BOUND, cap["concurrency"], cap["max_running"])
            for cap in capped_loads(measurement, settings["concurrency"], loads)]


# ------------------------------------------------------------------ one experiment

def _cause(measurement, loads):
    """The host's cause verdict of a measurement: its highest load's median run."""
    for load in reversed(loads):
        runs = measurement["loads"].get(load) or []
        usable = [run for run in runs if isinstance(run, Mapping) and number(run.get("output_tokens_per_s")) is not None]
        if usable:
            middle = sorted(usable, key=lambda run: number(run["output_tokens_per_s"]))[len(usable) // 2]
            return result_host_verdict(middle)
    return {"verdict": UNKNOWN, "explanation": ""}


def _loads(measurement, settings, where):
    if not isinstance(measurement, Mapping) or not isinstance(measurement.get("loads"), Mapping):
        raise ExperimentError("%s is not a measurement of loads: %r" % (where, measurement))
    return settings["loads"] or sorted(measurement["loads"])


def experiment_verdict(name, baseline, candidate, settings):
    """Keep, reject or leave off (no measurable gain) one experiment, from two measurements that differ by it."""
    settings = settings_of(settings)
    loads = _loads(baseline, settings, "the baseline of %s" % name)
    _loads(candidate, settings, "the measurement with %s" % name)
    by_load = {load: compare_load(baseline["loads"].get(load), candidate["loads"].get(load), settings,
                                  "%s (%s)" % (load, name))
               for load in loads}
    parity = parity_check(baseline.get("parity") or [], candidate.get("parity") or [], settings["parity_min_match"],
                          settings["parity_min_prefix"])
    cause = _cause(candidate, loads)
    regressed = [load for load in loads if by_load[load]["verdict"] == REGRESSION]
    gained = [load for load in loads if by_load[load]["verdict"] == GAIN]
    objective = objective_against(baseline, candidate, settings["slo"], loads)
    broken = objective["broken"]
    capped_before = {cap["load"] for cap in capped_loads(baseline, settings["concurrency"], loads)}
    capped = [cap for cap in capped_loads(candidate, settings["concurrency"], loads) if cap["load"] not in capped_before]
    if not parity["ok"]:
        decision, reason = REJECTED, ("wrong output: %d of %d prompts agree with the baseline on at least their "
                                      "first %.0f %% (%.0f %% of the prompts needed)" % (
                                          parity["matched"], parity["total"], parity["min_prefix"] * 100,
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


# ------------------------------------------------------------------ the plan

class _Need(Exception):
    def __init__(self, config):
        super().__init__(config)
        self.config = config


class _Spent(Exception):
    """A configuration the plan needs, with no restart left in the budget to measure it."""


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
    revived = {name: _decided(name, remembered[name], KEPT, (
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

    def need(config):
        found = measurements.get(config_key(config))
        if found is None:
            if budget is not None and spent >= budget:
                raise _Spent()
            raise _Need(sorted(config))
        return found

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
    try:
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
            try:
                baseline = need(current)
                candidate = need([step for step in current if step not in siblings] + [name])
            except _Spent:
                spent_out = True
                verdicts[name] = untried_verdict(name, budget)
                continue
            verdicts[name] = experiment_verdict(name, baseline, candidate, settings)
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
    except _Need as exc:
        return {"done": False, "measure": exc.config}

    def final(name):
        if name in superseded:
            return superseded[name]
        if name in revived:
            return revived[name]
        return _remembered(name, remembered[name]) if name in remembered else dict(verdicts[name], remembered=False)

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
    """Whether this run's smoke test decides experiments: they are on (smoke_test_experiments) and the smoke phase
    runs (ansible_run_tags holds all, tagged or smoke; ansible_skip_tags does not hold smoke). Not in check mode's
    sense: a check shows what the run would do, so it holds back what the run would."""
    if not isinstance(experiments_on, bool):
        raise ExperimentError("smoke_test_experiments must be true or false, got %r" % (experiments_on,))
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


def untried_verdict(name, budget):
    """The verdict of an experiment the restart budget left no restart for: off this run, measured by the next."""
    reason = ("the restart budget of %d was spent before it could be measured (smoke_test_restart_budget): it stays "
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
                  "smoke_test_experiments_retry: [%s] and sglang_service_tuning_retry_rejected: true" % (
                      step, knob, step))
    else:
        reason = ("not tried: the search of the stepped knob %s stopped at %s (%s), and a step is tried only where "
                  "the one before it paid; it stays off, recorded as turned off. To search again, set "
                  "smoke_test_experiments_retry: [%s] and sglang_service_tuning_retry_rejected: true" % (
                      knob, step, decision or "not decided", step))
    return _decided(name, untried_verdict(name, 0), UNTRIED, reason, stopped_at=step)


def superseded_verdict(name, verdict, by):
    """A kept step of a stepped knob, replaced by the next step, which paid on top of it."""
    reason = ("kept, then replaced by the next step of its knob, %s, which paid on top of it: one step of a knob "
              "runs at a time (as measured: %s)" % (by, verdict.get("reason", "")))
    return _decided(name, verdict, SUPERSEDED, reason, superseded_by=by)


def _decided(name, verdict, decision, reason, **fields):
    """``verdict`` as this run decides it: its decision, its reason and the sentence the reports show."""
    return dict(verdict, experiment=name, decision=decision, reason=reason, remembered=False,
                message="%s %s, %s." % (name, decision, reason), **fields)


def _remembered(name, verdict):
    """A verdict kept from an earlier measurement of the configuration, with the sentence the reports show."""
    return dict(verdict, experiment=name, remembered=True, message="%s %s, %s: kept from %s's measurement in run %s." % (
        name, verdict["decision"], verdict.get("reason", "no reason recorded"), verdict.get("host", "another host"),
        verdict.get("run_id", "?")))


# ------------------------------------------------------------------ memory across hosts

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


def remember(memory, key, verdicts, host, run_id):
    """The memory with this run's measured verdicts added under key (remembered ones unchanged)."""
    updated = {name: dict(entry) for name, entry in (memory or {}).items()}
    entry = dict(updated.get(key) or {})
    for verdict in verdicts:
        if verdict.get("remembered") or verdict.get("decision") == UNTRIED:
            continue
        entry[verdict["experiment"]] = {
            "decision": verdict["decision"], "reason": verdict["reason"], "cause": verdict.get("cause", UNKNOWN),
            "loads": {load: {"verdict": figures["verdict"], "change": figures["change"], "band": figures["band"]}
                      for load, figures in verdict.get("loads", {}).items()},
            "parity": {field: verdict.get("parity", {}).get(field) for field in ("matched", "total")},
            "host": host, "run_id": run_id}
        # A stepped knob's: the step that superseded it (a later run revives it where that step is not asked for),
        # and the step it was judged against.
        entry[verdict["experiment"]].update({field: verdict[field] for field in ("superseded_by", "in_place_of")
                                             if verdict.get(field)})
    updated[key] = entry
    return updated


# ------------------------------------------------------------------ what the role hands in and out

def measurement_of(runs, parity, config, label=""):
    """One configuration's measurement from the role's registered loops.

    ``runs``: the results of the serving_benchmark loop, each with ``item`` =
    [load name, repeat]; ``parity``: the results of the uri loop over the parity
    prompts, each with ``json.choices[0].text`` (or ``.message.content``).
    """
    loads = {}
    for result in runs or []:
        item = result.get("item") if isinstance(result, Mapping) else None
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise ExperimentError("a serving_benchmark result of the loop has no [load, repeat] item: %r" % (result,))
        loads.setdefault(str(item[0]), []).append({key: value for key, value in result.items()
                                                  if key not in ("item", "ansible_loop_var", "invocation")})
    texts = []
    for answer in parity or []:
        choices = (answer.get("json") or {}).get("choices") if isinstance(answer, Mapping) else None
        if not choices:
            raise ExperimentError("a parity prompt got no completion: %r" % ((answer or {}).get("msg", answer),))
        choice = choices[0]
        texts.append(choice.get("text") if "text" in choice else (choice.get("message") or {}).get("content"))
    return {"config": sorted(config or []), "label": label, "loads": loads, "parity": texts}


def switch_to(config, experiments, patches_enabled, tuning, gates_live):
    """What the patch role and the service take to run ``config`` of the experiments.

    Returns {patches_enabled, tuning, gates_change}: the gates among the
    experiments on exactly where the configuration has them, the tuning options
    likewise, and whether the gates change from those live (else the patch role
    need not run).
    """
    config, experiments = set(config or []), list(experiments or [])
    tuning = list(tuning or [])
    gates = [name for name in experiments if name not in tuning]
    enabled = dict(patches_enabled or {})
    enabled.update({gate: gate in config for gate in gates})
    chosen = [name for name in tuning if name not in experiments or name in config]
    live = set(gates_live or [])
    return {"patches_enabled": enabled, "tuning": chosen,
            "gates_change": any((gate in config) != (gate in live) for gate in gates)}


def switch_problem(config, experiments, patches_live, tuning_live):
    """Why the server does not run ``config`` after a switch ("" where it does): the gates and tuning options
    among the experiments live exactly where the configuration has them.

    The switch hands sm120_patches_enabled and sglang_service_tuning to the roles as include vars, and an
    extra var (-e) outranks those: given on the command line, the roles render what it says, the server does
    not change, and every configuration measured is the same one under another name. This happened on the
    real-GPU harness (docs/evidence/real-sglang-h200.md): four measurements of one configuration, two of them
    called a gain. Nothing is decided on such a measurement.
    """
    config, experiments = set(config or []), list(experiments or [])
    live = set(patches_live or []) | set(tuning_live or [])
    wrong_on = sorted(name for name in experiments if name in live and name not in config)
    wrong_off = sorted(name for name in experiments if name not in live and name in config)
    if not wrong_on and not wrong_off:
        return ""
    parts = (["%s stayed on" % ", ".join(wrong_on)] if wrong_on else []) + \
        (["%s stayed off" % ", ".join(wrong_off)] if wrong_off else [])
    return ("The experiments asked for %s, but %s: what the server runs did not follow the switch, so nothing "
            "measured now could be told apart. Is sglang_service_tuning or sm120_patches_enabled given as an extra "
            "var (-e)? An extra var outranks the configuration an experiment switches to: set them in the inventory "
            "(group_vars or host_vars) instead." % (
                "the configuration with %s" % ", ".join(sorted(config)) if config else "none of them",
                " and ".join(parts)))


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


def loads_by_concurrency(loads):
    """The names of ``loads`` (smoke_test_loads), lowest concurrency first, ties by name."""
    _check_loads(loads)
    return sorted(loads, key=lambda name: (number(loads[name]["concurrency"]), name))


def _check_loads(loads):
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


def warmup_requests(load, position, num_warmup, runs_after_start):
    """Warm-up requests (unmeasured) before one run of a configuration's measurement: ``num_warmup`` before every
    run, and before its first (``position`` 0, the server just started on it) ``runs_after_start`` whole runs of
    that load more. On a real SGLang 0.5.16 the first run after each of 4 starts was the slowest of its load's
    three by 17 to 20 %, and that spread doubled the load's noise band (docs/evidence/real-sglang-h200.md)."""
    values = {"smoke_test_num_warmup": num_warmup, "smoke_test_warmup_runs": runs_after_start}
    for name, value in values.items():
        if number(value) is None or number(value) < 0 or number(value) != int(number(value)):
            raise ExperimentError("%s must be a whole number of 0 or more, got %r" % (name, value))
    if not isinstance(load, Mapping) or number(load.get("num_requests")) is None:
        raise ExperimentError("a load needs num_requests to size its warm-up; got %r" % (load,))
    extra = int(number(runs_after_start)) * int(number(load["num_requests"])) if int(number(position)) == 0 else 0
    return int(number(num_warmup)) + extra


def threshold_load(loads):
    """The load the thresholds hold for: the one of highest concurrency (the article's figures were at 64)."""
    _check_loads(loads)
    return max(sorted(loads), key=lambda name: number(loads[name]["concurrency"]))


def report_entries(measurement, patches_live, tuning_live):
    """The report's rows of one configuration's measurement: one per load, its median run as the result."""
    entries = []
    for load, runs in sorted(measurement.get("loads", {}).items()):
        values = throughputs(runs, "load %s of %s" % (load, measurement.get("label")))
        middle = sorted(range(len(runs)), key=lambda index: values[index])[len(runs) // 2]
        entries.append({"label": "%s, load %s" % (measurement.get("label") or "measurement", load), "load": load,
                        "config": measurement.get("config", []), "patches_live": list(patches_live or []),
                        "tuning_live": list(tuning_live or []), "runs": [round(value, 1) for value in values],
                        "spread": round(spread(values), 4), "result": runs[middle]})
    return entries


def final_rows(rows, final_config, threshold_load, final_label=None):
    """The report's rows in order of measurement, the kept configuration's moved last, its threshold load last of all.

    The reports take the last row as the run's result. ``final_label``, the label of the measurement kept, tells it
    from other measurements of the same configuration (the power limit's steps).
    """
    key = config_key(final_config or [])
    final = [row for row in rows if config_key(row.get("config") or []) == key
             and (final_label is None or str(row.get("label", "")).startswith("%s, load " % final_label))]
    seen, latest = set(), []
    for row in reversed(final):  # the latest measurement of that configuration, one row per load
        if row.get("load") not in seen:
            seen.add(row.get("load"))
            latest.insert(0, row)
    latest.sort(key=lambda row: row.get("load") == threshold_load)
    return [row for row in rows if all(row is not chosen for chosen in latest)] + latest


def remember_runs(memory, runs, run_id):
    """The memory with the measured verdicts of every host's run ({host, memory_key, verdicts}) added."""
    for run in runs or []:
        if isinstance(run, Mapping) and run.get("verdicts"):
            memory = remember(memory, run["memory_key"], run["verdicts"], run.get("host", "?"), run_id)
    return memory or {}

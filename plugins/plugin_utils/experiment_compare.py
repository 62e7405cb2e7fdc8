# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two measurements of one configuration each, compared: per load, parity, the latency objective, the server's bound.

A measurement of one configuration is

    {"config": [names live], "loads": {load: [serving_benchmark result, ...]}, "parity": [text, ...]}

with every load of the profile repeated, and the outputs of fixed prompts at temperature 0. An experiment is compared
with the configuration it was added to:

- at each load, the medians of the repeats, in a band (compare_load, plugin_utils/noise_band.py): the larger of the
  tolerance and the noise term from the runs' coefficient of variation; above it a gain, below it a regression,
  inside it no measurable change, and a band wider than the resolution goal leaves the load not decided. A verdict
  may differ by load, and each is kept;
- the parity check: the outputs against those of the configuration without it, prompt by prompt; a prompt agrees
  where the candidate's text begins with at least ``parity_min_prefix`` of the baseline's (a real server is not
  token-exact across restarts, see parity_check); fewer agreeing prompts than the minimum fraction is wrong output;
- the latency objective: a load may bound the p99 time to first token and the p99 inter-token latency (its
  ``slo``); a bound the baseline met and the candidate misses breaks the objective (one the baseline misses too is
  reported, not held against the candidate);
- the server's own bound: a load of more concurrent requests than the server says it runs at once (its
  /server_info, after each run) was not measured as asked, since the rest queued (SGLang's silent 48 with
  speculative decoding).
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import noise_band
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import (
    GAIN,
    NEUTRAL,
    REGRESSION,
    SLO_FIELDS,
    ExperimentError,
    settings_of,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import number


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


def output_text(output):
    """The text of one parity output: the text itself, or a mapping's ``text`` (one kept with its logprobs)."""
    return output.get("text") if isinstance(output, Mapping) else output


def near_tie(baseline, candidate, tie_nats):
    """Where two outputs part at a near-tie of the baseline: {token, margin} or None.

    Each output a mapping of ``text``, ``tokens`` (the tokens chosen) and ``top`` (a mapping of the most likely
    tokens to their logprobs, one a step), as /v1/completions answers with ``logprobs: 2``. At the first token the
    two choose differently, the candidate's token must be one of the baseline's two most likely and the baseline's
    margin between them at most ``tie_nats``: the greedy choice was a near-tie, which the order of a kernel's
    floating-point sums decides, not a confident token the candidate lost. None where either output has no
    logprobs, the texts part at a confident token, or they do not part.
    """
    if not (isinstance(baseline, Mapping) and isinstance(candidate, Mapping)):
        return None
    left, right, top = baseline.get("tokens"), candidate.get("tokens"), baseline.get("top")
    if not (isinstance(left, list) and isinstance(right, list) and isinstance(top, list)):
        return None
    index = next((position for position, (one, other) in enumerate(zip(left, right)) if one != other), None)
    if index is None or index >= len(top) or not isinstance(top[index], Mapping):
        return None
    ranked = sorted(((float(logprob), token) for token, logprob in top[index].items() if logprob is not None),
                    reverse=True)
    if len(ranked) < 2 or right[index] not in (ranked[0][1], ranked[1][1]):
        return None
    margin = ranked[0][0] - ranked[1][0]
    return {"token": index, "margin": round(margin, 4)} if margin <= tie_nats else None


def parity_check(baseline_outputs, candidate_outputs, min_match=1.0, min_prefix=1.0, tie_nats=0.0):
    """The outputs of fixed prompts at temperature 0 against the baseline's, prompt by prompt.

    A prompt agrees where the candidate's text begins with at least ``min_prefix`` of the baseline's (1.0:
    the same text), or where the two part at a near-tie of the baseline (near_tie: the candidate chose the
    baseline's second token where the baseline's margin over it was at most ``tie_nats``). Why not the same
    text: a real SGLang server is not token-exact at temperature 0 across restarts of one configuration, nor
    always within one start. Greedy decoding follows the largest logit, and where two are nearly tied the
    order of a kernel's floating-point sums decides; Triton's autotuning, the batch a request lands in and
    the CUDA graph replayed change that order. On the H200 harness (a Llama of random weights, whose
    near-flat logits make it the hardest case) 3 of 4 prompts came out different after a restart of the same
    configuration, each sharing its first 41 to 74 % (docs/evidence/real-sglang-h200.md); on the H100 of
    2026-12-05 a start with another --max-running-requests shared 29 % and 7 % of two prompts
    (docs/evidence/real-sglang-h100-head-2026-12-05b.md), under any share a prefix rule could hold. A
    wrong-output bug, the FP8 KV cache of GLM-5 on SM120 or a gate that breaks a kernel, changes the text
    where the baseline was sure of its token. So the prefix rule (a quarter by default) stands for servers
    that give no logprobs, and the tie rule tells the two apart where they do.
    Each output is a text or a mapping of ``text``, ``tokens`` and ``top`` (experiment_io.measurement_of).
    """
    if not isinstance(baseline_outputs, (list, tuple)) or not isinstance(candidate_outputs, (list, tuple)):
        raise ExperimentError("the parity check needs the outputs of both configurations as lists of texts")
    if len(baseline_outputs) != len(candidate_outputs):
        raise ExperimentError("the parity check got %d outputs of the baseline and %d of the candidate: the same "
                              "prompts must be asked of both" % (len(baseline_outputs), len(candidate_outputs)))
    total = len(baseline_outputs)
    shares = [agreement(output_text(left), output_text(right))
              for left, right in zip(baseline_outputs, candidate_outputs)]
    ties = {index: near_tie(baseline_outputs[index], candidate_outputs[index], tie_nats)
            for index, share in enumerate(shares) if share < min_prefix}
    ties = {index: tie for index, tie in ties.items() if tie}
    mismatched = [index for index, share in enumerate(shares) if share < min_prefix and index not in ties]
    matched = total - len(mismatched)
    fraction = matched / total if total else 1.0
    result = {"ok": fraction >= min_match, "matched": matched, "total": total, "fraction": round(fraction, 4),
              "min_match": min_match, "min_prefix": min_prefix, "tie_nats": tie_nats, "agreement": shares,
              "identical": sum(1 for share in shares if share == 1.0),
              "ties": [dict(tie, prompt=index) for index, tie in sorted(ties.items())]}
    if mismatched:
        first = mismatched[0]
        result["first_mismatch"] = {"prompt": first, "agreement": shares[first],
                                    "baseline": str(output_text(baseline_outputs[first]))[:80],
                                    "candidate": str(output_text(candidate_outputs[first]))[:80]}
    return result


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
    loads = loads_of(measurement, settings, "the smoke test's result")
    return ["The server ran fewer requests at once than the load asks: %s (max_running_requests of its /server_info), "
            "so the rest queued and the load was not measured as asked. %s. Fix: give --max-running-requests %d "
            "(sglang_service_extra_args), or measure loads of at most %d requests at once (smoke_test_loads)."
            % (describe_cap(cap), CAP_BOUND, cap["concurrency"], cap["max_running"])
            for cap in capped_loads(measurement, settings["concurrency"], loads)]


def loads_of(measurement, settings, where):
    if not isinstance(measurement, Mapping) or not isinstance(measurement.get("loads"), Mapping):
        raise ExperimentError("%s is not a measurement of loads: %r" % (where, measurement))
    return settings["loads"] or sorted(measurement["loads"])

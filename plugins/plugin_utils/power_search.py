# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU power limit as a live, stepped experiment of the smoke phase (roles/experiments, tasks/power.yml). Pure.

A power limit changes while the server runs (``nvidia-smi -pl``), so each step costs a measurement and no
restart. What it is for is energy: joules per output token are what a user pays, and on RTX PRO 6000 cards 500 W
gave the same tok/s as 600 W at concurrency 64 in one published sweep, 450 W 2.4 % less, 300 W 23 % less
(../shared/research/launch-knobs-2026-12.md). So a step is kept where joules per output token fall beyond the
noise band at some load, rise at none, throughput falls beyond its band at none, and every latency objective the
step before met is still met. The steps are searched from the highest down, each against the last one kept (the
limit the GPUs ran at first), and the search stops at the first step that does not pay: below a card's knee each
step down costs more throughput than the one before, so a step that does not pay is not followed by one that does.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import noise_band
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_compare import (
    compare_load,
    describe_load,
    describe_miss,
    median,
    objective_against,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import (
    GAIN,
    KEPT,
    NEUTRAL,
    NO_GAIN,
    REGRESSION,
    REJECTED,
    UNTRIED,
    ExperimentError,
    settings_of,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import number

VARIABLE = "experiments_power_limit_steps_w"


def step_name(watts):
    """The name a step goes by in the report: power_limit_450w."""
    return "power_limit_%sw" % ("%g" % watts)


def power_steps(steps, gpus):
    """The steps to try, in watts, highest first, below the limit every GPU runs at now and within each GPU's range.

    ``gpus``: gpu_facts' GPUs (power_limit_w, power_min_limit_w, power_max_limit_w). A step at or above the limit
    the GPUs run at is the starting point itself and is left out. A step a GPU cannot take is refused, naming the
    GPU, its range and the fix, before any limit changes.
    """
    if isinstance(steps, (str, bytes, Mapping)) or not isinstance(steps, (list, tuple)):
        raise ExperimentError("%s must be a list of watts, e.g. [550, 500, 450], got %r" % (VARIABLE, steps))
    watts = []
    for step in steps:
        value = None if isinstance(step, bool) else number(step)
        if value is None or value <= 0:
            raise ExperimentError("%s has %r: each step must be a number of watts above 0, e.g. [550, 500, 450]"
                                  % (VARIABLE, step))
        watts.append(value)
    if not isinstance(gpus, (list, tuple)) or not gpus:
        raise ExperimentError("%s needs the host's GPUs and their power limits (gpu_facts); none were read"
                              % VARIABLE)
    current = []
    for gpu in gpus:
        limit = number(gpu.get("power_limit_w")) if isinstance(gpu, Mapping) else None
        if limit is None:
            raise ExperimentError("GPU %s reports no power limit, so %s cannot be tried on it: leave the list empty "
                                  "on this host" % (gpu.get("index") if isinstance(gpu, Mapping) else gpu, VARIABLE))
        current.append(limit)
        low, high = number(gpu.get("power_min_limit_w")), number(gpu.get("power_max_limit_w"))
        for value in watts:
            if (low is not None and value < low) or (high is not None and value > high):
                raise ExperimentError(
                    "%s has %g W, which GPU %s (%s) does not accept: its power limit goes from %s to %s W. Fix: keep "
                    "every step within that range" % (VARIABLE, value, gpu.get("index"), gpu.get("name"),
                                                      "?" if low is None else "%g" % low,
                                                      "?" if high is None else "%g" % high))
    start = min(current)
    return sorted({value for value in watts if value < start}, reverse=True)


def _energy(results, where):
    values = []
    for result in results or []:
        power = result.get("power") if isinstance(result, Mapping) else None
        value = number(power.get("joules_per_output_token")) if isinstance(power, Mapping) else None
        if value is None:
            raise ExperimentError("%s has a run without joules per output token (power.joules_per_output_token): "
                                  "the power limit is decided on energy, so smoke_test_sample_power must stay on"
                                  % where)
        values.append(value)
    if not values:
        raise ExperimentError("%s has no measurement to compare" % where)
    return values


def _mean_draw(measurement, load):
    draws = [number((run.get("power") or {}).get("total_mean_w")) for run in (measurement["loads"].get(load) or [])
             if isinstance(run, Mapping)]
    draws = [value for value in draws if value is not None]
    return round(median(draws), 1) if draws else None


def compare_energy(baseline_results, candidate_results, settings, load=""):
    """One load: joules per output token of the candidate against the baseline's, medians, in the same band as
    throughput (noise_band.band: the larger of the tolerance and the noise term). GAIN is less energy."""
    base = _energy(baseline_results, "the baseline at load %s" % load)
    cand = _energy(candidate_results, "the candidate at load %s" % load)
    band = noise_band.band(base, cand, settings["tolerance"], settings["noise_multiple"])["band"]
    change = median(cand) / max(median(base), 1e-9) - 1
    verdict = GAIN if change < -band else REGRESSION if change > band else NEUTRAL
    return {"load": load, "verdict": verdict, "change": round(change, 4), "band": round(band, 4),
            "baseline": round(median(base), 4), "candidate": round(median(cand), 4)}


def power_verdict(watts, baseline, candidate, settings):
    """Keep, reject or leave off one step down: ``candidate`` measured at ``watts`` against ``baseline``."""
    settings = settings_of(settings)
    name = step_name(watts)
    for what, measurement in (("the baseline of %s" % name, baseline), ("the measurement at %g W" % watts, candidate)):
        if not isinstance(measurement, Mapping) or not isinstance(measurement.get("loads"), Mapping):
            raise ExperimentError("%s is not a measurement of loads: %r" % (what, measurement))
    loads = settings["loads"] or sorted(baseline["loads"])
    speed = {load: compare_load(baseline["loads"].get(load), candidate["loads"].get(load), settings,
                                "%s (%s)" % (load, name)) for load in loads}
    energy = {load: compare_energy(baseline["loads"].get(load), candidate["loads"].get(load), settings,
                                   "%s (%s)" % (load, name)) for load in loads}
    broken = objective_against(baseline, candidate, settings["slo"], loads)["broken"]
    slower = [load for load in loads if speed[load]["verdict"] == REGRESSION]
    costlier = [load for load in loads if energy[load]["verdict"] == REGRESSION]
    saved = [load for load in loads if energy[load]["verdict"] == GAIN]
    if slower:
        decision, reason = REJECTED, "slower at load %s" % ", ".join(slower)
    elif broken:
        decision, reason = REJECTED, "breaks the latency objective: %s" % "; ".join(describe_miss(m) for m in broken)
    elif costlier:
        decision, reason = REJECTED, "more energy per output token at load %s" % ", ".join(costlier)
    elif saved:
        decision, reason = KEPT, "less energy per output token at load %s, no slower" % ", ".join(saved)
    else:
        decision, reason = NO_GAIN, "no measurable saving of energy per output token at any load"
    top = loads[-1] if loads else None
    draw = {"baseline_w": _mean_draw(baseline, top), "candidate_w": _mean_draw(candidate, top)} if top else {}
    figures = "; ".join("%s: %+.1f %% J/token (band ±%.1f %%: %.4f against %.4f), output tok/s %s"
                        % (load, energy[load]["change"] * 100, energy[load]["band"] * 100, energy[load]["candidate"],
                           energy[load]["baseline"], describe_load(speed[load]))
                        for load in loads)
    message = "%s %s, %s. %s" % (name, decision, reason, figures)
    if draw.get("baseline_w") is not None and draw.get("candidate_w") is not None:
        message += ". All GPUs drew %.1f W at load %s, against %.1f W" % (
            draw["candidate_w"], top, draw["baseline_w"])
    return {"experiment": name, "limit_w": watts, "decision": decision, "reason": reason, "loads": speed,
            "energy": energy, "draw": draw, "objective": {"broken": broken}, "parity": {},
            "baseline_config": list(baseline.get("config") or []), "candidate_config": list(candidate.get("config") or []),
            "remembered": False, "message": message + "."}


def power_search_step(steps, measurements, baseline, settings):
    """The next step to measure, or where the search ended.

    ``steps``: power_steps' list, highest first; ``measurements``: the steps measured so far, by watts (a number or
    its string); ``baseline``: the measurement at the limit the GPUs ran at. Each step is judged against the last
    one kept; the first that is not kept ends the search and the steps below it are untried. Returns
    {"done": false, "measure": watts} or {"done": true, "limit_w": the lowest kept step or None, "verdicts": [...],
    "measurement": the measurement the GPUs end on}.
    """
    by_watts = {}
    for key, measurement in (measurements or {}).items():
        watts = number(key)
        if watts is None:
            raise ExperimentError("a power step's measurement is keyed %r, not by its watts" % (key,))
        by_watts[watts] = measurement
    verdicts, reference, chosen = [], baseline, None
    for position, watts in enumerate(steps):
        if watts not in by_watts:
            return {"done": False, "measure": watts}
        verdict = power_verdict(watts, reference, by_watts[watts], settings)
        verdicts.append(verdict)
        if verdict["decision"] != KEPT:
            for rest in steps[position + 1:]:
                reason = "the search stopped at %g W, the first step that did not pay" % watts
                verdicts.append({"experiment": step_name(rest), "limit_w": rest, "decision": UNTRIED, "reason": reason,
                                 "loads": {}, "energy": {}, "draw": {}, "parity": {}, "remembered": False,
                                 "message": "%s %s, %s." % (step_name(rest), UNTRIED, reason)})
            break
        reference, chosen = by_watts[watts], watts
    return {"done": True, "limit_w": chosen, "verdicts": verdicts, "measurement": reference}

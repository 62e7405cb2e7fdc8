# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the roles hand in and out: measurements from their loops, switches, warm-up, the thresholds' load, rows. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import noise_band
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_compare import spread, throughputs
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import (
    ExperimentError,
    check_loads,
    config_key,
    settings_of,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import number


def measurement_of(runs, parity, config, label=""):
    """One configuration's measurement from the role's registered loops.

    ``runs``: the results of the serving_benchmark loop, each with ``item`` =
    [load name, repeat]; ``parity``: the results of the uri loop over the parity
    prompts, each with ``json.choices[0].text`` (or ``.message.content``) and its ``logprobs`` (parity_output).
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
        text = choice.get("text") if "text" in choice else (choice.get("message") or {}).get("content")
        texts.append(parity_output(text, choice.get("logprobs")))
    return {"config": sorted(config or []), "label": label, "loads": loads, "parity": texts}


def parity_output(text, logprobs):
    """One parity answer as the parity check reads it: its text, and where the server gave the top logprobs of each
    step (OpenAI's completions ``logprobs``: ``tokens`` and ``top_logprobs``), {text, tokens, top}."""
    if not isinstance(logprobs, Mapping):
        return text
    tokens, top = logprobs.get("tokens"), logprobs.get("top_logprobs")
    if not isinstance(tokens, list) or not isinstance(top, list):
        return text
    return {"text": text, "tokens": tokens, "top": top}


def more_runs(runs, settings, budget_s):
    """The runs to add to a configuration's measurement (the results of the serving_benchmark loop, each with
    ``item`` = [load, repeat]) where its noise keeps a comparison from the resolution goal, within ``budget_s``
    seconds a load (smoke_test_run_budget_s; 0: none). Returns {"runs": [[load, repeat], ...] to loop over, numbered
    on from the runs so far, "loads": noise_band.runs_to_add's account of each load}."""
    budget = number(budget_s)
    if isinstance(budget_s, bool) or budget is None or budget < 0:
        raise ExperimentError("smoke_test_run_budget_s must be a number of seconds, 0 or more (0: no runs added), "
                              "got %r" % (budget_s,))
    settings = settings_of(settings)
    measured = {}
    for result in runs or []:
        item = result.get("item") if isinstance(result, Mapping) else None
        value = number(result.get("output_tokens_per_s")) if isinstance(result, Mapping) else None
        if isinstance(item, (list, tuple)) and len(item) == 2 and value is not None:
            measured.setdefault(str(item[0]), []).append((value, number(result.get("duration_s"))))
    loads = noise_band.runs_to_add(measured, settings["resolution"], settings["tolerance"],
                                   settings["noise_multiple"], budget)
    items = [[load, entry["runs"] + offset] for load, entry in sorted(loads.items()) for offset in range(entry["add"])]
    return {"runs": items, "loads": loads}


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
    check_loads(loads)
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

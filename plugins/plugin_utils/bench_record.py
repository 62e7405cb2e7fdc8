# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A smoke-test measurement as one record of ``sglang.bench_serving``'s JSONL results, plus power. Pure.

``python -m sglang.bench_serving`` (``sglang.benchmark.serving`` from 0.5.23)
appends one JSON object per run to its ``--output-file``; the field names here
are its own (sglang 0.5.23, sglang/benchmark/serving.py, the ``result`` dict of
``benchmark()``), so a smoke measurement and a bench_serving run of the same
server line up in one table or one pandas frame:

- ``output_throughput`` is generated tokens per second; ``total_throughput``
  counts the prompt tokens too (input + output per second). They differ by the
  prompt length, up to 5x for the default 1024-in/256-out load: a report must
  say which one it quotes, and the smoke test quotes output.
- Latencies are milliseconds, ``mean_``/``median_``/``p90_``/``p99_`` of
  ``ttft``, ``itl``, ``tpot`` and ``e2e_latency``. serving_benchmark does not
  compute the std and p95 that bench_serving also writes: those keys are left
  out rather than filled with something else.
- ``request_rate`` is the string ``"inf"`` (every request sent as soon as the
  concurrency allows it): bench_serving writes the float infinity, which
  Python's json prints as ``Infinity``, not valid JSON.
- ``backend`` is bench_serving's name for the endpoint: ``sglang-oai`` for
  /v1/completions, ``sglang-oai-chat`` for /v1/chat/completions; the prompts
  are of a fixed length, ``dataset_name`` says ``fixed-length``.

Power keys bench_serving does not have: ``avg_power_w`` (all GPUs together,
the mean over the run), ``power_limit_w`` (the sum of their limits),
``joules_per_output_token``, ``power_source`` and ``cause`` (the host's cause
verdict, plugin_utils/cause_verdict.py); ``max_running_requests``, the bound the
server's /server_info gave after the run. Identity keys say what was measured:
``host``, ``run_id``, ``tag`` (the measurement's label), ``sglang_version``,
``profile``, ``model``, ``patches_live``; ``repeats_output_throughput`` and their run-to-run coefficient of
variation ``repeats_cv``, the noise any verdict on this measurement is held to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import noise_band
from ansible_collections.sm120.sglang.plugins.plugin_utils.cause_verdict import result_host_verdict
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiments import SLO_FIELDS
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import get_in, number, power_gpus

BACKENDS = {"completions": "sglang-oai", "chat": "sglang-oai-chat"}
# bench_serving's latency prefixes -> serving_benchmark's summary keys.
_STATISTICS = (("mean", "mean"), ("median", "p50"), ("p90", "p90"), ("p99", "p99"))
_LATENCIES = (("ttft", "ttft_ms"), ("itl", "itl_ms"), ("tpot", "tpot_ms"), ("e2e_latency", "e2e_latency_ms"))


class RecordError(ValueError):
    """The measurement or its load is not what the smoke test builds."""


def _load(config, name):
    """(endpoint, [concurrency, requests, input tokens, output tokens]) of the load ``name`` of the run's config."""
    endpoint = config.get("endpoint")
    load = (config.get("loads") or {}).get(name) if isinstance(config.get("loads"), Mapping) else None
    figures = [number(get_in(load, field)) for field in ("concurrency", "num_requests", "input_tokens", "output_tokens")]
    if endpoint not in BACKENDS or None in figures:
        raise RecordError("a measurement's load %r must be one of the run's config.loads, each with concurrency, "
                          "num_requests, input_tokens and output_tokens, and config.endpoint one of %s; got %r"
                          % (name, ", ".join(sorted(BACKENDS)), config))
    return endpoint, [int(figure) for figure in figures]


def bench_serving_record(measurement, run):
    """One JSONL record for ``measurement`` ({label, patches_live, result}) of ``run`` (host, run_id, config)."""
    if not isinstance(measurement, Mapping) or not isinstance(measurement.get("result"), Mapping):
        raise RecordError("a measurement is {label, patches_live, result}, got %r" % (measurement,))
    if not isinstance(run, Mapping):
        raise RecordError("a run is {host, run_id, config}, got %r" % (run,))
    result = measurement["result"]
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    endpoint, (concurrency, _requests, input_tokens, output_tokens) = _load(config, measurement.get("load"))
    gpus = [gpu for _index, gpu in power_gpus(result)]
    limits = [number(gpu.get("limit_w")) for gpu in gpus]
    record = {
        "tag": measurement.get("label"),
        "backend": BACKENDS[endpoint],
        "dataset_name": "fixed-length",
        "request_rate": "inf",
        "max_concurrency": concurrency,
        "random_input_len": input_tokens,
        "random_output_len": output_tokens,
        "duration": number(result.get("duration_s")),
        "completed": result.get("completed_requests"),
        "total_input_tokens": result.get("input_tokens_total"),
        "total_output_tokens": result.get("output_tokens_total"),
        "request_throughput": number(result.get("requests_per_s")),
        "input_throughput": _input_throughput(result),
        "output_throughput": number(result.get("output_tokens_per_s")),
        "total_throughput": number(result.get("total_tokens_per_s")),
    }
    for name, key in _LATENCIES:
        for prefix, statistic in _STATISTICS:
            record["%s_%s_ms" % (prefix, name)] = number(get_in(result, key, statistic))
    record.update({
        "avg_power_w": number(get_in(result, "power", "total_mean_w")),
        "power_limit_w": round(sum(limits), 1) if limits and None not in limits else None,
        "joules_per_output_token": number(get_in(result, "power", "joules_per_output_token")),
        # bench_serving's name: SGLang's mean accepted tokens per speculative step, None without speculation.
        "accept_length": number(result.get("accept_length")),
        # The most requests the server ran at once, from its /server_info (48 where SGLang capped it by itself).
        "max_running_requests": number(result.get("max_running_requests")),
        "power_source": get_in(result, "power", "source"),
        "cause": result_host_verdict(result)["verdict"],
        "failed": result.get("failed_requests"),
        "host": run.get("host"),
        "run_id": run.get("run_id"),
        "sglang_version": config.get("sglang_version"),
        "profile": config.get("profile"),
        "model": config.get("model"),
        "patches_live": list(measurement.get("patches_live") or []),
        "tuning_live": list(measurement.get("tuning_live") or []),
        "load": measurement.get("load"),
        "repeats_output_throughput": list(measurement.get("runs") or []),
        # The repeats' run-to-run coefficient of variation: what any comparison of this measurement can see grows
        # with it (plugin_utils/noise_band.py; the verdicts of the JSON report carry each load's band).
        "repeats_cv": _repeats_cv(measurement.get("runs")),
    })
    record.update(_objective(config, measurement.get("load"), record))
    return record


def _objective(config, name, record):
    """{slo, slo_met}: the load's bounds as the profile gives them and whether this run met every one (None where
    the load has none, or a figure is missing)."""
    load = (config.get("loads") or {}).get(name) if isinstance(config.get("loads"), Mapping) else None
    slo = load.get("slo") if isinstance(load, Mapping) and isinstance(load.get("slo"), Mapping) else None
    if not slo:
        return {"slo": None, "slo_met": None}
    # The load's latency objective against this record's p99 figures (bench_serving's names).
    figures = [(number(record.get(SLO_FIELDS.get(field, {}).get("record", ""))), number(bound))
               for field, bound in slo.items()]
    met = None if any(value is None or bound is None for value, bound in figures) else \
        all(value <= bound for value, bound in figures)
    return {"slo": dict(slo), "slo_met": met}


def _repeats_cv(runs):
    values = [number(value) for value in runs or []]
    if len(values) < 2 or None in values:
        return None
    return round(noise_band.pooled_cv(values)[0], 4)


def _input_throughput(result):
    tokens, duration = number(result.get("input_tokens_total")), number(result.get("duration_s"))
    return round(tokens / duration, 1) if tokens is not None and duration else None


def bench_serving_jsonl(run):
    """Every measurement of a run, one JSON object a line (the run's ``measurements`` in order)."""
    if not isinstance(run, Mapping):
        raise RecordError("a run is {host, run_id, config, measurements}, got %r" % (run,))
    lines = [json.dumps(bench_serving_record(measurement, run), sort_keys=False, allow_nan=False)
             for measurement in run.get("measurements") or []]
    return "".join(line + "\n" for line in lines)

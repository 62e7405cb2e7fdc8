# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus recording and alerting rules that watch a served fleet: the cause verdict as standing alerts. Pure.

The smoke test decides once, after a deploy, why a GPU under load draws what it
draws (cause_verdict.py). These rules ask the same question of a running server
every evaluation, over a window, with the same thresholds: they are imported
from cause_verdict.Thresholds (overridable the same way, thresholds_from), the
throttle reason bits from gpu_power, and the latency objectives from the
profile's loads (experiment_settings.slo_of) or the smoke test's TTFT bound.
No number of the verdict is written here a second time.

Where the series come from (the names checked upstream):
- GPUs: NVIDIA's dcgm-exporter. Power, utilisation and SM clock are in its
  etc/default-counters.csv (DCGM_FI_DEV_POWER_USAGE, DCGM_FI_DEV_GPU_UTIL,
  DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_GPU_TEMP); the power limit
  (DCGM_FI_DEV_POWER_MGMT_LIMIT), the board's top SM clock
  (DCGM_FI_DEV_MAX_SM_CLOCK) and the clock event reasons are not, so the
  exporter's counters file must list them (COUNTERS, module_utils/dcgm_fields.py,
  where every name is spelled once: the collection's own exporter,
  module_utils/gpu_exporter.py, serves the same names). The reasons field is
  DCGM_FI_DEV_CLOCKS_EVENT_REASONS from DCGM 3.3, DCGM_FI_DEV_CLOCK_THROTTLE_REASONS
  before; both are NVML's clocks event reasons mask bit for bit (DCGM API
  reference, "Field Constants"; NVML API reference, nvmlClocksEventReasons:
  SwPowerCap 0x4, SwThermalSlowdown 0x20, HwThermalSlowdown 0x40,
  HwPowerBrakeSlowdown 0x80), the bits gpu_power.THROTTLE_REASON_BITS names.
- The server: SGLang's /metrics with --enable-metrics, as a real server served it
  (docs/evidence/real-sglang-h200/2026-12-03-8b/metrics.txt): the gauges
  sglang:num_running_reqs and sglang:num_queue_reqs, the histograms
  sglang:time_to_first_token_seconds and sglang:inter_token_latency_seconds.
- The router: sglang-router 0.3.2 (the pinned release) exports
  smg_worker_health{worker="<url>"}: 1 healthy, 0 failing its health checks, -1
  once removed (docs/evidence/router-metrics.md).

PromQL has no bitwise operators: bit b of the mask is floor(mask / b) % 2.

Every series carries a ``host`` label, the inventory name, which the scrape
configuration sets on each target (the GPU exporter's and the server's
instances differ, the host does not); each SGLang target also carries
``worker``, the URL the router knows it by.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.module_utils.dcgm_fields import (
    CLOCKS_EVENT_REASONS,
    COUNTERS,
    GPU_TEMP,
    GPU_UTIL,
    MAX_SM_CLOCK,
    OLD_REASONS_METRIC,
    POWER_MGMT_LIMIT,
    POWER_USAGE,
    SM_CLOCK,
)
from ansible_collections.sm120.sglang.plugins.module_utils.gpu_power import (
    POWER_REASONS,
    THERMAL_REASONS,
    THROTTLE_REASON_BITS,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.cause_verdict import (
    POWER_CAPPED,
    SPIN_WAIT,
    THERMAL,
    UNDERFED,
    CauseThresholdError,
    thresholds_from,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import (
    ExperimentError,
    check_slo,
    slo_of,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import number

# The alerts' causes apart from the verdict's own (cause_verdict's names are used for those).
SERVER_DOWN = "server-down"
TARGET_DOWN = "target-down"
QUEUEING = "queueing"
TTFT_OVER_OBJECTIVE = "ttft-over-objective"
ITL_OVER_OBJECTIVE = "itl-over-objective"
OUT_OF_ROUTER = "out-of-router"

# Prometheus's duration syntax (model.ParseDuration), units largest first.
_DURATION = re.compile(r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
_JOB = re.compile(r'^[^"\\\n]+$')


class AlertRulesError(ValueError):
    """An argument the rules cannot be written from; the message names it and what it takes."""


def duration(name, value):
    text = str(value or "")
    if not text or not _DURATION.match(text) or text in ("0s", "0m"):
        raise AlertRulesError("%s must be a Prometheus duration above 0 such as 10m or 1h30m; got %r" % (name, value))
    return text


def _num(value):
    """A number as PromQL reads it: 0.3, 80, 20 (never 80.0 or 2e+01)."""
    text = ("%.6f" % value).rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def _bits(names):
    """The mask's bits for these reason names, lowest first."""
    bits = [bit for bit, name in THROTTLE_REASON_BITS if name in names]
    missing = set(names) - {name for _bit, name in THROTTLE_REASON_BITS}
    if missing:  # a rename in gpu_power must not silently drop a reason from the rules
        raise AlertRulesError("gpu_power names reasons without a bit: %s" % ", ".join(sorted(missing)))
    return bits


def _any_bit(series, names):
    """1 where any of the reasons' bits is set in the mask ``series``, else 0."""
    terms = " + ".join("floor(%s / %d) %% 2" % (series, bit) for bit in _bits(names))
    return "clamp_max(%s, 1)" % terms


def _objectives(loads, max_ttft_p99_ms):
    """(TTFT bound s, ITL bound s), each None where nothing bounds it.

    Live traffic mixes the profile's loads, so a p99 counts as over the objective only above the largest bound any of
    its loads accepts (the high-concurrency load's, in the built-in profiles). The TTFT bound falls back to the smoke
    test's (smoke_test_max_ttft_p99_ms) where no load has one.
    """
    try:
        objectives = check_slo(slo_of(loads if isinstance(loads, Mapping) else {}))
    except ExperimentError as exc:
        raise AlertRulesError(str(exc)) from None
    bounds = {}
    for field in ("ttft_p99_ms", "itl_p99_ms"):
        values = [objective[field] for objective in objectives.values() if field in objective]
        bounds[field] = max(values) if values else None
    if bounds["ttft_p99_ms"] is None and max_ttft_p99_ms not in (None, ""):
        fallback = number(max_ttft_p99_ms)
        if fallback is None or fallback <= 0:
            raise AlertRulesError("max_ttft_p99_ms (smoke_test_max_ttft_p99_ms) must be a number of milliseconds "
                                  "above 0; got %r" % (max_ttft_p99_ms,))
        bounds["ttft_p99_ms"] = fallback
    return tuple(bounds[field] / 1000.0 if bounds[field] is not None else None
                 for field in ("ttft_p99_ms", "itl_p99_ms"))


def _queue_bound(loads, max_queued_requests):
    """The queue beyond which requests count as piling up: the argument, else the highest concurrency of the loads
    (more requests waiting than the busiest load the profile measured sends at once); None where neither is known."""
    if max_queued_requests not in (None, ""):
        bound = number(max_queued_requests)
        if bound is None or bound < 0:
            raise AlertRulesError("max_queued_requests must be a number of requests, 0 or more; got %r"
                                  % (max_queued_requests,))
        return bound
    concurrencies = [number(load.get("concurrency")) for load in (loads or {}).values() if isinstance(load, Mapping)]
    concurrencies = [value for value in concurrencies if value is not None]
    return max(concurrencies) if concurrencies else None


def job_name(name, value):
    if not isinstance(value, str) or not _JOB.match(value):
        raise AlertRulesError("%s must be a scrape job name (no quotes, backslashes or newlines); got %r" % (name, value))
    return value


def alert_rules(loads=None, max_ttft_p99_ms=None, thresholds=None, window="10m", hold="2m",
                max_queued_requests=None, server_job="sglang", gpu_job="dcgm", router_job="sglang-router"):
    """The rules file's content, a mapping ready for to_nice_yaml: {groups: [recording, alerting]}.

    ``loads``: the profile's loads (their ``slo`` bounds p99 TTFT and ITL, their highest concurrency the queue);
    ``max_ttft_p99_ms``: the smoke test's TTFT bound, used where no load bounds TTFT; ``thresholds``: overrides of
    cause_verdict.Thresholds; ``window``: what each median and share is taken over; ``hold``: how long an alert's
    condition must hold before it fires; ``max_queued_requests``: the queue bound (default: the highest concurrency);
    the jobs: the scrape jobs of the SGLang servers, the GPU exporters and the router.
    """
    try:
        limits = thresholds_from(thresholds)
    except CauseThresholdError as exc:
        raise AlertRulesError(str(exc)) from None
    window, hold = duration("window", window), duration("hold", hold)
    server_job, gpu_job = job_name("server_job", server_job), job_name("gpu_job", gpu_job)
    router_job = job_name("router_job", router_job)
    ttft_s, itl_s = _objectives(loads, max_ttft_p99_ms)
    queue_bound = _queue_bound(loads, max_queued_requests)

    def windowed(name, how):
        return "%s:%s%s" % (name, how, window)

    power = windowed("sm120:gpu_power_fraction", "median")
    util = windowed("sm120:gpu_util_pct", "median")
    clock = windowed("sm120:gpu_clock_fraction", "median")
    temperature = windowed("sm120:gpu_temperature_c", "median")
    power_share = windowed("sm120:gpu_power_reason", "share")
    thermal_share = windowed("sm120:gpu_thermal_reason", "share")
    running = windowed("sm120:host_running_requests", "median")
    queued = windowed("sm120:host_queued_requests", "median")
    ttft = windowed("sm120:host_ttft_seconds", "p99_")
    itl = windowed("sm120:host_itl_seconds", "p99_")
    reasons = "sm120:gpu_clock_event_reasons"

    def median(series):
        return "quantile_over_time(0.5, %s[%s])" % (series, window)

    def p99(histogram):
        return "histogram_quantile(0.99, sum by (host, le) (rate(%s_bucket[%s])))" % (histogram, window)

    recording = [
        {"record": "sm120:gpu_power_fraction", "expr": "%s / %s" % (POWER_USAGE, POWER_MGMT_LIMIT)},
        {"record": "sm120:gpu_clock_fraction", "expr": "%s / %s" % (SM_CLOCK, MAX_SM_CLOCK)},
        {"record": reasons, "expr": "%s or %s" % (CLOCKS_EVENT_REASONS, OLD_REASONS_METRIC)},
        {"record": "sm120:gpu_power_reason", "expr": _any_bit(reasons, POWER_REASONS)},
        {"record": "sm120:gpu_thermal_reason", "expr": _any_bit(reasons, THERMAL_REASONS)},
        # max, not sum: with --enable-metrics-for-all-schedulers every rank of a TP group reports the same requests.
        {"record": "sm120:host_running_requests", "expr": "max by (host) (sglang:num_running_reqs)"},
        {"record": "sm120:host_queued_requests", "expr": "max by (host) (sglang:num_queue_reqs)"},
        {"record": power, "expr": median("sm120:gpu_power_fraction")},
        {"record": util, "expr": median(GPU_UTIL)},
        {"record": clock, "expr": median("sm120:gpu_clock_fraction")},
        {"record": temperature, "expr": median(GPU_TEMP)},
        # The share of the window's readings with the reason, as cause_verdict counts reason_min_share.
        {"record": power_share, "expr": "avg_over_time(sm120:gpu_power_reason[%s])" % window},
        {"record": thermal_share, "expr": "avg_over_time(sm120:gpu_thermal_reason[%s])" % window},
        {"record": running, "expr": median("sm120:host_running_requests")},
        {"record": queued, "expr": median("sm120:host_queued_requests")},
        {"record": ttft, "expr": p99("sglang:time_to_first_token_seconds")},
        {"record": itl, "expr": p99("sglang:inter_token_latency_seconds")},
    ]

    on_gpu = " and on (host, gpu) "
    pulled_down = "%s < %s" % (clock, _num(limits.pulled_down_clock_fraction))
    full_clock = "%s >= %s" % (clock, _num(limits.pulled_down_clock_fraction))
    busy = "%s >= %s" % (util, _num(limits.busy_util_pct))
    thermal_reason = "%s >= %s" % (thermal_share, _num(limits.reason_min_share))
    power_reason = "%s >= %s" % (power_share, _num(limits.reason_min_share))
    at_limit = "%s >= %s" % (power, _num(limits.at_limit_power_fraction))
    serving = "(%s > 0)" % running
    waiting = "(%s > 0 or %s > 0)" % (running, queued)
    # A GPU whose clock a reason pulls down is thermal or power-capped, whatever else it shows (cause_verdict checks
    # those first).
    limited = "(%s%s(%s or %s))" % (pulled_down, on_gpu, thermal_reason, power_reason)
    # Thermal by its reason; where the exporter reads no reasons at all, by temperature while busy (hot_temperature_c).
    thermal = "((%s%s%s) or (%s%s%s >= %s%s%s unless on (host, gpu) %s))" % (
        pulled_down, on_gpu, thermal_reason,
        pulled_down, on_gpu, temperature, _num(limits.hot_temperature_c), on_gpu, busy, reasons)
    gpu_where = "{{ $labels.host }} GPU {{ $labels.gpu }}"
    over = "over the last %s" % window

    def gpu_alert(name, cause, severity, expr, summary, description):
        return {"alert": name, "expr": expr, "for": hold,
                "labels": {"severity": severity, "cause": cause},
                "annotations": {"summary": "%s is %s" % (gpu_where, summary), "description": description}}

    alerts = [
        gpu_alert(
            "SglangGpuSpinWait", SPIN_WAIT, "critical",
            "%s < %s%s%s%s%s and on (host) %s" % (
                power, _num(limits.spin_max_power_fraction), on_gpu, busy, on_gpu, full_clock, serving),
            "spin-waiting",
            "Busy at least %s %% of the time with requests running, yet drawing a median {{ $value | printf \"%%.2f\" }} "
            "of its power limit with the SM clock not pulled down (%s of its maximum or more), %s: kernels spin on a "
            "flag, GPUs wait on each other. Look for a synchronisation bug (a fusion or allreduce gate), not for more "
            "load." % (_num(limits.busy_util_pct), _num(limits.pulled_down_clock_fraction), over)),
        gpu_alert(
            "SglangGpuUnderfed", UNDERFED, "warning",
            "((%s < %s unless on (host, gpu) %s) or (%s >= %s and %s < %s%s%s%s%s)) unless on (host, gpu) %s "
            "and on (host) %s" % (
                power, _num(limits.at_limit_power_fraction), busy,
                power, _num(limits.spin_max_power_fraction), power, _num(limits.saturated_min_power_fraction),
                on_gpu, busy, on_gpu, full_clock, limited, waiting),
            "underfed",
            "Requests are running or queued, yet the GPU is busy less than %s %% of the time or its kernels fill it too "
            "little to draw more than a median {{ $value | printf \"%%.2f\" }} of its power limit, %s: too small a batch, "
            "a starved scheduler or host gaps between kernels." % (_num(limits.busy_util_pct), over)),
        gpu_alert(
            "SglangGpuPowerCapped", POWER_CAPPED, "info",
            "((%s%s%s) or (%s%s%s%s%s)) unless on (host, gpu) %s" % (
                at_limit, on_gpu, pulled_down, power, on_gpu, pulled_down, on_gpu, power_reason, thermal),
            "power-capped",
            "At a median {{ $value | printf \"%%.2f\" }} of its power limit with the SM clock pulled under %s of its "
            "maximum and the power cap holding it, %s: the power limit, not the load, bounds this GPU." % (
                _num(limits.pulled_down_clock_fraction), over)),
        gpu_alert(
            "SglangGpuThermal", THERMAL, "warning",
            thermal,
            "thermally throttled",
            "The SM clock is pulled down to a median {{ $value | printf \"%%.2f\" }} of its maximum by a thermal "
            "slowdown (or, where the exporter reads no reasons, at %s °C or more while busy), %s: check the cooling and "
            "the airflow." % (_num(limits.hot_temperature_c), over)),
        {"alert": "SglangServerDown", "expr": 'up{job="%s"} == 0' % server_job, "for": hold,
         "labels": {"severity": "critical", "cause": SERVER_DOWN},
         "annotations": {"summary": "{{ $labels.host }}: the SGLang server does not answer its metrics scrape",
                         "description": "{{ $labels.instance }} (job %s) has not answered /metrics for %s: the "
                                        "service is down or hangs; journalctl -u 'sglang-*' on the host says why."
                                        % (server_job, hold)}},
        {"alert": "SglangMonitoringTargetDown", "expr": 'up{job="%s"} == 0 or up{job="%s"} == 0' % (gpu_job, router_job),
         "for": hold, "labels": {"severity": "warning", "cause": TARGET_DOWN},
         "annotations": {"summary": "{{ $labels.host }}: {{ $labels.job }} does not answer its scrape",
                         "description": "{{ $labels.instance }} has not answered for %s; while it does not, the "
                                        "alerts that read it cannot fire." % hold}},
        {"alert": "SglangHostOutOfRouter",
         "expr": 'up{job="%s"} == 1 unless on (worker) (smg_worker_health == 1) and on () (max(up{job="%s"}) == 1)'
                 % (server_job, router_job),
         "for": hold, "labels": {"severity": "critical", "cause": OUT_OF_ROUTER},
         "annotations": {"summary": "{{ $labels.host }} serves but the router sends it nothing",
                         "description": "{{ $labels.worker }} answers its scrape, yet the router lists it unhealthy, "
                                        "removed or not at all (smg_worker_health is not 1) for %s: a drain that was "
                                        "not undone, or health checks that fail; GET /workers on the router shows it."
                                        % hold}},
    ]
    if queue_bound is not None:
        alerts.append(
            {"alert": "SglangRequestsQueueing", "expr": "%s > %s" % (queued, _num(queue_bound)), "for": hold,
             "labels": {"severity": "warning", "cause": QUEUEING},
             "annotations": {"summary": "{{ $labels.host }} has requests queueing",
                             "description": "A median {{ $value }} requests waited in the queue %s, more than %s: "
                                            "the server takes requests slower than they arrive." % (
                                                over, _num(queue_bound))}})
    for name, cause, series, bound, what in (
            ("SglangTtftOverObjective", TTFT_OVER_OBJECTIVE, ttft, ttft_s, "time to first token"),
            ("SglangItlOverObjective", ITL_OVER_OBJECTIVE, itl, itl_s, "inter-token latency")):
        if bound is None:
            continue
        alerts.append(
            {"alert": name, "expr": "%s > %s" % (series, _num(bound)), "for": hold,
             "labels": {"severity": "warning", "cause": cause},
             "annotations": {"summary": "{{ $labels.host }}: p99 %s over the objective" % what,
                             "description": "p99 %s {{ $value | humanizeDuration }} %s, over the objective of %s s "
                                            "(the largest bound of the profile's loads)." % (what, over, _num(bound))}})
    return {"groups": [
        {"name": "sm120_sglang_records", "rules": recording},
        {"name": "sm120_sglang_alerts", "rules": alerts},
    ]}


def dcgm_counters():
    """The dcgm-exporter counters file (its CSV format) with every field the rules read."""
    lines = ["# The fields sm120.sglang's alert rules read (plugins/plugin_utils/alert_rules.py)."]
    lines += ["%s, %s, %s" % counter for counter in COUNTERS]
    return "\n".join(lines) + "\n"

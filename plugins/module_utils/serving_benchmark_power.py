# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sample every GPU's power on a background thread while serving_benchmark drives the load, and sum it up.

The readings come from gpu_power: NVML (``pynvml``) when the target's Python
has it, otherwise ``nvidia-smi``. serving_benchmark.py asks power_sampler()
for a sampler and calls its start(), stop() and summary(); nothing else
crosses between the two.

Besides power, each reading carries the GPU's activity (utilisation, SM clock,
temperature, throttle reasons) where the source reads it, and the summary gives
per GPU the figures of activity_figures(), which plugin_utils/cause_verdict.py
decides on: the same function whether the readings are summed up here or handed
to cause_verdict raw.

Standard library only: this runs on the target with the host's own Python 3.9+.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median

from ansible_collections.sm120.sglang.plugins.module_utils.gpu_power import (
    LIMITING_REASONS,
    NVIDIA_SMI_TIMEOUT_S,
    POWER_REASONS,
    THERMAL_REASONS,
    PowerSourceUnavailable,
    open_power_source,
)


@dataclass(frozen=True)
class PowerPlan:
    enabled: bool = True
    interval: float = 0.5
    nvidia_smi: str = "nvidia-smi"


class PowerSampler:
    """Reads power every ``interval`` seconds on a background thread between start() and stop(), the first reading
    one interval after start()."""

    def __init__(self, source, interval):
        self.source = source
        self.interval = interval
        self.samples = []
        self.errors = 0
        self.last_error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="serving-benchmark-power", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(NVIDIA_SMI_TIMEOUT_S + self.interval)
        self.source.close()

    def _run(self):
        # The first reading one interval in, not at start(): start() comes before the first request is sent, so a
        # reading then is of the GPUs before the load (NVML's power a 1 s average of the idle time before it,
        # docs/evidence/h200-power-sampling.md); in a run of a few seconds one such reading of eight moves the energy
        # per token by a tenth. A run shorter than one interval still gets one reading, at stop().
        while not self._stop.wait(self.interval):
            self._read()
        if not self.samples:
            self._read()

    def _read(self):
        try:
            self.samples.append(self.source.read())
        except Exception as exc:
            # A failed read must not end sampling, and nobody would see the exception here.
            self.errors += 1
            self.last_error = str(exc)

    def summary(self, duration_s, output_tokens):
        return summarize_power(self.source.name, self.interval, self.samples, duration_s, output_tokens,
                               self.errors, self.last_error)


class NoPowerSampler:
    """Stands in for PowerSampler when power is not sampled, and says why."""

    def __init__(self, reason, interval):
        self.reason = reason
        self.interval = interval

    def start(self):
        pass

    def stop(self):
        pass

    def summary(self, duration_s, output_tokens):
        return {"source": None, "reason": self.reason, "interval_s": self.interval, "samples": 0,
                "sample_errors": 0, "gpus": [], "total_mean_w": None, "energy_j": None,
                "joules_per_output_token": None}


def power_sampler(power):
    """The sampler a PowerPlan asks for: a real one, or one that says why there is none."""
    if not power.enabled:
        return NoPowerSampler("sample_power is false", power.interval)
    try:
        return PowerSampler(open_power_source(power.nvidia_smi, activity=True), power.interval)
    except PowerSourceUnavailable as exc:
        return NoPowerSampler("no power source: %s" % exc, power.interval)


# GpuReading attribute -> the name of the same value in a reading given as a mapping (GpuReading.as_dict()).
_MAPPING_NAMES = {"watts": "power_w", "limit_watts": "limit_w"}


def _value(reading, attribute):
    if isinstance(reading, Mapping):
        return reading.get(_MAPPING_NAMES.get(attribute, attribute))
    return getattr(reading, attribute, None)


def _ratio(part, whole):
    return part / whole if part is not None and whole else None


def _median(values, digits):
    known = [value for value in values if value is not None]
    return round(median(known), digits) if known else None


def activity_figures(readings):
    """One GPU's figures over a measurement, from its readings (GpuReadings or their as_dict() mappings).

    Medians rather than means: NVML's power is a 1 s average and its
    utilisation a share of up to 1 s, so the first readings of a measurement
    still show the ramp, and a median is not moved by them. A throttle
    reason's share counts the readings in which the reasons were read (None
    when none was); ``throttle_reason_share`` is the share with any reason of
    LIMITING_REASONS. ``samples``: the readings with both a power fraction and
    a utilisation.
    """
    reasons = [_value(reading, "throttle_reasons") for reading in readings]
    reasons = [set(active) for active in reasons if active is not None]
    shares = {}
    for active in reasons:
        for name in active:
            shares[name] = shares.get(name, 0) + 1

    def share_with(names):
        return round(sum(1 for active in reasons if active & set(names)) / len(reasons), 4) if reasons else None

    temperatures = [_value(reading, "temperature_c") for reading in readings]
    max_clocks = [clock for clock in (_value(reading, "max_sm_clock_mhz") for reading in readings) if clock]
    utils = [_value(reading, "util_pct") for reading in readings]
    fractions = [_ratio(_value(reading, "watts"), _value(reading, "limit_watts")) for reading in readings]
    return {
        "samples": sum(1 for util, fraction in zip(utils, fractions) if util is not None and fraction is not None),
        "median_power_fraction": _median(fractions, 4),
        "median_util_pct": _median(utils, 1),
        # The share of the time a kernel ran, where the median of a bursty load reads 0.
        "mean_util_pct": round(sum(u for u in utils if u is not None) / len([u for u in utils if u is not None]), 1)
        if any(u is not None for u in utils) else None,
        "median_sm_clock_mhz": _median((_value(reading, "sm_clock_mhz") for reading in readings), 1),
        "max_sm_clock_mhz": max(max_clocks) if max_clocks else None,
        "median_clock_fraction": _median((_ratio(_value(reading, "sm_clock_mhz"), _value(reading, "max_sm_clock_mhz"))
                                          for reading in readings), 4),
        "median_temperature_c": _median(temperatures, 1),
        "max_temperature_c": max((t for t in temperatures if t is not None), default=None),
        "throttle_reason_samples": len(reasons),
        "throttle_reason_share": share_with(LIMITING_REASONS),
        "power_reason_share": share_with(POWER_REASONS),
        "thermal_reason_share": share_with(THERMAL_REASONS),
        "throttle_reason_shares": {name: round(count / len(reasons), 4) for name, count in sorted(shares.items())},
    }


def _gpu_power(index, watts, limit, readings):
    mean = sum(watts) / len(watts) if watts else None
    return {
        "index": index,
        "samples": len(watts),
        "mean_w": round(mean, 2) if mean is not None else None,
        "max_w": round(max(watts), 2) if watts else None,
        "limit_w": limit,
        "mean_fraction_of_limit": round(mean / limit, 4) if mean is not None and limit else None,
        "activity": activity_figures(readings),
    }


def summarize_power(source_name, interval, samples, duration_s, output_tokens, sample_errors=0, last_error=None):
    """Per GPU mean/max watts and fraction of the limit; energy over the run and per output token.

    Energy is the sum of the GPUs' mean power times the run's duration, so it
    counts every GPU the source sees, busy or not.
    """
    watts, limits, readings = {}, {}, {}
    for sample in samples:
        for reading in sample:
            watts.setdefault(reading.index, [])
            readings.setdefault(reading.index, []).append(reading)
            if reading.watts is not None:
                watts[reading.index].append(reading.watts)
            if reading.limit_watts is not None:
                limits[reading.index] = reading.limit_watts
    gpus = [_gpu_power(index, watts[index], limits.get(index), readings[index]) for index in sorted(watts)]
    means = [gpu["mean_w"] for gpu in gpus if gpu["mean_w"] is not None]
    total_w = round(sum(means), 2) if means else None
    energy_j = round(total_w * duration_s, 1) if total_w is not None else None
    per_token = round(energy_j / output_tokens, 4) if energy_j is not None and output_tokens else None
    reason = None
    if not means:
        reason = "no power reading succeeded" + (": %s" % last_error if last_error else "")
    return {
        "source": source_name,
        "reason": reason,
        "interval_s": interval,
        "samples": len(samples),
        "sample_errors": sample_errors,
        "gpus": gpus,
        "total_mean_w": total_w,
        "energy_j": energy_j,
        "joules_per_output_token": per_token,
    }

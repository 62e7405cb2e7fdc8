# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sample every GPU's power on a background thread while serving_benchmark drives the load, and sum it up.

The readings come from gpu_power: NVML (``pynvml``) when the target's Python
has it, otherwise ``nvidia-smi``. serving_benchmark.py asks power_sampler()
for a sampler and calls its start(), stop() and summary(); nothing else
crosses between the two.

Standard library only: this runs on the target with the host's own Python 3.9+.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ansible_collections.sm120.sglang.plugins.module_utils.gpu_power import (
    NVIDIA_SMI_TIMEOUT_S,
    PowerSourceUnavailable,
    open_power_source,
)


@dataclass(frozen=True)
class PowerPlan:
    enabled: bool = True
    interval: float = 0.5
    nvidia_smi: str = "nvidia-smi"


class PowerSampler:
    """Reads power every ``interval`` seconds on a background thread between start() and stop()."""

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
        while True:
            try:
                self.samples.append(self.source.read())
            except Exception as exc:
                # A failed read must not end sampling, and nobody would see the exception here.
                self.errors += 1
                self.last_error = str(exc)
            if self._stop.wait(self.interval):
                return

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
        return PowerSampler(open_power_source(power.nvidia_smi), power.interval)
    except PowerSourceUnavailable as exc:
        return NoPowerSampler("no power source: %s" % exc, power.interval)


def _gpu_power(index, watts, limit):
    mean = sum(watts) / len(watts) if watts else None
    return {
        "index": index,
        "samples": len(watts),
        "mean_w": round(mean, 2) if mean is not None else None,
        "max_w": round(max(watts), 2) if watts else None,
        "limit_w": limit,
        "mean_fraction_of_limit": round(mean / limit, 4) if mean is not None and limit else None,
    }


def summarize_power(source_name, interval, samples, duration_s, output_tokens, sample_errors=0, last_error=None):
    """Per GPU mean/max watts and fraction of the limit; energy over the run and per output token.

    Energy is the sum of the GPUs' mean power times the run's duration, so it
    counts every GPU the source sees, busy or not.
    """
    watts, limits = {}, {}
    for sample in samples:
        for reading in sample:
            watts.setdefault(reading.index, [])
            if reading.watts is not None:
                watts[reading.index].append(reading.watts)
            if reading.limit_watts is not None:
                limits[reading.index] = reading.limit_watts
    gpus = [_gpu_power(index, watts[index], limits.get(index)) for index in sorted(watts)]
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

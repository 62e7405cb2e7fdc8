# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a GPU under load draws what it draws: compute-bound, spin-wait, underfed, power-capped or thermal. Pure.

Low power under load has opposite causes, and the power figure alone cannot
tell them apart (docs/DESIGN.md): SMs spinning on a flag that another GPU has
not set yet (busy, low watts: a synchronisation bug) and SMs with nothing to do
(idle, low watts: too small a batch, a starved scheduler, host gaps). GPU
utilisation, the SM clock against its maximum, and the throttle reasons do.

The figures per GPU come from serving_benchmark_power.activity_figures(), the
function serving_benchmark's power summary uses too, so a verdict on raw
readings (cause_verdicts) and one on a module result (power_cause_verdicts)
rest on the same numbers. Each verdict carries them and one sentence that a
report and a failure message can print.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from statistics import median

from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_power import activity_figures

COMPUTE_BOUND = "compute-bound"
SPIN_WAIT = "spin-wait"
UNDERFED = "underfed"
POWER_CAPPED = "power-capped"
THERMAL = "thermal"
UNKNOWN = "unknown"
VERDICTS = (COMPUTE_BOUND, SPIN_WAIT, UNDERFED, POWER_CAPPED, THERMAL, UNKNOWN)

# Which GPU's verdict names the host's: a thermally throttled or power-capped GPU is the straggler a
# tensor-parallel group waits for (its peers then spin-wait on it), and one spinning GPU is a
# synchronisation problem of the whole group; underfed against compute-bound is a majority instead,
# since a host has GPUs the server does not use, and they idle.
_HOST_FIRST = (THERMAL, POWER_CAPPED, SPIN_WAIT)


class CauseThresholdError(ValueError):
    """A threshold is unknown or not a number."""


@dataclass(frozen=True)
class Thresholds:
    """Where the verdicts part; each default with the reason it is what it is."""

    # Fewer readings than this give no verdict: NVML's power is a 1 s average, so three readings at the
    # module's 0.5 s interval span the 1.5 s a load takes to show at all after it starts.
    min_samples: int = 3
    # At or above this median utilisation the SMs count as busy. NVML's utilisation is the share of its
    # sample period (1/6 s to 1 s) in which any kernel ran: GEMM and copy loops and a spinning kernel held
    # 94 to 100 % on the H200, 766 tiny kernels a second with host sleeps 0 %; below 80 % the GPU had
    # nothing queued a fifth of the time, which is what underfed means.
    busy_util_pct: float = 80.0
    # Busy GPUs from spin_max_power_fraction up to this median fraction of the limit are underfed, not
    # compute-bound: NVML counts a GPU busy while any kernel runs, however few SMs it fills. A real SGLang
    # server decoding one stream of a 1 B model on an H200 read 78 to 99 % busy at 0.38 to 0.40 of 700 W (its
    # kernels too small to fill 132 SMs); the same server prefilling 64 x 3,584 tokens read 100 % at 0.84 to
    # 0.86, a device-to-device copy at 4.3 TB/s 0.69 to 0.72, GEMMs 0.96 to 0.99 (docs/evidence/
    # real-sglang-h200.md, h200-cause-verdicts.md). GLM-5 on 8 RTX PRO 6000 at 250 W of 600 (0.42), the
    # article's "not fed enough work", falls below it too.
    saturated_min_power_fraction: float = 0.55
    # Busy GPUs below this median fraction of the limit spin. An RTX PRO 6000 spinning on peers' flags
    # draws 125 to 140 W of 600 (0.21 to 0.23), an H200 with a warp per SM spinning on a flag 125 to 137 W
    # of 700 (0.18 to 0.20, docs/evidence/h200-cause-verdicts.md); real work draws more, memory-bound work
    # too (the same H200 copying at 4.3 TB/s: 0.69 to 0.72). 0.30 leaves about 40 W above the RTX PRO
    # 6000's spin.
    spin_max_power_fraction: float = 0.30
    # At or above this median fraction the GPU counts as at its limit. The SW power cap holds NVML's 1 s
    # average a few percent under the limit (an H200 under bf16 GEMMs held 0.98 to 0.99 of 700 W,
    # docs/evidence/h200-power-sampling.md); 0.90 leaves room for the ramp and for looser controllers.
    at_limit_power_fraction: float = 0.90
    # A median SM clock below this fraction of the board's maximum counts as pulled down. Boost moves in
    # steps of 15 MHz and a busy board that nothing limits sits at its maximum (the H200 spinning, copying
    # or in fp32 GEMMs: 1980 of 1980 MHz); 10 % (about 200 MHz at 2 GHz) is well past that jitter, and a
    # limit pulls further (the H200 under 8192-square bf16 GEMMs at its 700 W cap: 1440 to 1470 MHz).
    # Near the line it is a judgement: 2048-square bf16 GEMMs held 1800 MHz (0.91) under the cap there
    # and read compute-bound; raise this to call such a GPU power-capped.
    pulled_down_clock_fraction: float = 0.90
    # A throttle reason counts when it is active in at least this share of the readings: the power cap
    # switches on and off as its controller hunts, so a majority says it governed the measurement.
    reason_min_share: float = 0.5
    # Where no throttle reasons could be read (nvidia-smi [N/A]), a busy GPU this hot with its clock
    # pulled down counts as thermal: NVIDIA boards begin their thermal slowdown in the high 80s to low
    # 90s °C ("GPU Slowdown Temp" of older drivers' nvidia-smi -q; driver 580 prints only the margin to
    # it, "GPU Slowdown T.Limit Temp"). With the reasons read, their bits decide and this is not used.
    hot_temperature_c: float = 85.0


def thresholds_from(overrides=None):
    """Thresholds with ``overrides`` (a mapping, say from role variables; None or "" keep a default) applied."""
    if isinstance(overrides, Thresholds):
        return overrides
    known = {field.name: field.type for field in fields(Thresholds)}
    chosen = {}
    for key, raw in (overrides or {}).items():
        if key not in known:
            raise CauseThresholdError("unknown cause threshold %r; known: %s" % (key, ", ".join(sorted(known))))
        if raw is None or raw == "":
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = math.nan
        if isinstance(raw, bool) or not math.isfinite(value):
            raise CauseThresholdError("cause threshold %s must be a number, got %r" % (key, raw))
        chosen[key] = int(value) if key == "min_samples" else value
    return Thresholds(**chosen)


# ------------------------------------------------------------------ one GPU

def _pct(value):
    return "%.0f %%" % value


def _busy(figures):
    """The median utilisation, and the mean beside it where the two part: a GPU busy in bursts reads 0 % by its
    median reading (a real server at 256 streams: 0 % in 69 to 76 % of NVML's readings, 11 to 17 % on average)."""
    util, mean = figures.get("median_util_pct"), figures.get("mean_util_pct")
    if mean is None or abs(mean - util) < 5:
        return _pct(util)
    return "%s (%s on average)" % (_pct(util), _pct(mean))


def _of_limit(figures):
    limit = figures.get("limit_w")
    return "%.2f of its %s limit" % (figures["median_power_fraction"], "%.0f W" % limit if limit else "power")


def _clock(figures):
    top = figures.get("max_sm_clock_mhz")
    return "%.2f of its %s" % (figures["median_clock_fraction"], "%.0f MHz maximum" % top if top else "maximum")


def _share(value):
    return "%.0f %% of the readings" % (100 * value)


def _decide(figures, limits):
    """(verdict, the sentence's text after the GPU's name)."""
    power, util = figures.get("median_power_fraction"), figures.get("median_util_pct")
    missing = [name for name, value in (("power", power), ("utilisation", util)) if value is None]
    if missing:
        return UNKNOWN, "has no verdict: no %s readings" % " or ".join(missing)
    samples = figures.get("samples") or 0
    if samples < limits.min_samples:
        return UNKNOWN, "has no verdict: %d readings, fewer than the %d needed" % (samples, limits.min_samples)
    clock = figures.get("median_clock_fraction")
    pulled_down = clock is not None and clock < limits.pulled_down_clock_fraction
    busy = util >= limits.busy_util_pct
    reasons_read = bool(figures.get("throttle_reason_samples"))
    thermal_share = figures.get("thermal_reason_share") or 0.0
    power_share = figures.get("power_reason_share") or 0.0
    temperature = figures.get("median_temperature_c")
    hot = not reasons_read and busy and pulled_down and temperature is not None \
        and temperature >= limits.hot_temperature_c
    if hot or ((pulled_down or clock is None) and thermal_share >= limits.reason_min_share):
        return THERMAL, ("is thermally throttled: the SM clock is pulled down to %s at %s (thermal slowdown in %s): "
                         "check the cooling and the airflow" % (
                             _clock(figures) if clock is not None else "an unknown fraction of its maximum",
                             "%.0f °C" % temperature if temperature is not None else "an unknown temperature",
                             _share(thermal_share) if reasons_read else "no reason read, by temperature"))
    if pulled_down and (power_share >= limits.reason_min_share or power >= limits.at_limit_power_fraction):
        return POWER_CAPPED, ("is power-capped: at %s with the SM clock pulled down to %s (a power-cap reason in "
                              "%s): the power limit, not the load, bounds it" % (
                                  _of_limit(figures), _clock(figures),
                                  _share(power_share) if reasons_read else "no reason read"))
    if not busy:
        if power >= limits.at_limit_power_fraction:
            return COMPUTE_BOUND, ("is compute-bound: at %s though busy only %s of the time, short kernels that "
                                   "draw the most the board allows" % (_of_limit(figures), _pct(util)))
        return UNDERFED, ("is underfed: busy only %s of the time at %s, so the batch is too small, the scheduler "
                          "starves it or the host leaves gaps between kernels" % (_busy(figures), _of_limit(figures)))
    if power < limits.spin_max_power_fraction:
        if pulled_down:
            return UNKNOWN, ("has no verdict: busy %s of the time at %s with the SM clock held at %s and no power "
                             "or thermal reason, so neither a spin nor a lack of work explains it (clocks locked?)"
                             % (_pct(util), _of_limit(figures), _clock(figures)))
        return SPIN_WAIT, ("is spin-waiting: busy %s of the time yet drawing only %s%s, the mark of kernels that "
                           "spin on a flag (GPUs waiting on each other): look for a synchronisation bug, not for "
                           "more load" % (_pct(util), _of_limit(figures),
                                          " at %s" % _clock(figures) if clock is not None else ""))
    if power < limits.saturated_min_power_fraction and not pulled_down:
        return UNDERFED, ("is underfed: busy %s of the time yet at only %s, so its kernels are too small to fill it "
                          "(a small batch or a small model; NVML counts the GPU busy while any kernel runs, however "
                          "few SMs it uses)" % (_busy(figures), _of_limit(figures)))
    return COMPUTE_BOUND, ("is compute-bound: busy %s of the time at %s%s, so its SMs do real work (compute- or "
                           "memory-bound), not wait" % (_pct(util), _of_limit(figures),
                                                        " with the SM clock at %s" % _clock(figures)
                                                        if clock is not None else ""))


_NUMBERS = ("samples", "median_power_fraction", "median_util_pct", "mean_util_pct", "median_clock_fraction", "throttle_reason_share",
            "power_reason_share", "thermal_reason_share", "median_temperature_c", "max_sm_clock_mhz", "limit_w")


def gpu_verdict(index, figures, thresholds=None):
    """One GPU's verdict from its activity figures (plus ``limit_w`` where known), with its numbers and sentence."""
    figures = dict(figures) if isinstance(figures, Mapping) else {}
    verdict, text = _decide(figures, thresholds_from(thresholds))
    entry = {"index": index, "verdict": verdict, "explanation": "GPU %s %s." % (index, text)}
    entry.update({key: figures.get(key) for key in _NUMBERS})
    entry["throttle_reason_shares"] = figures.get("throttle_reason_shares") or {}
    return entry


# ------------------------------------------------------------------ the host

def _indices(entries):
    return ", ".join(str(entry["index"]) for entry in entries)


def host_verdict(gpus):
    """The host's verdict from its GPUs' (see _HOST_FIRST), with the median of their numbers and one sentence."""
    known = [gpu for gpu in gpus if gpu["verdict"] != UNKNOWN]
    by_verdict = {verdict: [gpu["index"] for gpu in gpus if gpu["verdict"] == verdict] for verdict in VERDICTS}
    numbers = {}
    for key in ("median_power_fraction", "median_util_pct", "median_clock_fraction", "throttle_reason_share"):
        values = [gpu[key] for gpu in known if gpu.get(key) is not None]
        numbers[key] = round(median(values), 4) if values else None
    host = {"verdict": UNKNOWN, "gpus_by_verdict": {key: value for key, value in by_verdict.items() if value}}
    host.update(numbers)
    if not known:
        reasons = "; ".join(gpu["explanation"].rstrip(".") for gpu in gpus) or "no GPU was sampled"
        host["explanation"] = "No verdict for the host: %s." % reasons
        return host
    deciding = next((verdict for verdict in _HOST_FIRST if by_verdict[verdict]), None)
    if deciding is None:
        deciding = UNDERFED if len(by_verdict[UNDERFED]) >= len(by_verdict[COMPUTE_BOUND]) else COMPUTE_BOUND
    named = [gpu for gpu in known if gpu["verdict"] == deciding]
    others = ["%d %s" % (len(indices), verdict) for verdict, indices in by_verdict.items()
              if indices and verdict != deciding]
    host["verdict"] = deciding
    host["explanation"] = "Host %s on GPU %s of %d: %s%s" % (
        deciding, _indices(named), len(gpus), named[0]["explanation"].rstrip("."),
        " (the others: %s)." % ", ".join(others) if others else ".")
    return host


# ------------------------------------------------------------------ entry points

def _readings_by_gpu(samples):
    if isinstance(samples, Mapping):
        return {int(index): list(readings) for index, readings in samples.items()}
    by_gpu = {}
    for sample in samples:
        for reading in sample:
            index = reading.get("index") if isinstance(reading, Mapping) else reading.index
            by_gpu.setdefault(int(index), []).append(reading)
    return by_gpu


def _limit(readings):
    for reading in reversed(readings):
        limit = reading.get("limit_w") if isinstance(reading, Mapping) else getattr(reading, "limit_watts", None)
        if limit:
            return limit
    return None


def cause_verdicts(samples, thresholds=None):
    """Per GPU and for the host, the verdict over a measurement's readings.

    ``samples``: a mapping of GPU index to that GPU's readings, or the
    sampler's list of samples (each a list of every GPU's reading). A reading
    is a gpu_power.GpuReading or its as_dict() mapping: power_w, limit_w,
    util_pct, sm_clock_mhz, max_sm_clock_mhz, temperature_c, throttle_reasons.
    """
    limits = thresholds_from(thresholds)
    gpus = []
    for index, readings in sorted(_readings_by_gpu(samples).items()):
        figures = dict(activity_figures(readings), limit_w=_limit(readings))
        gpus.append(gpu_verdict(index, figures, limits))
    return {"gpus": gpus, "host": host_verdict(gpus), "thresholds": asdict(limits)}


def result_host_verdict(result, thresholds=None):
    """The host's verdict for a serving_benchmark result, from its ``power``; unknown where it has none."""
    power = result.get("power") if isinstance(result, Mapping) else None
    return power_cause_verdicts(power if isinstance(power, Mapping) else {}, thresholds)["host"]


def power_cause_verdicts(power, thresholds=None):
    """The same verdicts from a serving_benchmark result's ``power`` (its gpus[].activity figures)."""
    limits = thresholds_from(thresholds)
    entries = power.get("gpus") if isinstance(power, Mapping) else None
    gpus = [gpu_verdict(gpu.get("index", position), dict(gpu.get("activity") or {}, limit_w=gpu.get("limit_w")),
                        limits)
            for position, gpu in enumerate(entries or []) if isinstance(gpu, Mapping)]
    return {"gpus": gpus, "host": host_verdict(gpus), "thresholds": asdict(limits)}

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a GPU's power draw and power limit are read, through NVML and through nvidia-smi.

The one reader behind ``sm120.sglang.gpu_facts`` (one reading of every value,
its command run by the module) and ``sm120.sglang.serving_benchmark`` (draw and
limit of every GPU, read again and again by serving_benchmark_power's sampler):
the nvidia-smi command line, its fields and their parsing, what nvidia-smi
prints for a value it cannot read, NVML's milliwatts and the NVML calls.

A source opened with ``activity=True`` also reads what tells apart the causes
of low power under load (plugin_utils/cause_verdict.py decides): GPU
utilisation, SM clock and its maximum, temperature and the clock throttle
reasons (NVML's "clocks event reasons", their name since driver 535).

Standard library only: this runs on the target with the host's own Python 3.9+.
``nvml`` below is the ``pynvml`` module of nvidia-ml-py, or a stand-in for it.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

# The fields one power sample asks nvidia-smi for, in this order.
POWER_SAMPLE_FIELDS = ("index", "power.draw", "power.limit")
# ... and one activity sample, in this order. Drivers since 535 call the reasons
# clocks_event_reasons; older ones know only clocks_throttle_reasons, which later
# drivers still accept (the device check in docs/evidence/h200-cause-verdicts.md).
ACTIVITY_FIELDS = ("utilization.gpu", "clocks.sm", "clocks.max.sm", "temperature.gpu")
ACTIVITY_SAMPLE_FIELDS = POWER_SAMPLE_FIELDS + ACTIVITY_FIELDS + ("clocks_event_reasons.active",)
ACTIVITY_SAMPLE_FIELDS_BEFORE_535 = POWER_SAMPLE_FIELDS + ACTIVITY_FIELDS + ("clocks_throttle_reasons.active",)
NVIDIA_SMI_TIMEOUT_S = 10.0

# The bits of NVML's clocks event (throttle) reason mask, nvml.h's values, and the names used here.
# hw_slowdown alone says neither power nor heat: NVML sets it for either, and with the two below.
THROTTLE_REASON_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
# The reasons that say the power limit, or the heat, holds the clock down; and every reason that lowers it
# below what the load asks for (gpu_idle, the clock settings and sync boost are no limit of the board's).
POWER_REASONS = ("sw_power_cap", "hw_power_brake_slowdown")
THERMAL_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown")
LIMITING_REASONS = POWER_REASONS + THERMAL_REASONS + ("hw_slowdown",)


class PowerSourceUnavailable(Exception):
    """No power readings can come from this source; the message says why."""


@dataclass
class GpuReading:
    """One GPU at one moment; the activity fields stay None where they were not asked for or not readable.

    ``throttle_reasons`` is a tuple of THROTTLE_REASON_BITS names, () when no
    reason is active; ``util_pct`` the share of NVML's last sample period (1/6 s
    to 1 s by product) in which a kernel ran.
    """

    index: int
    watts: Optional[float]
    limit_watts: Optional[float]
    util_pct: Optional[float] = None
    sm_clock_mhz: Optional[float] = None
    max_sm_clock_mhz: Optional[float] = None
    temperature_c: Optional[float] = None
    throttle_reasons: Optional[Tuple[str, ...]] = None

    def as_dict(self):
        """The reading under the names cause_verdict and the module's results use."""
        return {"index": self.index, "power_w": self.watts, "limit_w": self.limit_watts, "util_pct": self.util_pct,
                "sm_clock_mhz": self.sm_clock_mhz, "max_sm_clock_mhz": self.max_sm_clock_mhz,
                "temperature_c": self.temperature_c,
                "throttle_reasons": None if self.throttle_reasons is None else list(self.throttle_reasons)}


def throttle_reason_names(bits):
    """The names of the reasons set in an NVML reason mask, in bit order; bits nvml.h did not name show as hex."""
    names = tuple(name for bit, name in THROTTLE_REASON_BITS if bits & bit)
    rest = bits & ~sum(bit for bit, _name in THROTTLE_REASON_BITS)
    return names + (("other_0x%x" % rest,) if rest else ())


def throttle_reason_mask(names):
    """The NVML reason mask of throttle_reason_names' names, back again: the number dcgm-exporter serves."""
    bits = dict((name, bit) for bit, name in THROTTLE_REASON_BITS)
    mask = 0
    for name in names:
        if name in bits:
            mask |= bits[name]
        elif name.startswith("other_0x"):
            mask |= int(name[len("other_"):], 16)
        else:
            raise ValueError("%r is no throttle reason of THROTTLE_REASON_BITS" % (name,))
    return mask


# ---------------------------------------------------------------- nvidia-smi

def nvidia_smi_query_argv(nvidia_smi, fields):
    """The nvidia-smi command line that prints one CSV row of ``fields`` per GPU, without units."""
    return [nvidia_smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def power_sample_argv(nvidia_smi):
    """The nvidia-smi command line of one power sample: index, draw and limit of every GPU."""
    return nvidia_smi_query_argv(nvidia_smi, POWER_SAMPLE_FIELDS)


def unavailable(value):
    """Whether a stripped nvidia-smi field is its way of saying it cannot read the value.

    It prints "[N/A]", "[Not Supported]", "[Unknown Error]" ... in brackets, and a bare "N/A" in places.
    """
    return value in ("", "N/A") or (value.startswith("[") and value.endswith("]"))


def parse_watts(field):
    """Watts from a ``nounits`` power field; None where nvidia-smi cannot read it; ValueError on anything else."""
    field = field.strip()
    return None if unavailable(field) else float(field)


def parse_number(field):
    """A ``nounits`` number field (utilisation, clock, temperature); None where nvidia-smi cannot read it."""
    field = field.strip()
    return None if unavailable(field) else float(field)


def parse_throttle_reasons(field):
    """The reason names of a ``clocks_event_reasons.active`` field ("0x0000000000000004"); None for [N/A]."""
    field = field.strip()
    return None if unavailable(field) else throttle_reason_names(int(field, 16))


# nvidia-smi query field -> (GpuReading attribute, parser of its nounits text).
_SAMPLE_COLUMNS = {
    "power.draw": ("watts", parse_watts),
    "power.limit": ("limit_watts", parse_watts),
    "utilization.gpu": ("util_pct", parse_number),
    "clocks.sm": ("sm_clock_mhz", parse_number),
    "clocks.max.sm": ("max_sm_clock_mhz", parse_number),
    "temperature.gpu": ("temperature_c", parse_number),
    "clocks_event_reasons.active": ("throttle_reasons", parse_throttle_reasons),
    "clocks_throttle_reasons.active": ("throttle_reasons", parse_throttle_reasons),
}


def _sampled(parse, field):
    # A sample with one odd field still counts for the other GPUs and fields.
    try:
        return parse(field)
    except ValueError:
        return None


def parse_sample(text, fields):
    """GpuReadings from nvidia-smi's rows for ``fields`` (index first); lines that are no GPU row are skipped."""
    readings = []
    for line in text.splitlines():
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(fields) or not values[0].isdigit():
            continue
        reading = GpuReading(int(values[0]), None, None)
        for field, value in zip(fields[1:], values[1:]):
            attribute, parse = _SAMPLE_COLUMNS[field]
            setattr(reading, attribute, _sampled(parse, value))
        readings.append(reading)
    return readings


def parse_power_sample(text):
    """GpuReadings from the rows of ``power_sample_argv``'s output; lines that are no GPU row are skipped."""
    return parse_sample(text, POWER_SAMPLE_FIELDS)


# ---------------------------------------------------------------- NVML

def watts(milliwatts):
    """NVML reports power in milliwatts."""
    return milliwatts / 1000.0


def nvml_power_draw_w(nvml, handle):
    return watts(nvml.nvmlDeviceGetPowerUsage(handle))


def nvml_power_limit_w(nvml, handle):
    """The limit in force."""
    return watts(nvml.nvmlDeviceGetPowerManagementLimit(handle))


def nvml_power_default_limit_w(nvml, handle):
    return watts(nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle))


def nvml_power_limit_range_w(nvml, handle):
    """(lowest, highest) limit the board accepts."""
    low, high = nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
    return watts(low), watts(high)


def nvml_util_pct(nvml, handle):
    return float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)


def nvml_sm_clock_mhz(nvml, handle):
    return float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))


def nvml_max_sm_clock_mhz(nvml, handle):
    return float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))


def nvml_temperature_c(nvml, handle):
    """NVML 12.9 deprecated nvmlDeviceGetTemperature for ...TemperatureV; bindings may carry either."""
    try:
        return float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
    except Exception:
        read_v = getattr(nvml, "nvmlDeviceGetTemperatureV", None)
        if read_v is None:
            raise
        return float(read_v(handle, nvml.NVML_TEMPERATURE_GPU))


def nvml_throttle_reasons(nvml, handle):
    """nvidia-ml-py 12.535 and later name the call ...ClocksEventReasons; older ones only ...ClocksThrottleReasons."""
    read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if read is None:
        read = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return throttle_reason_names(read(handle))


# ---------------------------------------------------------------- sources of repeated readings

@dataclass
class PowerSource:
    name: str
    read: Callable[[], List[GpuReading]]
    close: Callable[[], None] = lambda: None
    # Whether its readings carry the activity fields; nvidia-smi's are in ``fields``.
    activity: bool = False
    fields: Tuple[str, ...] = ()


def _nvidia_smi_reader(path, fields):
    argv = nvidia_smi_query_argv(path, fields)

    def read():
        # subprocess rather than AnsibleModule.run_command: this runs on the
        # sampler thread, and module_utils here stay free of AnsibleModule.
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise PowerSourceUnavailable("%s exited with %d: %s" % (path, done.returncode,
                                                                    (done.stderr or done.stdout).strip()[:200]))
        readings = parse_sample(done.stdout, fields)
        if not readings:
            raise PowerSourceUnavailable("%s printed no GPU rows: %r" % (path, done.stdout[:200]))
        return readings

    return read


def nvidia_smi_source(executable, activity=False):
    """nvidia-smi's readings; with ``activity``, the first of the activity field sets this driver answers.

    A driver that rejects a field name exits non-zero ("is not a valid field to
    query"), so the sets are tried in order at opening, down to power alone.
    """
    path = shutil.which(executable)
    if path is None:
        raise PowerSourceUnavailable("nvidia-smi not found at %r" % executable)
    candidates = [POWER_SAMPLE_FIELDS]
    if activity:
        candidates[:0] = [ACTIVITY_SAMPLE_FIELDS, ACTIVITY_SAMPLE_FIELDS_BEFORE_535]
    for fields in candidates:
        read = _nvidia_smi_reader(path, fields)
        try:
            read()
        except (OSError, subprocess.SubprocessError) as exc:
            raise PowerSourceUnavailable("%s cannot run: %s" % (path, exc))
        except PowerSourceUnavailable:
            if fields is POWER_SAMPLE_FIELDS:
                raise
            continue
        return PowerSource("nvidia-smi", read, activity=fields is not POWER_SAMPLE_FIELDS, fields=fields)
    raise AssertionError("unreachable: the power fields are the last candidate")


def _import_pynvml():
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def nvml_source(activity=False, settings_once=True):
    nvml = _import_pynvml()
    if nvml is None:
        raise PowerSourceUnavailable("the Python module pynvml (nvidia-ml-py) is not installed")
    try:
        nvml.nvmlInit()
    except Exception as exc:
        # NVMLError is pynvml's own class; a missing driver library shows as others.
        raise PowerSourceUnavailable("NVML did not initialize: %s" % exc)
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    except Exception as exc:
        nvml.nvmlShutdown()
        raise PowerSourceUnavailable("NVML cannot list the GPUs: %s" % exc)
    if not handles:
        nvml.nvmlShutdown()
        raise PowerSourceUnavailable("NVML found no GPUs")

    def or_none(read_w, handle):
        try:
            return read_w(nvml, handle)
        except Exception:
            return None

    # ``settings_once``: the limit and the top clock are read at opening: the sampler measures a run, not a change of
    # settings. An exporter runs for months, across the limits gpu_driver and the experiments set: it reads them with
    # every reading (settings_once=False).
    def settings():
        return ([or_none(nvml_power_limit_w, handle) for handle in handles],
                [or_none(nvml_max_sm_clock_mhz, handle) if activity else None for handle in handles])

    opened = settings() if settings_once else None

    def reading(i, handle, limits, max_clocks):
        power = GpuReading(i, or_none(nvml_power_draw_w, handle), limits[i])
        if activity:
            power.util_pct = or_none(nvml_util_pct, handle)
            power.sm_clock_mhz = or_none(nvml_sm_clock_mhz, handle)
            power.max_sm_clock_mhz = max_clocks[i]
            power.temperature_c = or_none(nvml_temperature_c, handle)
            power.throttle_reasons = or_none(nvml_throttle_reasons, handle)
        return power

    def read():
        limits, max_clocks = opened or settings()
        return [reading(i, handle, limits, max_clocks) for i, handle in enumerate(handles)]

    return PowerSource("nvml", read, nvml.nvmlShutdown, activity=activity)


def open_power_source(nvidia_smi, activity=False, settings_once=True):
    """NVML when the target's Python has pynvml, else nvidia-smi; raise with both reasons when neither works.

    ``activity``: the readings also carry utilisation, SM clocks, temperature
    and throttle reasons, wherever the source can read them. ``settings_once``
    False: NVML reads the power limit and the top SM clock again with every
    reading (nvidia-smi always does).
    """
    reasons = []
    for opener in (lambda: nvml_source(activity, settings_once), lambda: nvidia_smi_source(nvidia_smi, activity)):
        try:
            return opener()
        except PowerSourceUnavailable as exc:
            reasons.append(str(exc))
    raise PowerSourceUnavailable("; ".join(reasons))

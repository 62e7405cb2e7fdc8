# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a GPU's power draw and power limit are read, through NVML and through nvidia-smi.

The one reader behind ``sm120.sglang.gpu_facts`` (one reading of every value,
its command run by the module) and ``sm120.sglang.serving_benchmark`` (draw and
limit of every GPU, read again and again by serving_benchmark_power's sampler):
the nvidia-smi command line, its fields and their parsing, what nvidia-smi
prints for a value it cannot read, NVML's milliwatts and the NVML calls.

Standard library only: this runs on the target with the host's own Python 3.9+.
``nvml`` below is the ``pynvml`` module of nvidia-ml-py, or a stand-in for it.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, List, Optional

# The fields one power sample asks nvidia-smi for, in this order.
POWER_SAMPLE_FIELDS = ("index", "power.draw", "power.limit")
NVIDIA_SMI_TIMEOUT_S = 10.0


class PowerSourceUnavailable(Exception):
    """No power readings can come from this source; the message says why."""


@dataclass
class GpuReading:
    index: int
    watts: Optional[float]
    limit_watts: Optional[float]


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


def _sampled_watts(field):
    # A sample with one odd field still counts for the other GPUs and fields.
    try:
        return parse_watts(field)
    except ValueError:
        return None


def parse_power_sample(text):
    """GpuReadings from the rows of ``power_sample_argv``'s output; lines that are no GPU row are skipped."""
    readings = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != len(POWER_SAMPLE_FIELDS) or not fields[0].isdigit():
            continue
        readings.append(GpuReading(int(fields[0]), _sampled_watts(fields[1]), _sampled_watts(fields[2])))
    return readings


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


# ---------------------------------------------------------------- sources of repeated readings

@dataclass
class PowerSource:
    name: str
    read: Callable[[], List[GpuReading]]
    close: Callable[[], None] = lambda: None


def nvidia_smi_source(executable):
    path = shutil.which(executable)
    if path is None:
        raise PowerSourceUnavailable("nvidia-smi not found at %r" % executable)
    argv = power_sample_argv(path)

    def read():
        # subprocess rather than AnsibleModule.run_command: this runs on the
        # sampler thread, and module_utils here stay free of AnsibleModule.
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise PowerSourceUnavailable("%s exited with %d: %s" % (path, done.returncode,
                                                                    (done.stderr or done.stdout).strip()[:200]))
        readings = parse_power_sample(done.stdout)
        if not readings:
            raise PowerSourceUnavailable("%s printed no GPU rows: %r" % (path, done.stdout[:200]))
        return readings

    try:
        read()
    except (OSError, subprocess.SubprocessError) as exc:
        raise PowerSourceUnavailable("%s cannot run: %s" % (path, exc))
    return PowerSource("nvidia-smi", read)


def _import_pynvml():
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def nvml_source():
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

    # The limit is read once: the sampler measures a run, not a change of settings.
    limits = [or_none(nvml_power_limit_w, handle) for handle in handles]

    def read():
        return [GpuReading(i, or_none(nvml_power_draw_w, handle), limits[i]) for i, handle in enumerate(handles)]

    return PowerSource("nvml", read, nvml.nvmlShutdown)


def open_power_source(nvidia_smi):
    """NVML when the target's Python has pynvml, else nvidia-smi; raise with both reasons when neither works."""
    reasons = []
    for opener in (nvml_source, lambda: nvidia_smi_source(nvidia_smi)):
        try:
            return opener()
        except PowerSourceUnavailable as exc:
            reasons.append(str(exc))
    raise PowerSourceUnavailable("; ".join(reasons))

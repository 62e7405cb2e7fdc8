# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one GPU power reader: nvidia-smi's command line and fields, NVML's milliwatts, and the sources built on them.

gpu_facts and serving_benchmark's sampler both read power through it; the last
tests here hold them to the same figures for the same text and the same NVML.
"""

from __future__ import annotations

import stat
import types

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils import gpu_facts, gpu_power

# Rows as nvidia-smi prints them for --query-gpu=index,power.draw,power.limit
# --format=csv,noheader,nounits (values from a real H200, driver 580.159.04);
# GPUs that cannot report a value print [N/A].
NVIDIA_SMI_ROWS = "0, 116.47, 700.00\n1, [N/A], 600.00\n2, 250.5, [N/A]\n"


def fake_nvidia_smi(tmp_path, rows=NVIDIA_SMI_ROWS, exit_code=0):
    """A script that stands in for nvidia-smi (and so for the GPUs); it records its arguments."""
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho \"$@\" > '%s/args'\ncat <<'EOF'\n%sEOF\nexit %d\n" % (tmp_path, rows, exit_code))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def fake_pynvml(powers_mw, limit_mw=600000):
    """A stand-in for the pynvml module (and so for the GPUs)."""

    class NVMLError(Exception):
        pass

    def power_usage(handle):
        if powers_mw[handle] is None:
            raise NVMLError("Not Supported")
        return powers_mw[handle]

    calls = []
    return types.SimpleNamespace(
        NVMLError=NVMLError, calls=calls, NVML_FEATURE_ENABLED=1,
        nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: len(powers_mw), nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetPowerUsage=power_usage, nvmlDeviceGetPowerManagementLimit=lambda handle: limit_mw,
    )


# ---------------------------------------------------------------- nvidia-smi

def test_a_power_sample_asks_nvidia_smi_for_index_draw_and_limit_without_units():
    assert gpu_power.power_sample_argv("/usr/bin/nvidia-smi") == [
        "/usr/bin/nvidia-smi", "--query-gpu=index,power.draw,power.limit", "--format=csv,noheader,nounits"]


@pytest.mark.parametrize("field", ["[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]",
                                   "", " [N/A] "])
def test_what_nvidia_smi_prints_for_a_value_it_cannot_read_is_none(field):
    assert gpu_power.unavailable(field.strip())
    assert gpu_power.parse_watts(field) is None


def test_watts_are_read_as_printed_and_anything_else_is_an_error():
    assert gpu_power.parse_watts("116.47") == 116.47 and gpu_power.parse_watts(" 700.00 ") == 700.0
    assert not gpu_power.unavailable("116.47")
    with pytest.raises(ValueError, match="could not convert"):
        gpu_power.parse_watts("lots")


def test_nvidia_smi_rows_parse_with_n_a_as_none():
    assert gpu_power.parse_power_sample(NVIDIA_SMI_ROWS + "\nNo devices were found\n") == [
        gpu_power.GpuReading(0, 116.47, 700.0), gpu_power.GpuReading(1, None, 600.0),
        gpu_power.GpuReading(2, 250.5, None)]


def test_an_odd_field_in_a_sample_leaves_that_value_unknown_and_keeps_the_rest():
    assert gpu_power.parse_power_sample("0, lots, 600.00\n1, 80.5, 600.00, extra\n") == [
        gpu_power.GpuReading(0, None, 600.0)]


# ---------------------------------------------------------------- NVML

def test_nvml_milliwatts_are_watts_over_a_thousand_unrounded():
    assert gpu_power.watts(79613) == 79.613
    nvml = types.SimpleNamespace(
        nvmlDeviceGetPowerUsage=lambda handle: 79613, nvmlDeviceGetPowerManagementLimit=lambda handle: 600000,
        nvmlDeviceGetPowerManagementDefaultLimit=lambda handle: 575000,
        nvmlDeviceGetPowerManagementLimitConstraints=lambda handle: [150000, 600000])
    assert gpu_power.nvml_power_draw_w(nvml, 0) == 79.613
    assert gpu_power.nvml_power_limit_w(nvml, 0) == 600.0
    assert gpu_power.nvml_power_default_limit_w(nvml, 0) == 575.0
    assert gpu_power.nvml_power_limit_range_w(nvml, 0) == (150.0, 600.0)


# ---------------------------------------------------------------- sources

def test_failing_nvidia_smi_is_not_a_source(tmp_path, without_pynvml):
    broken = fake_nvidia_smi(tmp_path, rows="NVIDIA-SMI has failed because it couldn't communicate\n",
                             exit_code=9)
    with pytest.raises(gpu_power.PowerSourceUnavailable, match="exited with 9: NVIDIA-SMI has failed"):
        gpu_power.open_power_source(broken)


def test_nvidia_smi_that_prints_no_gpu_row_is_not_a_source(tmp_path, without_pynvml):
    with pytest.raises(gpu_power.PowerSourceUnavailable, match="printed no GPU rows"):
        gpu_power.open_power_source(fake_nvidia_smi(tmp_path, rows="No devices were found\n"))


def test_without_nvml_or_nvidia_smi_there_is_no_source_and_both_reasons_are_given(tmp_path, without_pynvml):
    missing = str(tmp_path / "nowhere" / "nvidia-smi")
    with pytest.raises(gpu_power.PowerSourceUnavailable) as failure:
        gpu_power.open_power_source(missing)
    assert "pynvml" in str(failure.value) and "nvidia-smi not found at %r" % missing in str(failure.value)


def test_nvml_comes_first_when_pynvml_is_there(monkeypatch):
    nvml = fake_pynvml([450000, None])
    monkeypatch.setattr(gpu_power, "_import_pynvml", lambda: nvml)
    source = gpu_power.open_power_source("/nonexistent/nvidia-smi")
    assert source.name == "nvml"
    assert source.read() == [gpu_power.GpuReading(0, 450.0, 600.0), gpu_power.GpuReading(1, None, 600.0)]
    source.close()
    assert nvml.calls == ["init", "shutdown"]


def test_nvml_without_gpus_falls_back_to_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_power, "_import_pynvml", lambda: fake_pynvml([]))
    assert gpu_power.open_power_source(fake_nvidia_smi(tmp_path)).name == "nvidia-smi"


# ---------------------------------------------------------------- one reader for gpu_facts and the sampler

def test_gpu_facts_and_the_sampler_read_the_same_rows_as_the_same_watts(tmp_path, without_pynvml):
    facts = gpu_facts.parse_query_gpu_csv(NVIDIA_SMI_ROWS, gpu_power.POWER_SAMPLE_FIELDS)
    sampled = gpu_power.open_power_source(fake_nvidia_smi(tmp_path)).read()
    assert [(gpu["index"], gpu["power_draw_w"], gpu["power_limit_w"]) for gpu in facts] == [
        (reading.index, reading.watts, reading.limit_watts) for reading in sampled]
    argv = gpu_facts.query_gpu_argv("nvidia-smi", gpu_power.POWER_SAMPLE_FIELDS)
    assert argv == gpu_power.power_sample_argv("nvidia-smi")
    assert (tmp_path / "args").read_text().split() == argv[1:]


def test_gpu_facts_and_the_sampler_read_nvml_alike_and_facts_round_as_nvidia_smi_prints(monkeypatch):
    nvml = fake_pynvml([412500, 79613])
    monkeypatch.setattr(gpu_power, "_import_pynvml", lambda: nvml)
    sampled = gpu_power.nvml_source().read()
    # nvidia-smi read everything but draw and limit, so gpu_facts asks NVML for just those two.
    unread = [dict({key: 1 for key in gpu_facts.GPU_KEYS}, index=index, power_draw_w=None, power_limit_w=None)
              for index in (0, 1)]
    facts, answered = gpu_facts.fill_missing_from_nvml(nvml, unread)
    assert answered
    assert [gpu["power_draw_w"] for gpu in facts] == [412.5, 79.61]
    assert [reading.watts for reading in sampled] == [412.5, 79.613]
    assert [gpu["power_limit_w"] for gpu in facts] == [reading.limit_watts for reading in sampled] == [600.0, 600.0]

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one GPU power reader: nvidia-smi's command line and fields, NVML's milliwatts, and the sources built on them.

With activity, the same for utilisation, SM clocks, temperature and the clock throttle reasons.

gpu_facts and serving_benchmark's sampler both read power through it; the tests
under "one reader" hold them to the same figures for the same text and the same NVML.
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


# ---------------------------------------------------------------- activity: utilisation, clocks, temperature, reasons

# Rows as nvidia-smi prints them for ACTIVITY_SAMPLE_FIELDS with --format=csv,noheader,nounits. Row 0 is
# verbatim from the H200 of docs/evidence/h200-cause-verdicts.md (idle, driver 580.159.04); row 1 is that
# H200's median reading under the bf16 GEMM loop of the same run, in the same format; row 2 a GPU that can
# read neither its utilisation nor its reasons.
ACTIVITY_ROWS = ("0, 83.15, 700.00, 0, 345, 1980, 41, 0x0000000000000001\n"
                 "1, 691.80, 700.00, 99, 1440, 1980, 62, 0x0000000000000004\n"
                 "2, 130.05, 600.00, [N/A], 1980, [N/A], 43, [N/A]\n")


def fake_nvidia_smi_by_fields(tmp_path, answers):
    """A stand-in for nvidia-smi that answers a query naming a field of ``answers`` with its (exit code, text)."""
    cases = "".join("  *%s*) cat <<'EOF'\n%sEOF\n  exit %d;;\n" % (field, text, code)
                    for field, (code, text) in answers.items())
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho \"$@\" >> '%s/args'\ncase \"$*\" in\n%sesac\nexit 9\n" % (tmp_path, cases))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_an_activity_sample_asks_for_utilisation_clocks_temperature_and_clock_event_reasons():
    assert gpu_power.nvidia_smi_query_argv("nvidia-smi", gpu_power.ACTIVITY_SAMPLE_FIELDS) == [
        "nvidia-smi", "--query-gpu=index,power.draw,power.limit,utilization.gpu,clocks.sm,clocks.max.sm,"
        "temperature.gpu,clocks_event_reasons.active", "--format=csv,noheader,nounits"]
    assert gpu_power.ACTIVITY_SAMPLE_FIELDS_BEFORE_535[-1] == "clocks_throttle_reasons.active"


def test_activity_rows_parse_into_readings_with_n_a_as_none():
    assert gpu_power.parse_sample(ACTIVITY_ROWS, gpu_power.ACTIVITY_SAMPLE_FIELDS) == [
        gpu_power.GpuReading(0, 83.15, 700.0, 0.0, 345.0, 1980.0, 41.0, ("gpu_idle",)),
        gpu_power.GpuReading(1, 691.8, 700.0, 99.0, 1440.0, 1980.0, 62.0, ("sw_power_cap",)),
        gpu_power.GpuReading(2, 130.05, 600.0, None, 1980.0, None, 43.0, None)]


def test_a_power_only_row_is_no_activity_row_and_an_activity_row_no_power_row():
    assert gpu_power.parse_sample(NVIDIA_SMI_ROWS, gpu_power.ACTIVITY_SAMPLE_FIELDS) == []
    assert gpu_power.parse_power_sample(ACTIVITY_ROWS) == []


@pytest.mark.parametrize("bits, names", [
    (0x0, ()), (0x1, ("gpu_idle",)), (0x4, ("sw_power_cap",)),
    (0x24, ("sw_power_cap", "sw_thermal_slowdown")), (0x48, ("hw_slowdown", "hw_thermal_slowdown")),
    (0x80, ("hw_power_brake_slowdown",)), (0x400, ("other_0x400",)), (0x401, ("gpu_idle", "other_0x400"))])
def test_a_reason_mask_reads_as_the_names_of_its_bits_and_unnamed_bits_as_hex(bits, names):
    assert gpu_power.throttle_reason_names(bits) == names


def test_a_reason_field_is_hex_and_n_a_or_an_odd_value_leaves_the_reasons_unknown():
    assert gpu_power.parse_throttle_reasons("0x0000000000000000") == ()
    assert gpu_power.parse_throttle_reasons(" 0x0000000000000004 ") == ("sw_power_cap",)
    assert gpu_power.parse_throttle_reasons("[N/A]") is None
    assert gpu_power.parse_sample("0, 80.0, 600.0, 5, 300, 2000, 40, Not Active\n",
                                  gpu_power.ACTIVITY_SAMPLE_FIELDS)[0].throttle_reasons is None


def test_a_reading_as_a_mapping_uses_the_names_of_the_results():
    reading = gpu_power.GpuReading(1, 691.8, 700.0, 99.0, 1440.0, 1980.0, 62.0, ("sw_power_cap",))
    assert reading.as_dict() == {"index": 1, "power_w": 691.8, "limit_w": 700.0, "util_pct": 99.0,
                                 "sm_clock_mhz": 1440.0, "max_sm_clock_mhz": 1980.0, "temperature_c": 62.0,
                                 "throttle_reasons": ["sw_power_cap"]}
    assert gpu_power.GpuReading(0, None, None).as_dict()["throttle_reasons"] is None


def test_nvidia_smi_with_activity_takes_the_clock_event_reason_field_where_the_driver_knows_it(tmp_path):
    source = gpu_power.nvidia_smi_source(fake_nvidia_smi_by_fields(tmp_path, {
        "clocks_event_reasons": (0, ACTIVITY_ROWS)}), activity=True)
    assert source.activity and source.fields == gpu_power.ACTIVITY_SAMPLE_FIELDS
    assert source.read()[1].throttle_reasons == ("sw_power_cap",)


def test_a_driver_before_535_gets_the_throttle_reason_field(tmp_path):
    rejected = 'Field "clocks_event_reasons.active" is not a valid field to query.\n'
    source = gpu_power.nvidia_smi_source(fake_nvidia_smi_by_fields(tmp_path, {
        "clocks_event_reasons": (2, rejected), "clocks_throttle_reasons": (0, ACTIVITY_ROWS)}), activity=True)
    assert source.fields == gpu_power.ACTIVITY_SAMPLE_FIELDS_BEFORE_535
    assert source.read()[0].util_pct == 0.0


def test_nvidia_smi_that_answers_no_activity_field_still_gives_power(tmp_path):
    smi = fake_nvidia_smi_by_fields(tmp_path, {"reasons": (2, "is not a valid field\n"),
                                               "power.limit": (0, NVIDIA_SMI_ROWS)})
    source = gpu_power.nvidia_smi_source(smi, activity=True)
    assert not source.activity and source.fields == gpu_power.POWER_SAMPLE_FIELDS
    assert source.read()[0] == gpu_power.GpuReading(0, 116.47, 700.0)


def test_without_activity_nvidia_smi_is_asked_for_power_alone(tmp_path):
    smi = fake_nvidia_smi_by_fields(tmp_path, {"power.limit": (0, NVIDIA_SMI_ROWS)})
    assert gpu_power.nvidia_smi_source(smi).fields == gpu_power.POWER_SAMPLE_FIELDS
    assert (tmp_path / "args").read_text().splitlines() == [
        "--query-gpu=index,power.draw,power.limit --format=csv,noheader,nounits"]


def test_nvidia_smi_that_fails_on_every_field_set_is_not_a_source_and_says_why(tmp_path):
    with pytest.raises(gpu_power.PowerSourceUnavailable, match="exited with 9"):
        gpu_power.nvidia_smi_source(fake_nvidia_smi_by_fields(tmp_path, {}), activity=True)


def fake_pynvml_with_activity(event_reasons=True, temperature_v=False):
    """fake_pynvml's GPUs (450 W and unreadable, of 600 W) that also answer the activity calls."""
    nvml = fake_pynvml([450000, None])
    nvml.NVML_CLOCK_SM, nvml.NVML_TEMPERATURE_GPU = 1, 0
    nvml.nvmlDeviceGetUtilizationRates = lambda handle: types.SimpleNamespace(gpu=[97, 3][handle], memory=40)
    nvml.nvmlDeviceGetClockInfo = lambda handle, clock: {1: 1800}[clock]

    def max_clock(handle, clock):
        nvml.calls.append("max clock")
        return {1: 2000}[clock]

    nvml.nvmlDeviceGetMaxClockInfo = max_clock
    if temperature_v:
        nvml.nvmlDeviceGetTemperatureV = lambda handle, sensor: {0: 71}[sensor]
    else:
        nvml.nvmlDeviceGetTemperature = lambda handle, sensor: {0: 70}[sensor]

    def reasons(handle):
        return [0x4, 0x21][handle]

    if event_reasons:
        nvml.nvmlDeviceGetCurrentClocksEventReasons = reasons
    else:
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons = reasons
    return nvml


def test_nvml_with_activity_reads_utilisation_clocks_temperature_and_reasons(monkeypatch):
    nvml = fake_pynvml_with_activity()
    monkeypatch.setattr(gpu_power, "_import_pynvml", lambda: nvml)
    source = gpu_power.open_power_source("/nonexistent/nvidia-smi", activity=True)
    assert source.name == "nvml" and source.activity
    assert source.read() == [
        gpu_power.GpuReading(0, 450.0, 600.0, 97.0, 1800.0, 2000.0, 70.0, ("sw_power_cap",)),
        gpu_power.GpuReading(1, None, 600.0, 3.0, 1800.0, 2000.0, 70.0, ("gpu_idle", "sw_thermal_slowdown"))]
    source.read()
    assert nvml.calls.count("max clock") == 2  # once per GPU at opening, not per reading


def test_older_and_newer_nvml_bindings_are_read_alike():
    older = fake_pynvml_with_activity(event_reasons=False, temperature_v=True)
    assert gpu_power.nvml_throttle_reasons(older, 0) == ("sw_power_cap",)
    assert gpu_power.nvml_temperature_c(older, 0) == 71.0


def test_nvml_without_the_activity_calls_leaves_those_values_unknown_and_keeps_power(monkeypatch):
    monkeypatch.setattr(gpu_power, "_import_pynvml", lambda: fake_pynvml([450000]))
    source = gpu_power.nvml_source(activity=True)
    assert source.read() == [gpu_power.GpuReading(0, 450.0, 600.0)]


def test_nvml_without_activity_does_not_read_it(monkeypatch):
    monkeypatch.setattr(gpu_power, "_import_pynvml", fake_pynvml_with_activity)
    source = gpu_power.nvml_source()
    assert not source.activity and source.read()[0] == gpu_power.GpuReading(0, 450.0, 600.0)


# ---------------------------------------------------------------- what an exporter needs of the reader

@pytest.mark.parametrize("mask", [0x0, 0x4, 0x21, 0x1ff, 0x4 | 0x2000, 0x80 | 0x40 | 0x20])
def test_the_reason_names_give_back_the_mask_they_were_read_from(mask):
    assert gpu_power.throttle_reason_mask(gpu_power.throttle_reason_names(mask)) == mask


def test_a_reason_name_that_no_bit_has_is_refused_not_dropped_from_the_mask():
    with pytest.raises(ValueError, match="'sw_power_capped' is no throttle reason"):
        gpu_power.throttle_reason_mask(("sw_power_capped",))


def test_nvml_read_for_an_exporter_sees_a_power_limit_set_after_it_opened(monkeypatch):
    nvml = fake_pynvml_with_activity()
    limits = {"mw": 600000}
    nvml.nvmlDeviceGetPowerManagementLimit = lambda handle: limits["mw"]
    monkeypatch.setattr(gpu_power, "_import_pynvml", lambda: nvml)
    kept = gpu_power.open_power_source("/nonexistent/nvidia-smi", activity=True)
    fresh = gpu_power.open_power_source("/nonexistent/nvidia-smi", activity=True, settings_once=False)
    limits["mw"] = 450000
    assert [reading.limit_watts for reading in kept.read()] == [600.0, 600.0]
    assert [reading.limit_watts for reading in fresh.read()] == [450.0, 450.0]
    nvml.calls.clear()
    fresh.read()
    assert nvml.calls.count("max clock") == 2  # the top clock too, once per GPU per reading

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""serving_benchmark's power sampler: its summary, its thread over a fake nvidia-smi, and a run that samples."""

from __future__ import annotations

import time

from ansible_collections.sm120.sglang.plugins.module_utils import serving_benchmark as sb
from ansible_collections.sm120.sglang.plugins.module_utils import serving_benchmark_power as sbp
from ansible_collections.sm120.sglang.plugins.module_utils.gpu_power import GpuReading, PowerSource, open_power_source
from ansible_collections.sm120.sglang.tests.unit.plugins.module_utils.test_gpu_power import (
    ACTIVITY_ROWS,
    fake_nvidia_smi,
)
from ansible_collections.sm120.sglang.tests.unit.plugins.module_utils.test_serving_benchmark import (
    SseServer,
    plan_for,
)


def test_power_summary_per_gpu_and_per_token():
    samples = [[GpuReading(0, 300.0, 600.0), GpuReading(1, None, 600.0)],
               [GpuReading(0, 500.0, 600.0), GpuReading(1, None, 600.0)]]
    power = sbp.summarize_power("nvml", 0.5, samples, duration_s=10.0, output_tokens=1000)
    # Readings without activity fields leave the activity figures unknown, all but the median power fraction.
    no_activity = {"samples": 0, "median_util_pct": None, "mean_util_pct": None, "median_sm_clock_mhz": None,
                   "max_sm_clock_mhz": None, "median_clock_fraction": None, "median_temperature_c": None, "max_temperature_c": None,
                   "throttle_reason_samples": 0, "throttle_reason_share": None, "power_reason_share": None,
                   "thermal_reason_share": None, "throttle_reason_shares": {}}
    assert power["gpus"] == [
        {"index": 0, "samples": 2, "mean_w": 400.0, "max_w": 500.0, "limit_w": 600.0,
         "mean_fraction_of_limit": 0.6667, "activity": dict(no_activity, median_power_fraction=0.6667)},
        {"index": 1, "samples": 0, "mean_w": None, "max_w": None, "limit_w": 600.0, "mean_fraction_of_limit": None,
         "activity": dict(no_activity, median_power_fraction=None)},
    ]
    assert (power["total_mean_w"], power["energy_j"], power["joules_per_output_token"]) == (400.0, 4000.0, 4.0)
    assert power["reason"] is None and power["samples"] == 2


def test_power_summary_without_readings_says_why():
    power = sbp.summarize_power("nvidia-smi", 0.5, [], 10.0, 100, sample_errors=3, last_error="exited with 9")
    assert power["reason"] == "no power reading succeeded: exited with 9"
    assert power["energy_j"] is None and power["sample_errors"] == 3


def test_sampler_reads_a_fake_nvidia_smi(tmp_path, without_pynvml):
    source = open_power_source(fake_nvidia_smi(tmp_path))
    assert source.name == "nvidia-smi"
    assert (tmp_path / "args").read_text().split() == [
        "--query-gpu=index,power.draw,power.limit", "--format=csv,noheader,nounits"]
    sampler = sbp.PowerSampler(source, 0.01)
    sampler.start()
    time.sleep(0.15)
    sampler.stop()
    power = sampler.summary(1.0, 100)
    assert power["samples"] >= 1 and power["sample_errors"] == 0
    assert [gpu["mean_w"] for gpu in power["gpus"]] == [116.47, None, 250.5]
    assert power["gpus"][0]["mean_fraction_of_limit"] == round(116.47 / 700, 4)
    assert power["total_mean_w"] == 366.97


def test_a_failed_read_is_counted_and_sampling_goes_on():
    failures = [RuntimeError("nvidia-smi timed out")]

    def read():
        if failures:
            raise failures.pop()
        return [GpuReading(0, 200.0, 600.0)]

    sampler = sbp.PowerSampler(PowerSource("stand-in", read), 0.01)
    sampler.start()
    time.sleep(0.1)
    sampler.stop()
    power = sampler.summary(1.0, 10)
    assert power["sample_errors"] == 1 and sampler.last_error == "nvidia-smi timed out"
    assert power["samples"] >= 1 and power["gpus"][0]["mean_w"] == 200.0 and power["reason"] is None


def test_the_first_reading_comes_one_interval_after_start_not_before_the_load():
    # start() comes before the first request: a reading then would be of the idle GPUs (the stand-in's 60 W).
    read_at = []

    def read():
        read_at.append(time.monotonic())
        return [GpuReading(0, 480.0, 600.0)]

    sampler = sbp.PowerSampler(PowerSource("stand-in", read), 0.05)
    started = time.monotonic()
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    assert read_at and read_at[0] - started >= 0.05, [t - started for t in read_at]
    assert sampler.summary(1.0, 10)["samples"] == len(read_at)


def test_a_run_shorter_than_one_interval_gets_one_reading_at_stop():
    readings = []
    sampler = sbp.PowerSampler(PowerSource("stand-in", lambda: readings.append(1) or [GpuReading(0, 300.0, 600.0)]), 30)
    sampler.start()
    sampler.stop()
    power = sampler.summary(0.2, 10)
    assert readings == [1] and power["samples"] == 1 and power["total_mean_w"] == 300.0


def test_without_sampling_the_summary_says_why_and_has_every_key():
    sampler = sbp.power_sampler(sbp.PowerPlan(enabled=False, interval=0.25))
    sampler.start()
    sampler.stop()
    assert sampler.summary(1.0, 10) == {
        "source": None, "reason": "sample_power is false", "interval_s": 0.25, "samples": 0, "sample_errors": 0,
        "gpus": [], "total_mean_w": None, "energy_j": None, "joules_per_output_token": None}


def test_no_power_source_gives_both_reasons(tmp_path, without_pynvml):
    missing = str(tmp_path / "nowhere" / "nvidia-smi")
    sampler = sbp.power_sampler(sbp.PowerPlan(nvidia_smi=missing))
    power = sampler.summary(1.0, 10)
    assert power["source"] is None and power["gpus"] == []
    assert "pynvml" in power["reason"] and "nvidia-smi not found at %r" % missing in power["reason"]


def test_run_samples_power_during_the_load(tmp_path, without_pynvml):
    with SseServer(token_delay=0.01) as server:
        result = sb.run_benchmark(plan_for(server.url, num_requests=4, output_tokens=10),
                                  sbp.PowerPlan(interval=0.02, nvidia_smi=fake_nvidia_smi(tmp_path)))
    power = result["power"]
    assert power["source"] == "nvidia-smi" and power["samples"] >= 1
    assert power["energy_j"] == round(366.97 * result["duration_s"], 1)
    assert power["joules_per_output_token"] == round(power["energy_j"] / 40, 4)


def reading(watts, util, clock, reasons, temperature=60.0, index=0):
    return GpuReading(index, watts, 700.0, util, clock, 1980.0, temperature, reasons)


def test_the_summary_gives_each_gpu_the_medians_and_reason_shares_of_its_activity():
    # The first reading is the ramp of NVML's 1 s power average; the medians do not move for it.
    samples = [[reading(120.0, 0.0, 345.0, ("gpu_idle",))],
               [reading(690.0, 99.0, 1440.0, ("sw_power_cap",), 62.0)],
               [reading(692.0, 99.0, 1455.0, ("sw_power_cap",), 63.0)],
               [reading(694.0, 99.0, 1470.0, ("sw_power_cap", "sw_thermal_slowdown"), 64.0)],
               [reading(693.0, 100.0, 1980.0, None, 64.0)]]
    activity = sbp.summarize_power("nvml", 0.05, samples, 0.25, 0)["gpus"][0]["activity"]
    assert activity == {
        "samples": 5, "median_power_fraction": round(692.0 / 700, 4), "median_util_pct": 99.0,
        # (0 + 99 + 99 + 99 + 100) / 5: the ramp's idle reading counts in the share of the time.
        "mean_util_pct": 79.4, "median_sm_clock_mhz": 1455.0, "max_sm_clock_mhz": 1980.0, "median_clock_fraction": round(1455 / 1980, 4),
        "median_temperature_c": 63.0, "max_temperature_c": 64.0, "throttle_reason_samples": 4,
        "throttle_reason_share": 0.75, "power_reason_share": 0.75, "thermal_reason_share": 0.25,
        "throttle_reason_shares": {"gpu_idle": 0.25, "sw_power_cap": 0.75, "sw_thermal_slowdown": 0.25}}


def test_activity_figures_read_mappings_as_they_read_readings():
    readings = [reading(137.4, 100.0, 1980.0, ()), reading(137.5, 100.0, 1980.0, ())]
    assert sbp.activity_figures([r.as_dict() for r in readings]) == sbp.activity_figures(readings)


def test_the_sampler_asks_for_activity_and_takes_power_alone_where_nvidia_smi_answers_only_that(
        tmp_path, without_pynvml):
    sampler = sbp.power_sampler(sbp.PowerPlan(nvidia_smi=fake_nvidia_smi(tmp_path, rows=ACTIVITY_ROWS)))
    assert sampler.source.activity and sampler.source.fields[-1] == "clocks_event_reasons.active"
    older = tmp_path / "older"
    older.mkdir()
    sampler = sbp.power_sampler(sbp.PowerPlan(nvidia_smi=fake_nvidia_smi(older)))
    assert not sampler.source.activity and sampler.source.read()[0] == GpuReading(0, 116.47, 700.0)

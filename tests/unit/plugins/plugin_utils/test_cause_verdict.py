# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cause_verdict: each verdict from readings like the H200's of docs/evidence/h200-cause-verdicts.md, the edges, the host."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.gpu_power import GpuReading
from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_power import summarize_power
from ansible_collections.sm120.sglang.plugins.plugin_utils import cause_verdict as cv


def readings(watts, util, clock, reasons=(), temperature=45.0, count=5, limit=700.0, top=1980.0, index=0):
    """``count`` alike readings of one GPU, as gpu_power gives them."""
    return [GpuReading(index, watts, limit, util, clock, top, temperature, reasons)] * count


# The medians one H200 showed under each load of docs/evidence/h200-cause-verdicts.md (NVML, 50 ms).
H200_GEMM = readings(691.8, 99.0, 1440.0, ("sw_power_cap",), 62.0)
H200_SPIN = readings(137.4, 100.0, 1980.0)
H200_TINY_KERNELS = readings(130.1, 0.0, 1980.0)
H200_COPY = readings(501.5, 100.0, 1980.0, (), 51.0)
H200_IDLE = readings(83.4, 0.0, 345.0, ("gpu_idle",), 42.0)


def verdict_of(gpu_readings, thresholds=None):
    return cv.cause_verdicts({0: gpu_readings}, thresholds)["gpus"][0]


# ------------------------------------------------------------------ each verdict

def test_a_busy_gpu_at_full_clock_drawing_real_power_is_compute_bound():
    gpu = verdict_of(H200_COPY)
    assert gpu["verdict"] == cv.COMPUTE_BOUND
    assert gpu["explanation"] == (
        "GPU 0 is compute-bound: busy 100 % of the time at 0.72 of its 700 W limit with the SM clock at 1.00 of its "
        "1980 MHz maximum, so its SMs do real work (compute- or memory-bound), not wait.")


def test_a_busy_gpu_at_full_clock_drawing_a_fifth_of_its_limit_is_spin_waiting():
    gpu = verdict_of(H200_SPIN)
    assert gpu["verdict"] == cv.SPIN_WAIT
    assert (gpu["median_power_fraction"], gpu["median_util_pct"], gpu["median_clock_fraction"]) == (0.1963, 100.0, 1.0)
    assert "look for a synchronisation bug" in gpu["explanation"]


def test_an_rtx_pro_6000_spinning_at_140_of_600_watts_is_spin_waiting():
    assert verdict_of(readings(140.0, 100.0, 2617.0, top=2617.0, limit=600.0))["verdict"] == cv.SPIN_WAIT


def test_tiny_kernels_with_host_gaps_are_underfed_though_they_draw_what_a_spin_draws():
    gpu = verdict_of(H200_TINY_KERNELS)
    assert gpu["verdict"] == cv.UNDERFED
    assert gpu["explanation"] == (
        "GPU 0 is underfed: busy only 0 % of the time at 0.19 of its 700 W limit, so the batch is too small, the "
        "scheduler starves it or the host leaves gaps between kernels.")


def test_an_idle_gpu_whose_clock_dropped_is_underfed_not_power_capped():
    assert verdict_of(H200_IDLE)["verdict"] == cv.UNDERFED


def test_gemms_at_the_limit_with_the_clock_pulled_down_by_the_power_cap_are_power_capped():
    gpu = verdict_of(H200_GEMM)
    assert gpu["verdict"] == cv.POWER_CAPPED
    assert (gpu["median_clock_fraction"], gpu["power_reason_share"], gpu["throttle_reason_share"]) == (
        0.7273, 1.0, 1.0)
    assert gpu["explanation"] == (
        "GPU 0 is power-capped: at 0.99 of its 700 W limit with the SM clock pulled down to 0.73 of its 1980 MHz "
        "maximum (a power-cap reason in 100 % of the readings): the power limit, not the load, bounds it.")


def test_a_clock_pulled_down_with_a_thermal_reason_is_thermal():
    gpu = verdict_of(readings(520.0, 100.0, 1300.0, ("sw_thermal_slowdown",), 88.0))
    assert gpu["verdict"] == cv.THERMAL
    assert gpu["thermal_reason_share"] == 1.0 and "at 88 °C" in gpu["explanation"]


def test_thermal_comes_before_power_capped_when_both_reasons_hold_the_clock():
    assert verdict_of(readings(690.0, 100.0, 1200.0, ("sw_power_cap", "sw_thermal_slowdown"), 90.0))["verdict"] == \
        cv.THERMAL


# ------------------------------------------------------------------ edges

def test_power_readings_without_utilisation_give_no_verdict_and_say_what_is_missing():
    gpu = verdict_of([GpuReading(0, 137.4, 700.0)] * 5)
    assert gpu["verdict"] == cv.UNKNOWN
    assert gpu["explanation"] == "GPU 0 has no verdict: no utilisation readings."


def test_readings_without_power_or_utilisation_name_both():
    assert verdict_of([GpuReading(0, None, 700.0)])["explanation"] == \
        "GPU 0 has no verdict: no power or utilisation readings."


def test_fewer_readings_than_the_minimum_give_no_verdict():
    gpu = verdict_of(readings(137.4, 100.0, 1980.0, count=2))
    assert gpu["verdict"] == cv.UNKNOWN and "2 readings, fewer than the 3 needed" in gpu["explanation"]


def test_a_busy_gpu_at_low_power_whose_clock_is_held_low_for_no_reason_is_no_spin():
    gpu = verdict_of(readings(120.0, 100.0, 800.0))
    assert gpu["verdict"] == cv.UNKNOWN and "clocks locked?" in gpu["explanation"]


def test_a_spin_without_clock_readings_is_still_a_spin_and_the_sentence_leaves_the_clock_out():
    gpu = verdict_of(readings(137.4, 100.0, None, reasons=None, top=None))
    assert gpu["verdict"] == cv.SPIN_WAIT and "clock" not in gpu["explanation"]


def test_at_the_limit_with_the_clock_pulled_down_is_power_capped_where_no_reason_could_be_read():
    gpu = verdict_of(readings(691.8, 99.0, 1440.0, reasons=None))
    assert gpu["verdict"] == cv.POWER_CAPPED and "no reason read" in gpu["explanation"]


def test_a_power_cap_that_leaves_the_clock_high_is_compute_bound():
    assert verdict_of(readings(680.0, 100.0, 1890.0, ("sw_power_cap",)))["verdict"] == cv.COMPUTE_BOUND


def test_a_power_cap_in_fewer_than_half_the_readings_does_not_make_a_busy_gpu_power_capped():
    flickering = readings(600.0, 100.0, 1700.0, ("sw_power_cap",), count=2) + readings(600.0, 100.0, 1700.0, count=3)
    assert verdict_of(flickering)["verdict"] == cv.COMPUTE_BOUND


def test_a_hot_busy_gpu_with_its_clock_down_is_thermal_by_temperature_where_no_reason_could_be_read():
    gpu = verdict_of(readings(450.0, 100.0, 1200.0, reasons=None, temperature=87.0))
    assert gpu["verdict"] == cv.THERMAL and "by temperature" in gpu["explanation"]


def test_a_hot_idle_gpu_is_underfed_since_its_reasons_say_idle_not_heat():
    assert verdict_of(readings(90.0, 0.0, 345.0, ("gpu_idle",), temperature=88.0))["verdict"] == cv.UNDERFED


def test_a_gpu_at_its_limit_that_reads_rarely_busy_is_compute_bound():
    assert verdict_of(readings(660.0, 40.0, 1980.0))["verdict"] == cv.COMPUTE_BOUND


def test_utilisation_at_the_busy_threshold_counts_as_busy_and_power_at_the_spin_threshold_as_no_spin():
    assert verdict_of(readings(100.0, 80.0, 1980.0, limit=500.0))["verdict"] == cv.SPIN_WAIT
    assert verdict_of(readings(150.0, 80.0, 1980.0, limit=500.0))["verdict"] == cv.UNDERFED
    assert verdict_of(readings(275.0, 80.0, 1980.0, limit=500.0))["verdict"] == cv.COMPUTE_BOUND
    assert verdict_of(readings(100.0, 79.9, 1980.0, limit=500.0))["verdict"] == cv.UNDERFED


# The real SGLang 0.5.16 server of docs/evidence/real-sglang-h200.md: a 1.1 B Llama on one H200, 256 in / 256 out,
# the medians of serving_benchmark's own sampler (0.5 s) as the module returned them.
REAL_DECODE_ONE_STREAM = readings(283.4, 96.0, 1980.0)       # 0.40 of 700 W, 698 tok/s
REAL_PREFILL_64_STREAMS = readings(602.5, 100.0, 1980.0)     # 64 x 3,584 tokens in: 0.86 of 700 W


def test_one_stream_of_a_small_model_on_a_large_gpu_is_underfed_though_nvml_reads_it_busy():
    gpu = verdict_of(REAL_DECODE_ONE_STREAM)
    assert gpu["verdict"] == cv.UNDERFED
    assert gpu["explanation"] == (
        "GPU 0 is underfed: busy 96 % of the time yet at only 0.40 of its 700 W limit, so its kernels are too small "
        "to fill it (a small batch or a small model; NVML counts the GPU busy while any kernel runs, however few SMs "
        "it uses).")


def test_the_same_server_prefilling_long_prompts_is_compute_bound():
    assert verdict_of(REAL_PREFILL_64_STREAMS)["verdict"] == cv.COMPUTE_BOUND


def test_a_gpu_busy_in_bursts_says_its_mean_beside_the_median_of_zero():
    # 256 streams on that server: 0 % in about three readings of four (the GPU waits for the host), bursts between.
    bursts = readings(126.0, 0.0, 1980.0, count=27) + readings(190.0, 31.0, 1980.0, count=5) \
        + readings(250.0, 66.0, 1980.0, count=4)
    gpu = verdict_of(bursts)
    assert gpu["verdict"] == cv.UNDERFED
    assert (gpu["median_util_pct"], gpu["mean_util_pct"]) == (0.0, 11.6)
    assert gpu["explanation"].startswith("GPU 0 is underfed: busy only 0 % (12 % on average) of the time at 0.18 of")


def test_the_medians_are_not_moved_by_the_ramp_at_the_start_of_a_measurement():
    assert verdict_of(H200_IDLE[:2] + H200_SPIN)["verdict"] == cv.SPIN_WAIT


# ------------------------------------------------------------------ thresholds

def test_thresholds_are_parameters_that_move_the_verdict():
    assert verdict_of(H200_SPIN, {"spin_max_power_fraction": 0.15})["verdict"] == cv.UNDERFED
    assert verdict_of(H200_SPIN, {"spin_max_power_fraction": 0.15, "saturated_min_power_fraction": 0.15})[
        "verdict"] == cv.COMPUTE_BOUND
    assert verdict_of(H200_GEMM, {"pulled_down_clock_fraction": 0.7})["verdict"] == cv.COMPUTE_BOUND
    assert verdict_of(H200_SPIN, cv.Thresholds(min_samples=10))["verdict"] == cv.UNKNOWN


def test_threshold_overrides_from_role_variables_accept_numeric_strings_and_keep_defaults_for_null():
    limits = cv.thresholds_from({"busy_util_pct": "75", "min_samples": 4.0, "hot_temperature_c": None,
                                 "reason_min_share": ""})
    assert limits == cv.Thresholds(busy_util_pct=75.0, min_samples=4)
    assert cv.cause_verdicts({0: H200_SPIN}, {"busy_util_pct": "75"})["thresholds"]["busy_util_pct"] == 75.0


@pytest.mark.parametrize("overrides, message", [
    ({"busy_util": 80}, "unknown cause threshold 'busy_util'; known: at_limit_power_fraction, busy_util_pct"),
    ({"busy_util_pct": "most"}, "cause threshold busy_util_pct must be a number, got 'most'"),
    ({"spin_max_power_fraction": True}, "must be a number, got True"),
    ({"hot_temperature_c": float("nan")}, "must be a number, got nan"),
])
def test_a_threshold_that_is_unknown_or_not_a_number_is_refused_by_name(overrides, message):
    with pytest.raises(cv.CauseThresholdError, match=message.replace("(", r"\(").replace("?", r"\?")):
        cv.thresholds_from(overrides)


# ------------------------------------------------------------------ the host

def test_one_thermally_throttled_gpu_names_the_host_while_its_peers_spin_waiting_on_it():
    gpus = {0: readings(520.0, 100.0, 1300.0, ("sw_thermal_slowdown",), 88.0, index=0)}
    gpus.update({index: readings(137.4, 100.0, 1980.0, index=index) for index in (1, 2, 3)})
    host = cv.cause_verdicts(gpus)["host"]
    assert host["verdict"] == cv.THERMAL and host["gpus_by_verdict"] == {"spin-wait": [1, 2, 3], "thermal": [0]}
    assert host["explanation"].startswith("Host thermal on GPU 0 of 4: GPU 0 is thermally throttled")
    assert host["explanation"].endswith("(the others: 3 spin-wait).")


def test_one_spinning_gpu_names_a_host_whose_other_gpus_compute():
    gpus = {index: readings(501.5, 100.0, 1980.0, index=index) for index in range(7)}
    gpus[7] = readings(137.4, 100.0, 1980.0, index=7)
    assert cv.cause_verdicts(gpus)["host"]["verdict"] == cv.SPIN_WAIT


def test_gpus_the_server_does_not_use_do_not_make_a_computing_host_underfed():
    gpus = {index: readings(501.5, 100.0, 1980.0, index=index) for index in range(6)}
    gpus.update({index: readings(83.4, 0.0, 345.0, ("gpu_idle",), index=index) for index in (6, 7)})
    host = cv.cause_verdicts(gpus)["host"]
    assert host["verdict"] == cv.COMPUTE_BOUND and host["explanation"].endswith("(the others: 2 underfed).")
    assert host["median_util_pct"] == 100.0


def test_a_host_of_mostly_idle_gpus_is_underfed():
    gpus = {0: readings(501.5, 100.0, 1980.0, index=0),
            1: readings(83.4, 0.0, 345.0, index=1), 2: readings(83.4, 0.0, 345.0, index=2)}
    assert cv.cause_verdicts(gpus)["host"]["verdict"] == cv.UNDERFED


def test_gpus_without_a_verdict_leave_the_host_to_the_others_and_all_of_them_leave_it_unknown():
    mixed = cv.cause_verdicts({0: H200_SPIN, 1: [GpuReading(1, 137.4, 700.0)] * 5})["host"]
    assert mixed["verdict"] == cv.SPIN_WAIT and mixed["gpus_by_verdict"]["unknown"] == [1]
    none = cv.cause_verdicts({0: [GpuReading(0, 137.4, 700.0)] * 5})["host"]
    assert none == {"verdict": cv.UNKNOWN, "gpus_by_verdict": {"unknown": [0]}, "median_power_fraction": None,
                    "median_util_pct": None, "median_clock_fraction": None, "throttle_reason_share": None,
                    "explanation": "No verdict for the host: GPU 0 has no verdict: no utilisation readings."}


def test_a_measurement_without_gpus_gives_an_unknown_host_that_says_so():
    assert cv.cause_verdicts([])["host"]["explanation"] == "No verdict for the host: no GPU was sampled."


# ------------------------------------------------------------------ the entry points agree

def test_the_samplers_samples_and_readings_as_mappings_give_the_same_verdicts():
    samples = [[spin, idle] for spin, idle in zip(H200_SPIN, readings(83.4, 0.0, 345.0, ("gpu_idle",), index=1))]
    as_mappings = {0: [r.as_dict() for r in H200_SPIN],
                   1: [r.as_dict() for r in readings(83.4, 0.0, 345.0, ("gpu_idle",), index=1)]}
    assert cv.cause_verdicts(samples) == cv.cause_verdicts(as_mappings)
    assert [gpu["verdict"] for gpu in cv.cause_verdicts(samples)["gpus"]] == [cv.SPIN_WAIT, cv.UNDERFED]


def test_a_serving_benchmark_power_result_gives_the_verdicts_its_raw_readings_give():
    samples = [[gemm, spin] for gemm, spin in zip(H200_GEMM, readings(137.4, 100.0, 1980.0, index=1))]
    power = summarize_power("nvml", 0.05, samples, 0.25, 0)
    assert cv.power_cause_verdicts(power) == cv.cause_verdicts(samples)


def test_a_result_without_power_figures_gives_an_unknown_host():
    assert cv.power_cause_verdicts({"source": None, "gpus": []})["host"]["verdict"] == cv.UNKNOWN
    assert cv.power_cause_verdicts(None)["gpus"] == []


def test_every_verdict_carries_the_numbers_behind_it():
    gpu = verdict_of(H200_GEMM)
    assert {"median_power_fraction", "median_util_pct", "median_clock_fraction", "throttle_reason_share",
            "throttle_reason_shares", "samples", "limit_w"} <= set(gpu)
    assert gpu["throttle_reason_shares"] == {"sw_power_cap": 1.0} and gpu["limit_w"] == 700.0

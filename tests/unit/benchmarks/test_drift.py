# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/real_gpu/drift.py and benchmarks/drift_causes.py on recordings whose answer is known."""

from __future__ import annotations

import json
import math
import pathlib

import pytest

from ansible_collections.sm120.sglang.tests.unit.utils import load_script

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def drift():
    return load_script(ROOT / "benchmarks" / "real_gpu" / "drift.py", "real_gpu_drift")


@pytest.fixture(scope="module")
def causes():
    return load_script(ROOT / "benchmarks" / "drift_causes.py", "drift_causes")


def test_schedule_in_order_and_bad_parts_named(drift):
    assert drift.schedule_of("plain:240, flush:60,clients:30") == [("plain", 240.0), ("flush", 60.0),
                                                                   ("clients", 30.0)]
    with pytest.raises(ValueError, match="'warm', not a segment: use plain, flush, clients"):
        drift.schedule_of("warm:60")
    with pytest.raises(ValueError, match="wants kind:seconds"):
        drift.schedule_of("plain")
    with pytest.raises(ValueError, match="more than 0"):
        drift.schedule_of("plain:0")
    with pytest.raises(ValueError, match="empty"):
        drift.schedule_of(" , ")


def test_gpu_line_as_driver_580_prints_it(drift):
    # A line of the H100's nvidia-smi (driver 580.159.04) under load, as drift.py asked for it.
    line = ("0, 1545, 2619, 613.41, 700.00, 62, 57, 0x0000000000000004, Active, Not Active, Not Active, "
            "Not Active, Not Active, 100, 69956")
    row = drift.parse_gpu_line(line, 12.5)
    assert row["clocks_current_sm"] == 1545.0 and row["power_draw"] == 613.41
    assert row["reason_active"] == 4 and row["reason_sw_power_cap"] is True
    assert row["reason_hw_slowdown"] is False and row["memory_used"] == 69956.0
    assert drift.parse_gpu_line("0, [N/A]" + ", 1" * 13, 1.0)["clocks_current_sm"] is None
    assert drift.parse_gpu_line("too, few", 1.0) is None


def test_trend_finds_a_known_slope_and_its_interval_holds_zero_without_one(causes):
    # 10 % of the mean lost per 10 minutes, exactly: the slope is -0.1 with no residual.
    falling = [(t, 1000.0 - t * (100.0 / 600)) for t in range(0, 601, 60)]
    slope, half = causes.trend(falling)
    mean = sum(point[1] for point in falling) / len(falling)
    assert slope == pytest.approx(-100.0 / mean, rel=1e-9) and half == pytest.approx(0.0, abs=1e-9)
    flat = [(t, 1000.0 + (5 if index % 2 else -5)) for index, t in enumerate(range(0, 601, 60))]
    slope, half = causes.trend(flat)
    assert abs(slope) < half
    assert causes.trend([(0, 1.0), (1, 2.0)]) is None


def test_ratio_and_paired_intervals(causes):
    value, low, high = causes.ratio([110.0, 112.0, 108.0], [100.0, 101.0, 99.0])
    assert value == pytest.approx(math.exp(sum(math.log(v) for v in (110, 112, 108)) / 3
                                           - sum(math.log(v) for v in (100, 101, 99)) / 3))
    assert 1.0 < low < value < high
    value, low, high = causes.paired([(100.0, 105.0), (200.0, 210.0), (50.0, 52.5)])
    assert (value, low, high) == pytest.approx((1.05, 1.05, 1.05))


def test_analyse_names_the_cache_where_flushed_runs_are_steadier(causes, tmp_path, capsys):
    runs, telemetry, metrics, at, evicted = [], [], [], 1000.0, 0.0
    for number in range(12):
        kind = "flush" if 4 <= number < 8 else "plain"
        # Plain runs evict and wander by ±6 %; flushed ones hold 1,000 within 0.5 %.
        rate = 1000.0 * (1 + (0.005 if number % 2 else -0.005)) if kind == "flush" else \
            1000.0 * (1 + (0.06 if number % 2 else -0.06))
        runs.append({"label": "radix", "segment": {"plain": 0, "flush": 1}[kind] + (2 if number >= 8 else 0),
                     "kind": kind, "number": number, "load": "c64", "concurrency": 64, "began": at,
                     "ended": at + 8, "processes": 1, "output_tokens_per_s": rate, "failed": 0})
        metrics.append({"t": at - 0.5, "evicted_tokens_total": evicted})
        evicted += 0 if kind == "flush" else 1000
        metrics.append({"t": at + 8.5, "evicted_tokens_total": evicted})
        telemetry += [{"t": at + second, "clocks_current_sm": 1900.0, "power_draw": 500.0,
                       "enforced_power_limit": 700.0, "temperature_gpu": 60.0, "temperature_memory": 65.0,
                       "reason_sw_power_cap": second % 2 == 0, "reason_hw_slowdown": False,
                       "reason_hw_thermal_slowdown": False, "reason_sw_thermal_slowdown": False,
                       "reason_hw_power_brake_slowdown": False} for second in range(8)]
        at += 10
    for name, data in (("runs", runs), ("telemetry", telemetry), ("metrics", metrics)):
        (tmp_path / (name + ".jsonl")).write_text("".join(json.dumps(row) + "\n" for row in data))
    findings = causes.analyse(tmp_path)
    said = capsys.readouterr().out
    plain_cv, flush_cv = findings["c64"]["flush_cv"]
    assert flush_cv < plain_cv / 2
    assert "cuts its spread" in said and "| 1000 |" in said  # plain runs evicted 1,000 tokens each
    assert findings["c64"]["power_cap"] == pytest.approx(0.5)

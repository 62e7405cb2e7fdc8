# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils/noise_band.py: the band two measurements must clear, and the runs a goal needs; by hand."""

from __future__ import annotations

import statistics

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_io as eio
from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments as ex
from ansible_collections.sm120.sglang.plugins.plugin_utils import noise_band as nb


def test_student_t_at_the_degrees_of_freedom_and_the_normal_past_the_table():
    assert nb.t975(1) == 12.706 and nb.t975(2) == 4.303 and nb.t975(30) == 2.042 and nb.t975(200) == 1.96
    with pytest.raises(ValueError, match="1 degree of freedom or more"):
        nb.t975(0)


def test_the_coefficient_of_variation_pooled_over_samples():
    assert nb.pooled_cv([100.0]) == (0.0, 0)
    cv, df = nb.pooled_cv([90.0, 110.0])
    assert df == 1 and cv == pytest.approx(statistics.stdev([90, 110]) / 100)
    # Two samples of the same relative noise pool to it, with the degrees of freedom of both.
    cv, df = nb.pooled_cv([90.0, 110.0], [900.0, 1100.0])
    assert df == 2 and cv == pytest.approx(statistics.stdev([90, 110]) / 100)


def test_the_band_is_the_tolerance_where_the_runs_agree_and_widens_with_the_noisier_side():
    assert nb.band([100.0] * 3, [100.0] * 3, 0.03, 2.0) == {"band": 0.03, "cv": 0.0, "df": 4}
    # One run a side: no noise known, the tolerance alone.
    assert nb.band([100.0], [130.0], 0.03, 2.0)["band"] == 0.03
    found = nb.band([95.0, 105.0], [100.0, 100.0], 0.03, 2.0)
    assert found["cv"] == pytest.approx(statistics.stdev([95, 105]) / 100) and found["df"] == 2
    assert found["band"] == pytest.approx(4.303 * found["cv"] * 1.0)
    # noise_multiple scales the noise term; 0 leaves the tolerance.
    assert nb.band([95.0, 105.0], [100.0, 100.0], 0.03, 4.0)["band"] == pytest.approx(2 * found["band"])
    assert nb.band([95.0, 105.0], [100.0, 100.0], 0.03, 0.0)["band"] == 0.03


def test_the_runs_a_goal_needs():
    # c64 of the H100 run, a CV of 4.5 %. 3 runs a side (4 degrees of freedom): 2.776 x 0.045 x sqrt(2/3) = 0.1020,
    # above 0.10; 4 runs a side (6): 2.447 x 0.045 x sqrt(2/4) = 0.0779.
    assert nb.runs_needed(0.045, 0.10, 0.03, 2.0) == 4
    assert nb.runs_needed(0.0, 0.10, 0.03, 2.0) == 2
    # A tolerance wider than the goal, or a noise no number of runs up to the bound brings in: None.
    assert nb.runs_needed(0.01, 0.02, 0.03, 2.0) is None
    assert nb.runs_needed(0.5, 0.01, 0.0, 2.0) is None


def test_the_goal_is_a_fraction_or_0_for_none():
    assert ex.settings_of({})["resolution"] == 0.10
    assert ex.settings_of({"resolution": 0})["resolution"] is None
    for bad in (1.5, -0.1, "ten", True):
        with pytest.raises(ex.ExperimentError, match="experiments_resolution must be a fraction"):
            ex.settings_of({"resolution": bad})


def test_runs_are_added_where_the_noise_keeps_the_goal_out_and_the_budget_holds_them():
    # c1: 100 and 101 tok/s, CV 0.71 %: 2 runs a side give 1.5 x 4.303 x 0.0071 x 1 = 0.046, within 10 %: enough.
    # c64: 95 and 105, CV 7.07 %: 2 runs give 0.456; 3 (t 2.776): 1.5 x 2.776 x 0.0707 x 0.816 = 0.240;
    # ... 9 runs (t 2.120 at 16): 1.5 x 2.120 x 0.0707 x 0.471 = 0.106; 10 (t 2.101 at 18): 0.0997: 10 a side, 8 more
    # at 10 s each, 80 s.
    runs = {"c1": [(100.0, 5.0), (101.0, 5.0)], "c64": [(95.0, 10.0), (105.0, 10.0)]}
    found = nb.runs_to_add(runs, 0.10, 0.03, 3.0, 100)
    assert found["c1"] == {"cv": 0.0070, "runs": 2, "needed": 2, "add": 0, "why": "enough"}
    assert found["c64"] == {"cv": 0.0707, "runs": 2, "needed": 10, "add": 8, "why": "added"}
    # 79 s of budget does not hold the 80 s: none, as they would not decide either.
    assert nb.runs_to_add(runs, 0.10, 0.03, 3.0, 79)["c64"]["add"] == 0
    assert nb.runs_to_add(runs, 0.10, 0.03, 3.0, 79)["c64"]["why"] == "over budget"


def test_no_runs_are_added_without_a_goal_a_budget_or_a_noise_to_read():
    runs = {"c64": [(95.0, 10.0), (105.0, 10.0)]}
    assert nb.runs_to_add(runs, None, 0.03, 3.0, 100)["c64"]["why"] == "no goal"
    assert nb.runs_to_add(runs, 0.10, 0.03, 3.0, 0)["c64"]["why"] == "no goal"
    assert nb.runs_to_add({"c64": [(95.0, 10.0)]}, 0.10, 0.03, 3.0, 100)["c64"] == {
        "cv": 0.0, "runs": 1, "needed": None, "add": 0, "why": "too few runs"}
    # 50 and 150 (CV 70.7 %): more than MOST_RUNS a side.
    assert nb.runs_to_add({"c256": [(50.0, 1.0), (150.0, 1.0)]}, 0.10, 0.03, 3.0, 10_000)["c256"]["why"] == \
        "out of reach"


def test_the_filter_numbers_the_added_runs_on_from_those_of_the_loop():
    results = [{"item": ["c64", 0], "output_tokens_per_s": 95.0, "duration_s": 10.0},
               {"item": ["c64", 1], "output_tokens_per_s": 105.0, "duration_s": 10.0},
               {"item": ["c1", 0], "output_tokens_per_s": 100.0, "duration_s": 5.0},
               {"item": ["c1", 1], "output_tokens_per_s": 101.0, "duration_s": 5.0},
               # A run the loop skipped (check mode of another task, a failed host) holds no figure: not counted.
               {"item": ["c1", 2], "skipped": True}]
    settings = {"tolerance": 0.03, "noise_multiple": 3.0, "resolution": 0.10}
    found = eio.more_runs(results, settings, 100)
    assert found["runs"] == [["c64", index] for index in range(2, 10)]
    assert eio.more_runs(results, settings, 0)["runs"] == []
    for bad in (-1, "soon", True):
        with pytest.raises(ex.ExperimentError, match="smoke_test_run_budget_s must be a number of seconds"):
            eio.more_runs(results, settings, bad)

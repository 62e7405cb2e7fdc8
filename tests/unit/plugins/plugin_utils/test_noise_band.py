# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils/noise_band.py: the band two measurements must clear, and the runs a goal needs; by hand."""

from __future__ import annotations

import statistics

import pytest

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
        with pytest.raises(ex.ExperimentError, match="smoke_test_experiment_resolution must be a fraction"):
            ex.settings_of({"resolution": bad})

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The upgrade canary: the new release against the host's baseline on the previous one, load by load."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments as ex
from ansible_collections.sm120.sglang.plugins.plugin_utils.upgrade import upgrade_verdict

SETTINGS = {"tolerance": 0.03, "noise_multiple": 2.0, "parity_min_match": 1.0, "loads": ["low", "high"]}


def measurement(low, high, noise=(0.0, 0.01, -0.01), parity=("a", "b")):
    return {"config": ["nccl_min_nchannels_8"], "parity": list(parity),
            "loads": {"low": [{"output_tokens_per_s": low * (1 + n)} for n in noise],
                      "high": [{"output_tokens_per_s": high * (1 + n)} for n in noise]}}


def test_a_release_slower_at_one_load_loses_and_says_what_happens_next():
    verdict = upgrade_verdict(measurement(400, 2700), measurement(405, 1900), SETTINGS, "0.5.22", "0.5.23")
    assert verdict["decision"] == "lost"
    assert verdict["loads"]["high"]["verdict"] == ex.REGRESSION and verdict["loads"]["low"]["verdict"] == ex.NEUTRAL
    message = verdict["message"]
    assert message.startswith("SGLang 0.5.23 is slower than 0.5.22 on this host at load high: ")
    assert "high regression -29.6 % (beyond ±3.0 %): 1900.0 against 2700.0 output tok/s" in message
    assert "low no measurable change, within ±3.0 % (+1.2 %)" in message
    assert "put back on 0.5.22" in message and "pin sglang_install_version to 0.5.22" in message
    # Both measurements go to the report.
    assert verdict["previous"]["loads"]["high"][0]["output_tokens_per_s"] == 2700
    assert verdict["current"]["loads"]["high"][0]["output_tokens_per_s"] == 1900


def test_a_release_as_fast_or_faster_is_kept():
    assert upgrade_verdict(measurement(400, 2700), measurement(402, 2690), SETTINGS, "0.5.22", "0.5.23")[
        "decision"] == "kept"
    faster = upgrade_verdict(measurement(400, 2700), measurement(480, 3100), SETTINGS, "0.5.22", "0.5.23")
    assert faster["decision"] == "kept" and faster["loads"]["high"]["verdict"] == ex.GAIN


def test_the_band_widens_with_the_measured_noise():
    noisy = (0.0, 0.06, -0.06)
    # 8 % slower, but the runs vary by 6 % (their coefficient of variation): inside a band of t at 4 degrees of
    # freedom (2.776) x 6 % x sqrt(1/3 + 1/3) = 13.6 %.
    verdict = upgrade_verdict(measurement(400, 2700, noisy), measurement(400, 2484, noisy), SETTINGS, "0.5.22", "0.5.23")
    assert verdict["decision"] == "kept"
    assert verdict["loads"]["high"]["band"] == pytest.approx(2.776 * 0.06 * (2 / 3) ** 0.5, abs=0.001)


def test_different_outputs_are_shown_not_decided_on():
    verdict = upgrade_verdict(measurement(400, 2700), measurement(400, 2700, parity=("a", "c")), SETTINGS,
                              "0.5.22", "0.5.23")
    assert verdict["decision"] == "kept" and verdict["parity"]["matched"] == 1
    assert "differ from 0.5.22's in 1 of 2 (shown, not decided on)" in verdict["message"]


def test_without_a_baseline_on_the_previous_release_nothing_is_decided():
    verdict = upgrade_verdict({}, measurement(400, 2700), SETTINGS, "0.5.22", "0.5.23")
    assert verdict["decision"] == "no baseline" and "no baseline of this host on 0.5.22" in verdict["message"]


def test_bad_input_names_the_problem():
    with pytest.raises(ex.ExperimentError, match="compares two releases"):
        upgrade_verdict(measurement(1, 1), measurement(1, 1), SETTINGS, "0.5.23", "0.5.23")
    with pytest.raises(ex.ExperimentError, match="compares two releases"):
        upgrade_verdict(measurement(1, 1), measurement(1, 1), SETTINGS, "", "0.5.23")
    baseline = measurement(1, 1)
    del baseline["loads"]["high"]
    with pytest.raises(ex.ExperimentError, match="baseline on SGLang 0.5.22 has no runs at load high"):
        upgrade_verdict(baseline, measurement(1, 1), SETTINGS, "0.5.22", "0.5.23")
    with pytest.raises(ex.ExperimentError, match="is not a measurement of loads"):
        upgrade_verdict(measurement(1, 1), {"loads": None}, SETTINGS, "0.5.22", "0.5.23")

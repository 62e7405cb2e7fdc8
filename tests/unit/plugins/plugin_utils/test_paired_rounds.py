# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paired rounds: the ABBA order and its restarts, the per-round ratios, the gate and the stopping rule, on rounds
whose answer is worked by hand."""

from __future__ import annotations

import math

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import paired_rounds as p


@pytest.mark.parametrize("df, expected", [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042)])
def test_t_quantile_matches_the_table(df, expected):
    assert p.t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)
    assert p.t_quantile(0.025, df) == pytest.approx(-expected, abs=1e-3)


def test_abba_order_costs_a_restart_a_round():
    plan = p.round_plan(4)
    assert [arm for _round, arm in plan["order"]] == list("ABBAABBA")
    assert plan["restarts"] == 4 and plan["ends_on"] == "A"
    assert p.round_plan(3)["restarts"] == 3 and p.round_plan(3)["ends_on"] == "B"
    assert p.round_plan(4, restart=False)["restarts"] == 0
    with pytest.raises(p.PairedError, match="whole number of 1 or more"):
        p.round_plan(0)


def test_ratios_average_an_arms_runs_first_and_skip_refused_rounds():
    rounds = [{"A": {"c64": [100.0, 102.0]}, "B": {"c64": [110.0, 112.2]}},
              {"A": {"c64": 100.0}, "B": {"c64": 50.0}, "refused": "a thermal slowdown in one arm only"}]
    assert p.round_ratios(rounds) == {"c64": [pytest.approx(math.log(111.1 / 101.0))]}
    with pytest.raises(p.PairedError, match="c256 in one arm only"):
        p.round_ratios([{"A": {"c64": 1.0, "c256": 1.0}, "B": {"c64": 1.0}}])
    with pytest.raises(p.PairedError, match="above 0"):
        p.round_ratios([{"A": {"c64": 0}, "B": {"c64": 1.0}}])


def _rounds(ratios):
    return [{"A": {"c64": 1000.0}, "B": {"c64": 1000.0 * ratio}} for ratio in ratios]


def test_better_worse_no_gain_and_measure_more():
    settings = {"tolerance": 0.03, "alpha": 0.05, "max_rounds": 8}
    assert p.paired_verdict(_rounds([1.10, 1.10]), settings)["decision"] == "measure more"  # before the third
    better = p.paired_verdict(_rounds([1.10, 1.11, 1.09, 1.10]), settings)
    assert better["decision"] == "better" and better["loads"]["c64"]["low"] > 1.03
    assert p.paired_verdict(_rounds([0.90, 0.91, 0.89, 0.90]), settings)["decision"] == "worse"
    assert p.paired_verdict(_rounds([1.001, 0.999, 1.0, 1.002]), settings)["decision"] == "no measurable gain"
    # A ratio spread across the tolerance: neither outside nor inside; at the budget, not decided, with the rounds.
    wide = _rounds([1.10, 0.95, 1.08, 0.97, 1.09, 0.96, 1.07, 0.98])
    verdict = p.paired_verdict(wide, settings)
    needed = verdict["loads"]["c64"]["rounds_needed"]
    assert verdict["decision"] == "not decided" and (needed is None or needed > 8)


def test_look_alpha_spends_alpha_over_looks_and_loads():
    settings = p._settings({"alpha": 0.05, "max_rounds": 8, "first_look": 3})
    assert p.look_alpha(settings, 2) == pytest.approx(0.05 / (6 * 2))
    with pytest.raises(p.PairedError, match="below first_look"):
        p._settings({"max_rounds": 2, "first_look": 3})
    with pytest.raises(p.PairedError, match="tolerance"):
        p._settings({"tolerance": 3})


def test_gate_refuses_a_different_power_limit_or_a_slowdown_in_one_arm():
    a = p.conditions_of({"gpus": [{"limit_w": 700.0, "thermal_reason_share": 0.0,
                                   "throttle_reason_shares": {"hw_slowdown": 0.0}}]})
    assert a == {"limit_w": (700.0,), "thermal": 0.0, "hw_slowdown": 0.0}
    capped = dict(a, limit_w=(600.0,))
    assert "different enforced power limits (700.0 W against 600.0 W)" in p.round_gate(a, capped)
    assert p.round_gate(a, capped, knob_sets_power=True) is None
    assert "a thermal slowdown in one arm only" in p.round_gate(a, dict(a, thermal=0.4))
    assert p.round_gate(a, dict(a, thermal=None)) is None
    assert p.conditions_of(None) == {"limit_w": None, "thermal": None, "hw_slowdown": None}

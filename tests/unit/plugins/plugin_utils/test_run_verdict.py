# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run's verdict: its four states, what stops the play, what serves."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import run_verdict as rv

KEPT = {"experiment": "nccl_min_nchannels_8", "decision": "kept", "message": "nccl_min_nchannels_8 kept."}
REJECTED = {"experiment": "flashinfer_allreduce_fusion", "decision": "rejected", "message": "fusion rejected."}
LOST = {"decision": "lost", "previous_release": "0.5.22", "release": "0.5.23", "message": "0.5.23 slower than 0.5.22."}
BAND_FAIL = {"status": "fail", "message": "gpu2 below the band."}


def test_nothing_rejected_nothing_missed_passes_and_serves():
    assert rv.run_verdict([KEPT], None, None, [], {"status": "ok"}) == {
        "status": "pass", "messages": ["nccl_min_nchannels_8 kept."], "rolled_back": [], "serves": True,
        "keeps_baseline": True, "stop": False, "warn": False, "put_back_release": ""}


def test_a_rejected_experiment_serves_on_what_is_kept_and_stops_or_warns_as_asked():
    stopped = rv.run_verdict([KEPT, REJECTED], on_rejection="fail")
    assert (stopped["status"], stopped["rolled_back"], stopped["serves"]) == (
        "regression-rolled-back", ["flashinfer_allreduce_fusion"], True)
    assert (stopped["stop"], stopped["warn"]) == (True, False)
    warned = rv.run_verdict([KEPT, REJECTED], on_rejection="warn")
    assert (warned["status"], warned["stop"], warned["warn"], warned["keeps_baseline"]) == (
        "regression-rolled-back", False, True, True)


def test_a_missed_threshold_or_the_fleet_band_fails_and_does_not_serve():
    missed = rv.run_verdict([KEPT, REJECTED], None, None, ["output tok/s 200 below 300."], None, "warn")
    assert (missed["status"], missed["serves"], missed["keeps_baseline"], missed["stop"]) == ("fail", False, False, True)
    assert missed["messages"] == ["nccl_min_nchannels_8 kept.", "fusion rejected.", "output tok/s 200 below 300."]
    banded = rv.run_verdict([], None, None, [], BAND_FAIL)
    assert (banded["status"], banded["messages"], banded["stop"]) == ("fail", ["gpu2 below the band."], True)


def test_an_upgrade_put_back_judges_neither_thresholds_nor_band_and_neither_serves_nor_keeps_a_baseline():
    verdict = rv.run_verdict([KEPT], LOST, None, ["output tok/s 200 below 300."], BAND_FAIL, "warn")
    assert verdict == {"status": "upgrade-rolled-back",
                       "messages": ["nccl_min_nchannels_8 kept.", "0.5.23 slower than 0.5.22.",
                                    "output tok/s 200 below 300."],
                       "rolled_back": [], "serves": False, "keeps_baseline": False, "stop": True, "warn": False,
                       "put_back_release": "0.5.22"}
    # An upgrade kept changes nothing.
    kept = rv.run_verdict([], {"decision": "kept", "previous_release": "0.5.22", "message": "x"})
    assert (kept["status"], kept["put_back_release"]) == ("pass", "")
    # A release to put back is the one the canary measured before; without it there is nothing to put back to.
    with pytest.raises(rv.RunVerdictError, match="names no previous_release to put the host back on"):
        rv.run_verdict([], {"decision": "lost", "message": "x"})


def test_the_release_to_put_back_is_the_one_before_where_the_new_one_lost_and_none_otherwise():
    assert rv.put_back_release(LOST) == "0.5.22"
    assert rv.put_back_release({"decision": "kept", "previous_release": "0.5.22"}) == ""
    assert rv.put_back_release(None) == ""
    with pytest.raises(rv.RunVerdictError, match="names no previous_release"):
        rv.put_back_release({"decision": "lost", "previous_release": ""})


def test_the_power_limit_s_verdicts_are_reported_after_the_upgrade_and_before_the_thresholds():
    power = [{"limit_w": 350, "decision": "kept", "message": "350 W kept."},
             {"limit_w": 200, "decision": "rejected", "message": "200 W slower."}]
    verdict = rv.run_verdict([KEPT], None, power, ["output tok/s 200 below 300."])
    assert verdict["messages"] == ["nccl_min_nchannels_8 kept.", "350 W kept.", "200 W slower.",
                                   "output tok/s 200 below 300."]
    # A power step not kept rolls nothing back.
    assert (verdict["status"], verdict["rolled_back"]) == ("fail", [])
    assert rv.run_verdict([], None, power)["status"] == "pass"


@pytest.mark.parametrize("args, message", [
    (([], None, None, None, None, "ignore"), "smoke_test_on_rejection must be one of fail, warn, got 'ignore'"),
    (([], None, "350 W"), "the power limit's verdicts must be a list"),
    (({"experiment": "x"},), "the experiments' verdicts must be a list"),
    (("rejected",), "the experiments' verdicts must be a list"),
    (([], None, None, "missed"), "the thresholds missed must be a list of messages"),
])
def test_bad_input_is_named(args, message):
    with pytest.raises(rv.RunVerdictError, match=message):
        rv.run_verdict(*args)


def test_the_router_and_the_reports_read_the_same_states():
    from ansible_collections.sm120.sglang.plugins.plugin_utils import router, smoke_report
    assert router.HEALTHY_VERDICTS == ("pass", "regression-rolled-back")
    assert set(rv.STATUSES) <= set(smoke_report.STATUS_TITLES)

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Experiments decided alone: per-load verdicts with a noise band, parity, the plan and its restarts, memory."""

from __future__ import annotations

import itertools

import statistics

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments as ex

LOADS = ["low", "high"]
SETTINGS = {"tolerance": 0.03, "noise_multiple": 2.0, "parity_min_match": 1.0, "loads": LOADS}
# A stepped knob of three steps (data/experiments.yml's stepped), searched s1, s2, s3.
KNOBS = {"mtp": ["s1", "s2", "s3"]}


def run(tok_s, watts=None, util=None):
    result = {"output_tokens_per_s": tok_s, "power": {"gpus": []}}
    if watts is not None:
        result["power"]["gpus"] = [{"index": i, "mean_w": watts, "limit_w": 600.0, "activity": {
            "samples": 40, "median_power_fraction": round(watts / 600.0, 4), "median_util_pct": util,
            "median_clock_fraction": 1.0, "max_sm_clock_mhz": 2430.0, "throttle_reason_samples": 40,
            "throttle_reason_share": 0.0, "power_reason_share": 0.0, "thermal_reason_share": 0.0}} for i in range(8)]
    return result


def measurement(config, low, high, parity=("a", "b", "c"), noise=(0.0, 0.0, 0.0), watts=None, util=None):
    return {"config": sorted(config), "parity": list(parity),
            "loads": {"low": [run(low * (1 + n)) for n in noise],
                      "high": [run(high * (1 + n), watts, util) for n in noise]}}


# ------------------------------------------------------------------ per load

def test_a_gain_beyond_the_band_is_a_gain_and_inside_it_no_change():
    base = [run(1000), run(1010), run(990)]
    assert ex.compare_load(base, [run(1080)] * 3, SETTINGS, "high")["verdict"] == ex.GAIN
    assert ex.compare_load(base, [run(1020)] * 3, SETTINGS, "high")["verdict"] == ex.NEUTRAL
    assert ex.compare_load(base, [run(900)] * 3, SETTINGS, "high")["verdict"] == ex.REGRESSION


def test_the_band_widens_with_the_measured_noise():
    # 6.9 % drift on a settled server (flashinfer#3903). The band: Student's t at 4 degrees of freedom (2.776) x the
    # noisier side's coefficient of variation x sqrt(1/3 + 1/3), the 95 % interval of the difference of the means.
    noisy = [run(1000), run(1069), run(1035)]
    expected = 2.776 * statistics.stdev([1000, 1069, 1035]) / statistics.mean([1000, 1069, 1035]) * (2 / 3) ** 0.5
    verdict = ex.compare_load(noisy, [run(1097)] * 3, SETTINGS, "high")
    assert verdict["band"] == pytest.approx(expected, abs=1e-3) and verdict["cv"] == pytest.approx(0.0333, abs=1e-4)
    # +6 % inside the band of 7.6 % is noise; +9 % beyond it is a gain; the runs of the steady side do not narrow it.
    assert verdict["verdict"] == ex.NEUTRAL and verdict["decided"] is True
    assert ex.compare_load(noisy, [run(1128)] * 3, SETTINGS, "high")["verdict"] == ex.GAIN
    assert ex.compare_load([run(1097)] * 3, noisy, SETTINGS, "high")["band"] == pytest.approx(expected, abs=1e-3)


def test_more_runs_narrow_the_band():
    # The same coefficient of variation over 3 and over 6 runs a side: the band narrows with the runs, as the range
    # of the repeats did not.
    three = [run(1000), run(1069), run(1035)]
    six = three + three
    assert ex.compare_load(six, six, SETTINGS, "high")["band"] < ex.compare_load(three, three, SETTINGS, "high")["band"]


def test_a_load_too_noisy_for_the_goal_is_not_decided_and_says_how_many_runs_would_do():
    # c256 of the H100 run: 10 % run-to-run, two runs a side, 15 s a run. Within the band, wider than the goal of 10 %.
    base = [dict(run(10000), duration_s=15.0), dict(run(8600), duration_s=15.0)]
    cand = [dict(run(9900), duration_s=15.0), dict(run(8800), duration_s=15.0)]
    verdict = ex.compare_load(base, cand, SETTINGS, "c256")
    assert verdict["verdict"] == ex.NEUTRAL and verdict["decided"] is False and verdict["goal"] == 0.10
    # By hand: the baseline's cv, 1400 / sqrt(2) / 9300 = 0.10645, is the larger. A band of t(2n - 2) x 0.10645 x
    # sqrt(2 / n) within 0.10: at n = 10, 2.101 x 0.10645 x 0.44721 = 0.10002, not yet; at n = 11, 2.086 x 0.10645 x
    # 0.42640 = 0.09468. 11 runs a side, 9 more than the 2 measured, each of 15 s on both sides: 270 s.
    assert verdict["more_runs"] == 9 and verdict["more_s"] == 9 * 2 * 15
    assert ex.describe_load(verdict).startswith("not decided: within ±")
    assert "the goal ±10.0 % needs about 9 more runs a side (270 s)" in ex.describe_load(verdict)
    # Without a goal (0), or a change beyond the band, it is decided.
    assert ex.compare_load(base, cand, dict(SETTINGS, resolution=0), "c256")["decided"] is True
    assert ex.compare_load(base, [run(30000)] * 2, SETTINGS, "c256")["decided"] is True


def test_the_median_not_the_mean_decides():
    # One stalled repeat does not make a regression.
    verdict = ex.compare_load([run(1000)] * 3, [run(1001), run(999), run(300)], dict(SETTINGS, noise_multiple=0),
                              "high")
    assert verdict["candidate"]["median"] == 999 and verdict["verdict"] == ex.NEUTRAL


def test_a_run_without_throughput_is_named():
    with pytest.raises(ex.ExperimentError, match="the candidate at load high has a run without output_tokens_per_s"):
        ex.compare_load([run(1)], [{"failed": True}], SETTINGS, "high")
    with pytest.raises(ex.ExperimentError, match="the baseline at load low has no measurement"):
        ex.compare_load([], [run(1)], SETTINGS, "low")


@pytest.mark.parametrize("settings, message", [
    ({"tolerance": 1.5}, "experiments_tolerance must be a fraction"),
    ({"tolerance": "ten"}, "experiments_tolerance must be a fraction"),
    ({"noise_multiple": -1}, "experiments_noise_multiple must be a number of 0 or more"),
    ({"parity_min_match": 2}, "experiments_parity_min_match must be a fraction from 0 to 1"),
    ({"parity_min_prefix": 0}, "experiments_parity_min_prefix must be a fraction above 0 up to 1"),
    ({"loads": "high"}, "must be a list of load names, lowest first, or the loads themselves"),
    ({"restart_budget": -1}, "experiments_restart_budget must be a whole number of restarts, 0 or more"),
    ({"restart_budget": 1.5}, "experiments_restart_budget must be a whole number"),
    ({"restart_budget": "two"}, "experiments_restart_budget must be a whole number"),
    ({"restart_budget": True}, "experiments_restart_budget must be a whole number"),
])
def test_bad_settings_name_the_variable(settings, message):
    with pytest.raises(ex.ExperimentError, match=message):
        ex.settings_of(settings)


# ------------------------------------------------------------------ parity

def test_parity_counts_matching_prompts_and_shows_the_first_mismatch():
    check = ex.parity_check(["x", "y", "z", "w"], ["x", "!!", "z", "w"], 0.75)
    assert check["ok"] and check["matched"] == 3 and check["fraction"] == 0.75
    assert check["first_mismatch"] == {"prompt": 1, "agreement": 0.0, "baseline": "y", "candidate": "!!"}
    assert not ex.parity_check(["x", "y"], ["x", "!!"], 1.0)["ok"]


def test_parity_needs_the_same_prompts():
    with pytest.raises(ex.ExperimentError, match="2 outputs of the baseline and 1 of the candidate"):
        ex.parity_check(["x", "y"], ["x"])


# ------------------------------------------------------------------ one experiment

def test_a_helper_is_kept():
    verdict = ex.experiment_verdict("nccl_min_nchannels", measurement([], 500, 3000),
                                    measurement(["nccl_min_nchannels"], 540, 3240), SETTINGS)
    assert verdict["decision"] == ex.KEPT and verdict["reason"] == "faster at load low, high"
    assert verdict["message"].startswith("nccl_min_nchannels kept, faster at load low, high. low gain +8.0 %")


def test_a_hurter_is_rejected_with_its_cause():
    verdict = ex.experiment_verdict("flashinfer_allreduce_fusion", measurement([], 500, 3740, watts=480, util=96),
                                    measurement(["f"], 40, 236, watts=125, util=100), SETTINGS)
    assert verdict["decision"] == ex.REJECTED and verdict["cause"] == "spin-wait"
    assert "slower at load low, high" in verdict["message"] and "spin-wait" in verdict["message"]


# The loads as an inventory written by a tool holds them: keys sorted, "high" before "low" (CI stop 14: the cause
# was read from the low load's short runs, which had too few power readings for a verdict).
SORTED_LOADS = {"high": {"concurrency": 8, "num_requests": 64, "input_tokens": 64, "output_tokens": 16},
                "low": {"concurrency": 2, "num_requests": 8, "input_tokens": 64, "output_tokens": 16}}


def test_loads_given_as_the_loads_are_ordered_by_concurrency_not_by_their_keys():
    assert ex.settings_of(dict(SETTINGS, loads=SORTED_LOADS))["loads"] == ["low", "high"]
    tied = dict(SORTED_LOADS, mid={"concurrency": 2, "num_requests": 1, "input_tokens": 1, "output_tokens": 1})
    assert ex.settings_of({"loads": tied})["loads"] == ["low", "mid", "high"]
    with pytest.raises(ex.ExperimentError, match="load high needs concurrency"):
        ex.settings_of({"loads": {"high": {"concurrency": 0}}})


def test_the_cause_is_read_at_the_highest_concurrency_whatever_the_keys_order():
    # Readings only at high load: read at low, the cause would be unknown.
    verdict = ex.experiment_verdict("max_running_requests_64", measurement([], 190, 770, watts=480, util=96),
                                    measurement(["m"], 250, 390, watts=150, util=30),
                                    dict(SETTINGS, loads=SORTED_LOADS))
    assert verdict["cause"] == "underfed", verdict["message"]
    assert verdict["message"].index("low gain") < verdict["message"].index("high regression")


def test_a_neutral_one_keeps_the_shipped_behaviour():
    verdict = ex.experiment_verdict("cuda_graph_max_bs", measurement([], 500, 3000), measurement(["c"], 505, 2990),
                                    SETTINGS)
    assert verdict["decision"] == ex.NO_GAIN
    assert verdict["reason"] == "no measurable gain at any load: the shipped behaviour stays"


def test_wrong_output_is_rejected_whatever_its_speed():
    verdict = ex.experiment_verdict("fp8_kv", measurement([], 500, 3000),
                                    measurement(["k"], 900, 5000, parity=("a", "garbled", "c")), SETTINGS)
    assert verdict["decision"] == ex.REJECTED
    assert verdict["reason"] == ("wrong output: 2 of 3 prompts agree with the baseline on at least their first 25 % "
                                 "or part from it at a near-tie (100 % of the prompts needed)")
    assert verdict["parity"]["agreement"] == [1.0, 0.0, 1.0]


# The parity outputs of the H200 harness (docs/evidence/real-sglang-h200.md): one configuration, asked after its
# first start and again after a restart. The texts of a random-weights model, as the server answered them.
FIRST_START = [" ';'.<??<?? GILgetprotobynameMENT<??MENT portMENT whyMENTSetReport port_\"] '%')",
               " Keywordsrans vectorsupporting accidentallyTypeAliasTypejor vectorGeneratorContextManagersupporting"
               " Compat THetc quadratic Executorjor"]
AFTER_RESTART = [FIRST_START[0],
                 " Keywordsrans vectorsupporting accidentallyTypeAliasTypejor vectorGeneratorContextManagersupporting"
                 "asynchronous whetherjorFrameSummary CHAR quadratic"]


def test_a_restart_that_flips_a_near_tie_late_in_the_text_still_agrees():
    parity = ex.parity_check(FIRST_START, AFTER_RESTART, 1.0, 0.25)
    assert parity["ok"] and parity["matched"] == 2 and parity["identical"] == 1
    assert parity["agreement"] == [1.0, round(99 / len(FIRST_START[1]), 4)]
    assert not ex.parity_check(FIRST_START, AFTER_RESTART, 1.0, 1.0)["ok"]  # token-exact would reject it


def test_output_that_differs_from_its_first_characters_is_wrong_however_long():
    garbled = [FIRST_START[0], "!! !! !! !! !! !! !! !! !! !! !! !! !! !! !! !!"]
    parity = ex.parity_check(FIRST_START, garbled, 1.0, 0.25)
    assert not parity["ok"]
    assert parity["first_mismatch"]["prompt"] == 1 and parity["first_mismatch"]["agreement"] == 0.0


def test_a_load_dependent_one_shows_each_load_and_is_rejected():
    verdict = ex.experiment_verdict("max_running_requests", measurement([], 500, 3000),
                                    measurement(["m"], 600, 2400), SETTINGS)
    assert verdict["loads"]["low"]["verdict"] == ex.GAIN and verdict["loads"]["high"]["verdict"] == ex.REGRESSION
    assert verdict["decision"] == ex.REJECTED and verdict["reason"] == "slower at load high"


# ------------------------------------------------------------------ the plan, as the role drives it

def model(effects, wrong=()):
    """A server: each live experiment multiplies (low, high) throughput; the wrong ones garble the output."""
    def measure(config):
        low, high = 500.0, 3000.0
        for name in config:
            low, high = low * effects[name][0], high * effects[name][1]
        parity = ("a", "garbled" if set(config) & set(wrong) else "b", "c")
        return measurement(config, low, high, parity=parity)
    return measure


def restarts_of(sequence, deployed):
    """Restarts a sequence of configurations costs from the deployed one: one per change of configuration."""
    restarts, current = 0, ex.config_key(deployed)
    for config in sequence:
        if ex.config_key(config) != current:
            restarts, current = restarts + 1, ex.config_key(config)
    return restarts


def drive(experiments, measure, stored_baseline=None, remembered=None, settings=None, deployed=None, knobs=None,
          measured=None):
    """The role's loop: deployed with every experiment live (or ``deployed``, where the deploy held the new ones back);
    restart for each configuration measured; the final one. ``measured`` collects the configurations measured."""
    deployed = list(experiments) if deployed is None else list(deployed)
    measurements = {ex.config_key(deployed): measure(deployed)}
    if stored_baseline is not None:
        measurements[ex.config_key([])] = stored_baseline
    sequence = []
    for _round in range(ex.experiment_rounds(experiments)):
        step = ex.plan_step(experiments, measurements, settings or SETTINGS, remembered, deployed=deployed,
                            knobs=knobs)
        if step["done"]:
            return step, restarts_of(sequence + [step["keep"]], deployed)
        assert ex.config_key(step["measure"]) not in measurements
        sequence.append(step["measure"])
        if measured is not None:
            measured.append(step["measure"])
        measurements[ex.config_key(step["measure"])] = measure(step["measure"])
    raise AssertionError("the plan did not end")


def test_the_role_gives_the_plan_one_round_more_than_configurations_it_can_need():
    assert [ex.experiment_rounds(names) for names in ([], ["a"], ["a", "b", "c"])] == [2, 3, 5]
    with pytest.raises(ex.ExperimentError, match="the experiments must be a list of names"):
        ex.experiment_rounds("a,b")


def test_every_experiment_rejected_is_the_longest_plan_and_ends_within_the_rounds():
    # Each rejected experiment comes off again, so each needs a configuration of its own: [], [a], [b], [c] in 4
    # rounds, the 5th (the last the role gives) finds the plan done. Measured: those 4 and the deployed [a, b, c];
    # restarts: to each of the 4 and back to [].
    names = ["a", "b", "c"]
    step, restarts = drive(names, model({name: (0.5, 0.5) for name in names}))
    assert decisions(step) == {"a": ex.REJECTED, "b": ex.REJECTED, "c": ex.REJECTED} and step["keep"] == []
    assert step["measured"] == 5 and restarts == 5


def decisions(step):
    return {verdict["experiment"]: verdict["decision"] for verdict in step["verdicts"]}


def test_one_experiment_costs_at_most_two_restarts():
    step, restarts = drive(["h"], model({"h": (1.1, 1.1)}))
    assert decisions(step) == {"h": ex.KEPT} and step["keep"] == ["h"] and restarts == 2
    step, restarts = drive(["f"], model({"f": (0.1, 0.06)}))
    assert decisions(step) == {"f": ex.REJECTED} and step["keep"] == [] and restarts == 1


def test_a_stored_baseline_saves_its_restart():
    step, restarts = drive(["h"], model({"h": (1.1, 1.1)}), stored_baseline=model({})([]))
    assert step["keep"] == ["h"] and restarts == 0


def test_bisection_finds_the_culprit_among_three_and_keeps_the_helper():
    step, restarts = drive(["h", "n", "f"], model({"h": (1.08, 1.08), "n": (1.0, 1.0), "f": (0.1, 0.06)}))
    assert decisions(step) == {"h": ex.KEPT, "n": ex.NO_GAIN, "f": ex.REJECTED}
    assert step["keep"] == ["h"]
    # baseline, {h}, {h, n}; f decided by the deployed set against {h, n}; back to {h}.
    assert restarts == 4
    fusion = next(verdict for verdict in step["verdicts"] if verdict["experiment"] == "f")
    assert fusion["baseline_config"] == ["h", "n"] and fusion["candidate_config"] == ["f", "h", "n"]


@pytest.mark.parametrize("effects", [dict(zip("abc", combo)) for combo in itertools.product(
    [(1.1, 1.1), (1.0, 1.0), (0.1, 0.1), (1.2, 0.8)], repeat=3)])
def test_k_experiments_cost_at_most_k_plus_one_restarts_on_a_kept_baseline(effects):
    measure = model(effects)
    step, restarts = drive(list("abc"), measure, stored_baseline=measure([]))
    assert restarts <= 4, (effects, step)
    # Measuring the baseline costs one more, at most, and only on a host's first run with this configuration.
    step_without, restarts_without = drive(list("abc"), measure)
    assert restarts_without <= 5 and decisions(step_without) == decisions(step)
    for verdict in step["verdicts"]:
        speed = effects[verdict["experiment"]]
        expected = (ex.KEPT if min(speed) > 1.05 else ex.REJECTED if min(speed) < 0.95 else ex.NO_GAIN)
        assert verdict["decision"] == expected, (effects, verdict["message"])


THREE = {"h": (1.08, 1.08), "n": (1.0, 1.0), "f": (0.1, 0.06)}


@pytest.mark.parametrize("effects, expected_restarts", [
    # Kept, no gain, rejected: [h], [h, n], [h, n, f] measured, back to [h] (everything on at the start: 4 too).
    (THREE, 4),
    # All kept: [a], [a, b], [a, b, c], which is what is kept (everything on at the start: 4).
    ({"a": (1.1, 1.1), "b": (1.1, 1.1), "c": (1.1, 1.1)}, 3),
    # All rejected: [a], [b], [c] measured, back to [] (everything on at the start: 5).
    ({"a": (0.5, 0.5), "b": (0.5, 0.5), "c": (0.5, 0.5)}, 4),
    # The one case that costs a restart more: nothing rejected before the last, which gains nothing. [a], [a, b],
    # [a, b, c], back to [a, b]; everything on at the start measured [a, b, c] at no restart and ended on [a, b] (3).
    ({"a": (1.1, 1.1), "b": (1.1, 1.1), "c": (1.0, 1.0)}, 4),
])
def test_held_back_at_the_deploy_its_start_is_the_baseline_and_k_experiments_take_k_restarts_more(
        effects, expected_restarts):
    names = sorted(effects, key=list(effects).index)
    step, restarts = drive(names, model(effects), deployed=[])
    assert step["restarts"] == 3 and restarts == expected_restarts
    assert step["baseline_reused"] is False and step["measured"] == 4


@pytest.mark.parametrize("effects", [dict(zip("abc", combo)) for combo in itertools.product(
    [(1.1, 1.1), (1.0, 1.0), (0.1, 0.1), (1.2, 0.8)], repeat=3)])
def test_held_back_every_plan_takes_k_restarts_to_measure_and_decides_as_everything_on(effects):
    measure = model(effects)
    held, restarts_held = drive(list("abc"), measure, deployed=[])
    everything, restarts_everything = drive(list("abc"), measure)
    # k configurations after the deploy's start, the baseline: k + 1 restarts with the deploy's own; one more only to
    # put back what is kept where the last configuration measured is not it.
    assert held["restarts"] <= 3 and restarts_held <= held["restarts"] + 1, (effects, held)
    assert decisions(held) == decisions(everything) and held["keep"] == everything["keep"], effects
    # Everything on at the start costs the deploy's restart and the baseline's: never fewer than one less.
    assert restarts_held <= restarts_everything + 1, effects


def test_held_back_the_deploys_start_saves_restarts_over_every_combination():
    """Over the 64 combinations of 3 experiments above, with the deploy's own start: 304 restarts held back against 357
    with everything on at the start; fewer in 52, one more in 3 (nothing rejected before the last, which has no
    measurable gain: the start with everything on measured the last configuration at no restart)."""
    fewer = more = 0
    totals = [0, 0]
    for combo in itertools.product([(1.1, 1.1), (1.0, 1.0), (0.1, 0.1), (1.2, 0.8)], repeat=3):
        measure = model(dict(zip("abc", combo)))
        restarts_held = drive(list("abc"), measure, deployed=[])[1] + 1
        restarts_everything = drive(list("abc"), measure)[1] + 1
        totals = [totals[0] + restarts_held, totals[1] + restarts_everything]
        fewer, more = fewer + (restarts_held < restarts_everything), more + (restarts_held > restarts_everything)
    assert totals == [304, 357] and (fewer, more) == (52, 3)


def test_held_back_the_deploys_start_costs_none_of_the_restart_budget():
    step, _restarts = drive(["h", "n", "f"], model(THREE), settings=dict(SETTINGS, restart_budget=2), deployed=[])
    assert decisions(step) == {"h": ex.KEPT, "n": ex.NO_GAIN, "f": ex.UNTRIED} and step["restarts"] == 2


def test_held_back_the_riskiest_goes_first_so_that_the_chain_ends_on_what_is_kept():
    # The local default's Debian 12: a helper option and the fusion gate, which collapses. Held back and riskiest
    # first: [f] rejected, [h] kept, and the server already runs what is kept: 2 restarts, 3 with the deploy's.
    effects = {"h": (1.08, 1.08), "f": (0.1, 0.1)}
    order = ex.decision_order(["h", "f"], [])
    assert order == ["f", "h"]
    step, restarts = drive(order, model(effects), deployed=[])
    assert decisions(step) == {"f": ex.REJECTED, "h": ex.KEPT} and step["keep"] == ["h"] and restarts == 2
    # In the order of risk instead, [h] then [h, f], and back to [h]: one restart more.
    assert drive(["h", "f"], model(effects), deployed=[])[1] == 3
    # Everything on at the start: [] and [h] measured, f decided against the deployed set: 2 as well.
    assert drive(["h", "f"], model(effects))[1] == 2
    # With all of them deployed the order of risk stands.
    assert ex.decision_order(["h", "f"], ["f", "h"]) == ["h", "f"]
    assert ex.decision_order(["h", "f"], None) == ["h", "f"]


def test_held_back_what_gains_nothing_comes_off_at_once_and_deployed_it_stays_on():
    effects = {"n": (1.0, 1.0), "h": (1.08, 1.08)}
    held, _restarts = drive(["n", "h"], model(effects), deployed=[])
    helper = next(verdict for verdict in held["verdicts"] if verdict["experiment"] == "h")
    assert helper["baseline_config"] == [] and held["keep"] == ["h"]
    everything, _restarts = drive(["n", "h"], model(effects))
    helper = next(verdict for verdict in everything["verdicts"] if verdict["experiment"] == "h")
    assert helper["baseline_config"] == ["n"] and everything["keep"] == ["h"]


@pytest.mark.parametrize("wanted, before, decided, held", [
    (["a", "b"], [], True, ["a", "b"]),
    # One the server ran before stays on: an earlier run kept it (or decides it now against the start without it).
    (["b", "a"], ["a"], True, ["b"]),
    (["a", "b"], ["a", "b", "c"], True, []),
    # No smoke test decides this run: what is asked for runs.
    (["a", "b"], [], False, []),
    # ... but one step of a stepped knob: the one the server ran (a search that left the next untried, or a deploy
    # that does not search, --tags service, the upgrade canary's put-back); no step ran before: the service refuses.
    (["a", "s1", "s2", "s3"], ["s2"], False, ["s1", "s3"]),
    (["a", "s1", "s2"], ["a"], False, []),
    (["s1", "s2"], ["s1"], True, ["s2"]),
])
def test_a_new_experiment_waits_off_where_the_smoke_test_adds_it(wanted, before, decided, held):
    assert ex.held_at_start(wanted, before, decided, KNOBS) == held


def test_the_experiments_held_back_must_be_lists():
    with pytest.raises(ex.ExperimentError, match="the live_before experiments must be a list of names"):
        ex.held_at_start(["a"], "a,b", True)


@pytest.mark.parametrize("run_tags, skip_tags, on, decides", [
    (["all"], [], True, True),
    (["service", "smoke"], [], True, True),
    (["tagged"], [], True, True),
    # The smoke phase does not run, or decides nothing: nothing is held back.
    (["patches", "service"], [], True, False),
    (["all"], ["smoke"], True, False),
    (["all"], [], False, False),
    (["rollback"], [], True, False),
])
def test_the_smoke_test_decides_where_its_phase_runs_with_experiments_on(run_tags, skip_tags, on, decides):
    assert ex.smoke_decides(run_tags, skip_tags, on) is decides


@pytest.mark.parametrize("args, message", [
    ((["all"], [], "yes"), "experiments_enabled must be true or false"),
    (("all", [], True), "ansible_run_tags must be a list of tags"),
    ((["all"], "smoke", True), "ansible_skip_tags must be a list of tags"),
])
def test_what_decides_the_hold_is_checked(args, message):
    with pytest.raises(ex.ExperimentError, match=message):
        ex.smoke_decides(*args)


@pytest.mark.parametrize("budget, measured_restarts, expected, keep", [
    # Nothing measured but the deployed set: every experiment untried, and all of them off this run.
    (0, 0, {"h": ex.UNTRIED, "n": ex.UNTRIED, "f": ex.UNTRIED}, []),
    # The baseline only: no experiment has both of its configurations.
    (1, 1, {"h": ex.UNTRIED, "n": ex.UNTRIED, "f": ex.UNTRIED}, []),
    (2, 2, {"h": ex.KEPT, "n": ex.UNTRIED, "f": ex.UNTRIED}, ["h"]),
    # {h, n} is the last configuration needed: f is decided by the deployed set against it.
    (3, 3, {"h": ex.KEPT, "n": ex.NO_GAIN, "f": ex.REJECTED}, ["h"]),
    ("3", 3, {"h": ex.KEPT, "n": ex.NO_GAIN, "f": ex.REJECTED}, ["h"]),
    (None, 3, {"h": ex.KEPT, "n": ex.NO_GAIN, "f": ex.REJECTED}, ["h"]),
])
def test_the_restart_budget_bounds_the_measurements_and_leaves_the_rest_untried(
        budget, measured_restarts, expected, keep):
    step, _restarts = drive(["h", "n", "f"], model(THREE), settings=dict(SETTINGS, restart_budget=budget))
    assert decisions(step) == expected and step["keep"] == keep
    assert step["restarts"] == measured_restarts
    assert step["untried"] == [name for name in ["h", "n", "f"] if expected[name] == ex.UNTRIED]
    for verdict in step["verdicts"]:
        if verdict["decision"] == ex.UNTRIED:
            assert "restart budget of %s was spent" % budget in verdict["message"]


def test_a_stored_baseline_costs_no_restart_of_the_budget():
    measure, names = model(THREE), ["h", "n", "f"]
    settings = dict(SETTINGS, restart_budget=1)
    measurements = {ex.config_key(names): measure(names)}
    # As the role hands it in: the host's last kept measurement, not measured in this run.
    step = ex.plan_step(names, measurements, settings, stored_baseline=measure([]))
    assert step == {"done": False, "measure": ["h"]}
    measurements["h"] = measure(["h"])
    step = ex.plan_step(names, measurements, settings, stored_baseline=measure([]))
    assert decisions(step) == {"h": ex.KEPT, "n": ex.UNTRIED, "f": ex.UNTRIED} and step["restarts"] == 1
    assert step["baseline_reused"] is True


def test_an_untried_experiment_is_neither_recorded_as_off_nor_remembered():
    step, _restarts = drive(["h", "n", "f"], model(THREE), settings=dict(SETTINGS, restart_budget=2))
    recorded = ex.rejections(step["verdicts"], ["h"], "run-1", "2026-12-03T00:00:00Z")
    assert recorded == {"gates": {}, "tuning": {}}
    memory = ex.remember({}, "key", step["verdicts"], "host-1", "run-1")
    assert sorted(memory["key"]) == ["h"]


def test_wrong_output_is_found_among_fast_ones():
    step, _restarts = drive(["w", "h"], model({"w": (1.5, 1.5), "h": (1.1, 1.1)}, wrong=["w"]))
    assert decisions(step) == {"w": ex.REJECTED, "h": ex.KEPT} and step["keep"] == ["h"]


def test_remembered_verdicts_are_applied_without_measuring():
    remembered = {"f": {"decision": ex.REJECTED, "reason": "slower at load high"},
                  "h": {"decision": ex.KEPT, "reason": "faster at load high"}}
    measure = model({"h": (1.1, 1.1), "f": (0.1, 0.1), "n": (1.0, 1.0)})
    step, restarts = drive(["h", "f", "n"], measure, remembered=remembered)
    assert decisions(step) == {"h": ex.KEPT, "f": ex.REJECTED, "n": ex.NO_GAIN}
    assert [verdict["remembered"] for verdict in step["verdicts"]] == [True, True, False]
    assert step["verdicts"][1]["message"] == ("f rejected, slower at load high: kept from another host's measurement "
                                              "in run ?.")
    assert step["keep"] == ["h"]
    # {h} (the baseline of n), {h, n}, then {h}.
    assert restarts == 3


def test_a_remembered_verdict_without_a_decision_is_refused():
    with pytest.raises(ex.ExperimentError, match="delete it from the verdict file"):
        ex.plan_step(["f"], {}, SETTINGS, {"f": {"reason": "?"}})


# ------------------------------------------------------------------ memory

LOAD_SPECS = {"low": {"concurrency": 4, "num_requests": 16, "input_tokens": 64, "output_tokens": 32},
              "high": {"concurrency": 64, "num_requests": 256, "input_tokens": 1024, "output_tokens": 256}}


def test_the_memory_key_names_the_configuration():
    key = ex.memory_key("0.5.23", 8, "pcie", "NVIDIA RTX PRO 6000 Blackwell Server Edition", LOAD_SPECS)
    assert key == ("sglang 0.5.23 | TP 8 | pcie | NVIDIA RTX PRO 6000 Blackwell Server Edition | "
                   "high=64/256/1024/256,low=4/16/64/32")
    with pytest.raises(ex.ExperimentError, match="per release, TP size, topology and GPU model"):
        ex.memory_key("0.5.23", None, "pcie", "x", LOAD_SPECS)


def test_memory_keeps_measured_verdicts_and_retry_forgets_them():
    step = drive(["h", "f"], model({"h": (1.1, 1.1), "f": (0.1, 0.1)}))[0]
    memory = ex.remember({}, "k", step["verdicts"], "host-a", "run-1")
    assert memory["k"]["f"]["decision"] == ex.REJECTED and memory["k"]["f"]["host"] == "host-a"
    assert memory["k"]["f"]["loads"]["high"]["verdict"] == ex.REGRESSION
    assert set(ex.remembered_verdicts(memory, "k")) == {"h", "f"}
    assert set(ex.remembered_verdicts(memory, "k", retry=["f"])) == {"h"}
    assert ex.remembered_verdicts(memory, "other") == {}


# ------------------------------------------------------------------ what the role hands in and out

def test_a_stored_baseline_of_another_configuration_is_not_reused():
    measure = model({"h": (1.1, 1.1)})
    other = dict(measure([]), config=["x"])
    step = ex.plan_step(["h"], {"h": measure(["h"])}, SETTINGS, None, other)
    assert step == {"done": False, "measure": []}
    step = ex.plan_step(["h"], {"h": measure(["h"])}, SETTINGS, None, measure([]))
    assert step["done"] and step["baseline_reused"] and step["measured"] == 1


def test_the_measurement_is_assembled_from_the_roles_loops():
    runs = [dict(run(100 + n), item=[load, n], invocation={"module_args": {}}) for load in LOADS for n in range(3)]
    parity = [{"json": {"choices": [{"text": " Paris"}]}}, {"json": {"choices": [{"message": {"content": "4"}}]}}]
    measured = ex.measurement_of(runs, parity, ["b", "a"], "with a, b")
    assert measured["config"] == ["a", "b"] and measured["parity"] == [" Paris", "4"]
    assert [r["output_tokens_per_s"] for r in measured["loads"]["high"]] == [100, 101, 102]
    assert "invocation" not in measured["loads"]["low"][0] and "item" not in measured["loads"]["low"][0]
    with pytest.raises(ex.ExperimentError, match="a parity prompt got no completion"):
        ex.measurement_of(runs, [{"msg": "Status code was 500"}], [])


def test_report_rows_put_the_kept_configuration_last_with_its_threshold_load_last():
    rows = (ex.report_entries(dict(measurement(["f"], 40, 236), label="with f"), ["f"], [])
            + ex.report_entries(dict(measurement([], 500, 3000, noise=(0.0, 0.01, -0.01)), label="baseline"), [], []))
    assert rows[3]["runs"] == [500.0, 505.0, 495.0] and rows[3]["result"]["output_tokens_per_s"] == 500.0
    ordered = ex.final_rows(rows, [], "high")
    assert [(row["label"]) for row in ordered] == [
        "with f, load high", "with f, load low", "baseline, load low", "baseline, load high"]
    # The power limit's steps measure the same configuration again: the one kept is named by its label.
    stepped = rows + ex.report_entries(dict(measurement([], 500, 3000), label="baseline at 350 W"), [], []) + (
        ex.report_entries(dict(measurement([], 250, 1500), label="baseline at 200 W"), [], []))
    assert [row["label"] for row in ex.final_rows(stepped, [], "high", "baseline at 350 W")][-2:] == [
        "baseline at 350 W, load low", "baseline at 350 W, load high"]
    assert [row["label"] for row in ex.final_rows(stepped, [], "high", "baseline")][-2:] == [
        "baseline, load low", "baseline, load high"]


def test_the_switch_turns_gates_and_tuning_options_on_exactly_where_the_configuration_has_them():
    switch = ex.switch_to(["nccl_min_nchannels_8"], ["flashinfer_allreduce_fusion", "nccl_min_nchannels_8"],
                          {"moe_runner_sm120": True, "flashinfer_allreduce_fusion": True},
                          ["nccl_min_nchannels_8"], ["moe_runner_sm120", "flashinfer_allreduce_fusion"])
    assert switch == {"patches_enabled": {"moe_runner_sm120": True, "flashinfer_allreduce_fusion": False},
                      "tuning": ["nccl_min_nchannels_8"], "gates_change": True}
    assert not ex.switch_to(["flashinfer_allreduce_fusion"], ["flashinfer_allreduce_fusion", "t"], {}, ["t"],
                            ["flashinfer_allreduce_fusion"])["gates_change"]


def test_what_is_not_kept_is_recorded_by_the_role_that_runs_it():
    verdicts = [{"experiment": "f", "decision": ex.REJECTED, "reason": "slower at load high"},
                {"experiment": "t", "decision": ex.NO_GAIN, "reason": "no measurable gain at any load"},
                {"experiment": "h", "decision": ex.KEPT, "reason": "faster at load low"}]
    found = ex.rejections(verdicts, ["t"], "R1", "2026-12-01T00:00:00Z")
    assert list(found["gates"]) == ["f"] and list(found["tuning"]) == ["t"]
    assert found["gates"]["f"]["reason"] == "smoke test R1: rejected, slower at load high"


def test_the_thresholds_hold_at_the_load_of_highest_concurrency_and_a_bad_load_is_named():
    assert ex.threshold_load(LOAD_SPECS) == "high"
    with pytest.raises(ex.ExperimentError, match="load low needs concurrency, num_requests"):
        ex.threshold_load({"low": {"concurrency": 4}})
    with pytest.raises(ex.ExperimentError, match="smoke_test_loads must name at least one load"):
        ex.threshold_load({})


def test_every_hosts_verdicts_are_remembered_by_one_writer():
    step = drive(["f"], model({"f": (0.1, 0.1)}))[0]
    runs = [{"host": "a", "memory_key": "k", "verdicts": step["verdicts"]},
            {"host": "b", "memory_key": "k2", "verdicts": []}]
    memory = ex.remember_runs({"old": {"x": {"decision": ex.KEPT}}}, runs, "R")
    assert set(memory) == {"old", "k"} and memory["k"]["f"]["host"] == "a"


def test_a_load_not_decided_is_remembered_as_not_decided_with_the_runs_that_would_decide_it():
    # The H100 run of b200f7d: max_running_requests_64 at c16, +2.5 % inside a band of 19.1 % against a goal of 10 %.
    verdict = {"experiment": "max_running_requests_64", "decision": ex.REJECTED, "reason": "slower at c256",
               "cause": "compute-bound", "parity": {"matched": 4, "total": 4},
               "loads": {"c16": {"verdict": "no measurable change", "change": 0.0247, "band": 0.1909, "goal": 0.1,
                                 "decided": False, "more_runs": 2, "more_s": 12},
                         "c256": {"verdict": "regression", "change": -0.263, "band": 0.1215, "goal": 0.1,
                                  "decided": True}}}
    kept = ex.remember({}, "k", [verdict], "h", "R")["k"]["max_running_requests_64"]["loads"]
    assert kept == {"c16": {"verdict": "no measurable change", "change": 0.0247, "band": 0.1909, "decided": False,
                            "goal": 0.1, "more_runs": 2},
                    "c256": {"verdict": "regression", "change": -0.263, "band": 0.1215}}


# ------------------------------------------------------------------ the switch took effect

def test_a_switch_that_took_effect_has_no_problem():
    assert ex.switch_problem(["cuda_graph_max_bs_128"], ["cuda_graph_max_bs_128", "max_running_requests_64"],
                             [], ["cuda_graph_max_bs_128"]) == ""
    assert ex.switch_problem([], ["fusion", "nccl"], ["moe_runner_sm120"], []) == ""


def test_an_extra_var_that_kept_the_server_as_it_was_is_named_with_the_fix():
    # The real-GPU harness: -e sglang_service_tuning=[both], so the switch to one alone changed nothing.
    problem = ex.switch_problem(["cuda_graph_max_bs_128"], ["cuda_graph_max_bs_128", "max_running_requests_64"],
                                [], ["cuda_graph_max_bs_128", "max_running_requests_64"])
    assert problem == (
        "The experiments asked for the configuration with cuda_graph_max_bs_128, but max_running_requests_64 stayed "
        "on: what the server runs did not follow the switch, so nothing measured now could be told apart. Is "
        "sglang_service_tuning or sm120_patches_enabled given as an extra var (-e)? An extra var outranks the "
        "configuration an experiment switches to: set them in the inventory (group_vars or host_vars) instead.")


def test_a_gate_that_stayed_off_is_named_too():
    problem = ex.switch_problem(["fusion", "nccl"], ["fusion", "nccl"], [], ["nccl"])
    assert "the configuration with fusion, nccl, but fusion stayed off" in problem


# ------------------------------------------------------------------ the latency objective

def timed(tok_s, ttft_p99, itl_p99):
    return dict(run(tok_s), ttft_ms={"p99": ttft_p99}, itl_ms={"p99": itl_p99})


def latency_measurement(config, high_tok_s, high_ttft, high_itl=20.0):
    return {"config": sorted(config), "parity": ["a", "b"],
            "loads": {"low": [timed(100, 150, 10), timed(101, 160, 10), timed(99, 155, 10)],
                      "high": [timed(high_tok_s, ttft, high_itl) for ttft in high_ttft]}}


SLO = {"low": {"ttft_p99_ms": 500}, "high": {"ttft_p99_ms": 2000, "itl_p99_ms": 50}}


def test_an_experiment_faster_at_a_load_that_breaks_its_ttft_objective_is_rejected():
    base = latency_measurement([], 1000, (900, 950, 1000))
    faster = latency_measurement(["big_batches"], 1200, (2300, 2500, 2400))
    verdict = ex.experiment_verdict("big_batches", base, faster, dict(SETTINGS, slo=SLO))
    assert verdict["loads"]["high"]["verdict"] == ex.GAIN
    assert verdict["decision"] == ex.REJECTED
    assert verdict["reason"] == ("breaks the latency objective: high p99 time to first token 2400.0 ms above its "
                                 "objective 2000 ms")
    assert verdict["objective"]["broken"] == [{"load": "high", "field": "ttft_p99_ms", "value": 2400, "bound": 2000}]
    # Without an objective the same figures keep it: the bound is what rejected it.
    assert ex.experiment_verdict("big_batches", base, faster, SETTINGS)["decision"] == ex.KEPT


def test_a_bound_the_baseline_misses_as_well_does_not_reject_and_is_reported():
    base = latency_measurement([], 1000, (2600, 2700, 2800))
    faster = latency_measurement(["big_batches"], 1200, (2300, 2500, 2400))
    verdict = ex.experiment_verdict("big_batches", base, faster, dict(SETTINGS, slo=SLO))
    assert verdict["decision"] == ex.KEPT
    assert "Missed with and without it: high p99 time to first token 2400.0 ms above its objective 2000 ms" in \
        verdict["message"]


def test_the_itl_bound_and_a_bound_nobody_measured_are_misses():
    base = latency_measurement([], 1000, (900, 900, 900), high_itl=30)
    slow_tokens = latency_measurement(["x"], 1000, (900, 900, 900), high_itl=60)
    verdict = ex.experiment_verdict("x", base, slow_tokens, dict(SETTINGS, slo=SLO))
    assert verdict["reason"] == "breaks the latency objective: high p99 inter-token latency 60.0 ms above its " \
                                "objective 50 ms"
    unmeasured = {"config": [], "loads": {"high": [run(1000)]}}
    assert ex.objective_misses(unmeasured, SLO, ["high"]) == [
        {"load": "high", "field": "itl_p99_ms", "value": None, "bound": 50},
        {"load": "high", "field": "ttft_p99_ms", "value": None, "bound": 2000}]


def capped(measured, bound):
    """measured, each run's /server_info saying the server runs at most ``bound`` requests at once."""
    return dict(measured, loads={load: [dict(result, max_running_requests=bound) for result in results]
                                 for load, results in measured["loads"].items()})


PROFILE = {"low": {"concurrency": 4, "num_requests": 32, "input_tokens": 64, "output_tokens": 16},
           "high": {"concurrency": 64, "num_requests": 256, "input_tokens": 64, "output_tokens": 16}}


def test_a_server_that_capped_the_requests_it_runs_below_a_load_is_caught_though_faster():
    base = measurement([], 1000, 5000)
    # Speculative decoding with --max-running-requests left unset: SGLang ran 48 of the 64 at once.
    mtp = capped(measurement(["mtp"], 1800, 5200), 48)
    verdict = ex.experiment_verdict("mtp", base, mtp, {"loads": PROFILE})
    assert verdict["decision"] == ex.REJECTED
    assert verdict["capped"] == [{"load": "high", "concurrency": 64, "max_running": 48}]
    assert verdict["reason"].startswith("the server capped the requests it runs at once below the load (load high "
                                        "runs 64 requests at once, the server at most 48, from its /server_info)")
    assert "max_running_requests: highest_load" in verdict["reason"]
    # The cap set to the highest load (or above it) is no cap: the gain at low load keeps it.
    for bound in (64, 256):
        kept = ex.experiment_verdict("mtp", base, capped(measurement(["mtp"], 1800, 5200), bound), {"loads": PROFILE})
        assert (kept["decision"], kept["capped"]) == (ex.KEPT, [])
    # A cap the baseline had too is the deployed configuration's, not the experiment's doing.
    same = ex.experiment_verdict("mtp", capped(base, 48), mtp, {"loads": PROFILE})
    assert (same["decision"], same["capped"]) == (ex.KEPT, [])
    # Load names without their concurrency (nothing to hold the bound against): not judged.
    assert ex.experiment_verdict("mtp", base, mtp, SETTINGS)["capped"] == []


def test_a_deployed_server_capped_below_a_load_is_a_miss_that_names_the_fix():
    # Speculative decoding from the inventory's extra args, --max-running-requests left to SGLang: 48 of 64.
    deployed = capped(measurement([], 1000, 5000), 48)
    misses = ex.cap_misses(deployed, {"loads": PROFILE})
    assert misses == [
        "The server ran fewer requests at once than the load asks: load high runs 64 requests at once, the server at "
        "most 48 (max_running_requests of its /server_info), so the rest queued and the load was not measured as "
        "asked. The bound is the server's --max-running-requests, or 48 where SGLang sets it by itself: with "
        "speculative decoding on and that flag unset. Fix: give --max-running-requests 64 (sglang_service_extra_args), "
        "or measure loads of at most 48 requests at once (smoke_test_loads)."]
    # A bound at or above every load, or none given (SGLang's null without speculative decoding): nothing to name.
    assert ex.cap_misses(capped(measurement([], 1000, 5000), 64), {"loads": PROFILE}) == []
    assert ex.cap_misses(capped(measurement([], 1000, 5000), None), {"loads": PROFILE}) == []
    assert ex.cap_misses(measurement([], 1000, 5000), {"loads": PROFILE}) == []
    # Both loads below a bound of 2: both named, the lowest first.
    both = ex.cap_misses(capped(measurement([], 1000, 5000), 2), {"loads": PROFILE})
    assert [miss.split(": ")[1].split(" (")[0] for miss in both] == [
        "load low runs 4 requests at once, the server at most 2", "load high runs 64 requests at once, the server at most 2"]
    with pytest.raises(ex.ExperimentError, match="the smoke test's result is not a measurement of loads"):
        ex.cap_misses({"config": []}, {"loads": PROFILE})


def test_the_objective_comes_with_the_loads_of_the_profile():
    loads = {"high": {"concurrency": 64, "num_requests": 256, "input_tokens": 1024, "output_tokens": 256,
                      "slo": {"ttft_p99_ms": 3000, "itl_p99_ms": 80}},
             "low": {"concurrency": 4, "num_requests": 32, "input_tokens": 1024, "output_tokens": 256}}
    settings = ex.settings_of({"loads": loads})
    assert settings["loads"] == ["low", "high"]
    assert settings["slo"] == {"high": {"ttft_p99_ms": 3000, "itl_p99_ms": 80}}


@pytest.mark.parametrize("slo, message", [
    ({"high": {"ttft_ms": 100}}, "the objective \\(slo\\) of load high has ttft_ms, which is not one of itl_p99_ms, "
                                 "ttft_p99_ms"),
    ({"high": {"ttft_p99_ms": 0}}, "has ttft_p99_ms = 0: give a number of milliseconds above 0"),
    ({"high": {"ttft_p99_ms": "fast"}}, "has ttft_p99_ms = 'fast'"),
    ({"high": {}}, "must be a mapping with ttft_p99_ms and/or itl_p99_ms"),
    ({"high": 500}, "must be a mapping with ttft_p99_ms and/or itl_p99_ms"),
])
def test_a_bad_objective_names_the_load_and_the_fix(slo, message):
    with pytest.raises(ex.ExperimentError, match=message):
        ex.settings_of(dict(SETTINGS, slo=slo))


def test_a_verdict_is_remembered_per_objective_and_a_load_without_one_keeps_its_old_key():
    load = {"concurrency": 64, "num_requests": 256, "input_tokens": 1024, "output_tokens": 256}
    plain = ex.memory_key("0.5.23", 8, "pcie", "RTX PRO 6000", {"high": load})
    assert plain == "sglang 0.5.23 | TP 8 | pcie | RTX PRO 6000 | high=64/256/1024/256"
    bounded = ex.memory_key("0.5.23", 8, "pcie", "RTX PRO 6000",
                            {"high": dict(load, slo={"ttft_p99_ms": 3000, "itl_p99_ms": 80.5})})
    assert bounded == "sglang 0.5.23 | TP 8 | pcie | RTX PRO 6000 | high=64/256/1024/256 itl_p99_ms<=80.5 " \
                      "ttft_p99_ms<=3000"


# ------------------------------------------------------------------ warm-up after a start

LOAD_C16 = {"concurrency": 16, "num_requests": 64, "input_tokens": 256, "output_tokens": 256}


def test_the_first_run_of_a_configuration_is_warmed_with_whole_runs_of_its_load():
    # The 4 warm-up requests of every run, and one run's 64 requests more before the first.
    assert ex.warmup_requests(LOAD_C16, 0, 4, 1) == 68
    assert ex.warmup_requests(LOAD_C16, 0, 4, 2) == 132


def test_later_runs_get_the_plain_warm_up():
    assert ex.warmup_requests(LOAD_C16, 1, 4, 1) == 4
    assert ex.warmup_requests(LOAD_C16, 11, 4, 3) == 4


def test_no_warm_up_runs_leaves_the_plain_warm_up():
    assert ex.warmup_requests(LOAD_C16, 0, 4, 0) == 4
    assert ex.warmup_requests(LOAD_C16, 0, 0, 0) == 0


def test_numbers_from_extra_vars_are_taken_as_strings():
    assert ex.warmup_requests({"num_requests": "8"}, "0", "2", "1") == 10


@pytest.mark.parametrize("num_warmup, runs, named", [
    (-1, 1, "smoke_test_num_warmup"), (4, -1, "smoke_test_warmup_runs"), (4, 1.5, "smoke_test_warmup_runs"),
    (4, "one", "smoke_test_warmup_runs"), (True, 1, "smoke_test_num_warmup"), (4, None, "smoke_test_warmup_runs")])
def test_a_bad_warm_up_setting_is_named(num_warmup, runs, named):
    with pytest.raises(ex.ExperimentError, match=named + " must be a whole number of 0 or more"):
        ex.warmup_requests(LOAD_C16, 0, num_warmup, runs)


def test_a_load_without_requests_is_refused():
    with pytest.raises(ex.ExperimentError, match="a load needs num_requests"):
        ex.warmup_requests({"concurrency": 4}, 0, 4, 1)


@pytest.mark.parametrize("run_tags, named", [
    (["smoke"], True), (["service", "smoke"], True), (["all"], False), (["tagged"], False), ([], False),
])
def test_the_smoke_phase_is_named_only_where_smoke_is_among_the_run_tags(run_tags, named):
    assert ex.smoke_named(run_tags) is named


def test_a_configuration_key_is_its_experiments_sorted_once_each():
    assert ex.config_key(["nccl_min_nchannels_8", "flashinfer_allreduce_fusion", "nccl_min_nchannels_8"]) == (
        "flashinfer_allreduce_fusion+nccl_min_nchannels_8")
    assert ex.config_key([]) == ""


# ------------------------------------------------------------------ a stepped knob


def test_a_stepped_knob_goes_up_one_step_at_a_time_and_a_step_that_pays_supersedes_the_one_before():
    # Each step alone (one runs at a time): s2 beats s1, s3 is slower than s2 at high load.
    effects = {"s1": (1.2, 1.1), "s2": (1.4, 1.2), "s3": (1.5, 1.0)}
    measured = []
    step, restarts = drive(["s1", "s2", "s3"], model(effects), deployed=[], knobs=KNOBS, measured=measured)
    assert decisions(step) == {"s1": ex.SUPERSEDED, "s2": ex.KEPT, "s3": ex.REJECTED} and step["keep"] == ["s2"]
    s1, s2, s3 = step["verdicts"]
    assert s1["superseded_by"] == "s2" and s1["reason"].startswith("kept, then replaced by the next step of its knob, s2")
    assert s1["loads"]["low"]["verdict"] == ex.GAIN and s1["candidate_config"] == ["s1"]
    # Each step in place of the one before it, never two at once.
    assert s2["baseline_config"] == ["s1"] and s2["candidate_config"] == ["s2"]
    assert s3["baseline_config"] == ["s2"] and s3["candidate_config"] == ["s3"]
    assert measured == [["s1"], ["s2"], ["s3"]]
    # k = 3 restarts to measure, one back to what is kept (s3 was not).
    assert step["restarts"] == 3 and restarts == 4 and step["stopped"] == [] and step["untried"] == []


@pytest.mark.parametrize("effects, stopped_at, keep", [
    ({"s1": (0.8, 0.8), "s2": (2.0, 2.0), "s3": (2.0, 2.0)}, "s1", []),
    ({"s1": (1.2, 1.2), "s2": (1.2, 1.2), "s3": (2.0, 2.0)}, "s2", ["s1"]),
])
def test_the_first_step_that_does_not_pay_ends_the_search_at_no_restart(effects, stopped_at, keep):
    measured = []
    step, restarts = drive(["s1", "s2", "s3"], model(effects), deployed=[], knobs=KNOBS, measured=measured)
    tried = KNOBS["mtp"][:KNOBS["mtp"].index(stopped_at) + 1]
    assert step["keep"] == keep and measured == [[name] for name in tried]
    assert step["stopped"] == KNOBS["mtp"][len(tried):] and step["untried"] == []
    for verdict in step["verdicts"][len(tried):]:
        assert verdict["decision"] == ex.UNTRIED and verdict["stopped_at"] == stopped_at, verdict
        assert verdict["reason"].startswith("not tried: the search of the stepped knob mtp stopped at %s (%s)" % (
            stopped_at, decisions(step)[stopped_at]))
    assert restarts == len(tried) + (0 if keep == [tried[-1]] else 1)


@pytest.mark.parametrize("effects", [dict(zip(["s1", "s2", "s3", "h"], combo)) for combo in itertools.product(
    [(1.2, 1.2), (1.0, 1.0), (0.5, 0.5), (1.3, 0.8)], repeat=4)])
def test_no_configuration_measured_or_kept_runs_two_steps_of_a_knob(effects):
    for deployed in ([], ["h"]):
        measured = []
        step, restarts = drive(["h", "s1", "s2", "s3"], model(effects), deployed=deployed, knobs=KNOBS,
                               measured=measured)
        for config in measured + [step["keep"]]:
            assert len(set(config) & set(KNOBS["mtp"])) <= 1, (effects, config)
        # Measured: the steps up to the first that did not pay, and h (or, deployed with h, the baseline without
        # it); at most one restart more, back to what is kept.
        assert len(measured) == 4 - len(step["stopped"])
        assert restarts <= len(measured) + 1, (effects, measured)
        kept = [verdict["experiment"] for verdict in step["verdicts"] if verdict["decision"] == ex.KEPT]
        assert sorted(kept) == step["keep"]


def test_a_remembered_search_goes_on_from_the_step_kept_and_stops_where_it_stopped():
    effects = {"s1": (1.2, 1.1), "s2": (1.4, 1.2), "s3": (1.7, 1.4)}
    remembered = {"s1": {"decision": ex.SUPERSEDED, "reason": "kept, then replaced"},
                  "s2": {"decision": ex.KEPT, "reason": "faster at load low"}}
    measured = []
    step, _restarts = drive(["s1", "s2", "s3"], model(effects), remembered=remembered, deployed=["s2"], knobs=KNOBS,
                            measured=measured)
    assert measured == [["s3"]] and step["keep"] == ["s3"]
    assert decisions(step) == {"s1": ex.SUPERSEDED, "s2": ex.SUPERSEDED, "s3": ex.KEPT}
    assert [verdict["remembered"] for verdict in step["verdicts"]] == [True, False, False]
    # Where the first step did not pay, the rest stay untried with no measurement at all.
    step, restarts = drive(["s1", "s2", "s3"], model(effects), deployed=[], knobs=KNOBS,
                           remembered={"s1": {"decision": ex.REJECTED, "reason": "slower at load high"}})
    assert step["stopped"] == ["s2", "s3"] and restarts == 0 and step["measured"] == 1


def test_two_remembered_kept_steps_start_on_the_later_one():
    remembered = {"s1": {"decision": ex.KEPT, "reason": "r"}, "s2": {"decision": ex.KEPT, "reason": "r"}}
    step = ex.plan_step(["s1", "s2", "h"], {}, SETTINGS, remembered, deployed=[], knobs=KNOBS)
    assert step == {"done": False, "measure": ["s2"]}
    step = ex.plan_step(["s1", "s2"], {"s2": model({"s2": (1.2, 1.2)})(["s2"])}, SETTINGS, remembered, deployed=["s2"],
                        knobs=KNOBS)
    assert step["keep"] == ["s2"] and decisions(step) == {"s1": ex.SUPERSEDED, "s2": ex.KEPT}
    # So the earlier one is recorded as turned off: the next deploy does not run both.
    assert list(ex.rejections(step["verdicts"], ["s1", "s2"], "r", "t")["tuning"]) == ["s1"]


def test_a_superseded_and_a_stopped_step_are_recorded_as_off_and_only_the_superseded_is_remembered():
    effects = {"s1": (1.2, 1.2), "s2": (1.5, 1.5), "s3": (1.5, 1.5)}
    step, _restarts = drive(["s1", "s2", "s3"], model(effects), deployed=[], knobs=KNOBS)
    assert decisions(step) == {"s1": ex.SUPERSEDED, "s2": ex.KEPT, "s3": ex.NO_GAIN}
    step, _restarts = drive(["s1", "s2", "s3", "n"], model(dict(effects, s2=(1.2, 1.2), n=(1.0, 1.0))),
                            deployed=[], knobs=KNOBS, settings=dict(SETTINGS, restart_budget=2))
    assert decisions(step) == {"s1": ex.KEPT, "s2": ex.NO_GAIN, "s3": ex.UNTRIED, "n": ex.UNTRIED}
    assert step["stopped"] == ["s3"] and step["untried"] == ["n"]
    recorded = ex.rejections(step["verdicts"], ["s1", "s2", "s3", "n"], "run-1", "2026-12-05T00:00:00Z")
    # The stopped step is off on record (the next deploy does not turn it on beside s1); the one the budget left
    # is measured by the next run.
    assert sorted(recorded["tuning"]) == ["s2", "s3"]
    memory = ex.remember({}, "key", step["verdicts"], "host-1", "run-1")
    assert sorted(memory["key"]) == ["s1", "s2"]
    superseding = drive(["s1", "s2"], model({"s1": (1.2, 1.2), "s2": (1.5, 1.5)}), deployed=[], knobs=KNOBS)[0]
    recorded = ex.rejections(superseding["verdicts"], ["s1", "s2"], "run-2", "2026-12-05T00:00:00Z")
    assert list(recorded["tuning"]) == ["s1"] and "superseded" in recorded["tuning"]["s1"]["reason"]
    memory = ex.remember({}, "key", superseding["verdicts"], "host-1", "run-2")
    assert memory["key"]["s1"]["decision"] == ex.SUPERSEDED


def test_the_decision_order_keeps_a_knobs_steps_going_up():
    names = ["a", "s1", "s2", "s3", "g"]
    assert ex.decision_order(names, [], KNOBS) == ["g", "s1", "s2", "s3", "a"]
    assert ex.decision_order(names, names, KNOBS) == names
    assert ex.decision_order(["s3", "a", "s1"], None, KNOBS) == ["s1", "a", "s3"]


def test_the_search_goes_up_from_the_step_kept_on_record_and_leaves_the_steps_below_it_untried():
    # A host that kept the highest step before the knob had steps: the lower ones are not measured against it.
    effects = {"s1": (1.2, 1.2), "s2": (1.5, 1.5), "s3": (1.3, 1.3)}
    measured = []
    step, restarts = drive(["s1", "s2", "s3"], model(effects), remembered={"s3": {"decision": ex.KEPT, "reason": "r"}},
                           deployed=["s3"], knobs=KNOBS, measured=measured)
    assert measured == [] and restarts == 0 and step["keep"] == ["s3"]
    for name in ("s1", "s2"):
        verdict = step["verdicts"][["s1", "s2", "s3"].index(name)]
        assert verdict["decision"] == ex.UNTRIED and verdict["stopped_at"] == "s3", verdict
        assert verdict["reason"].startswith("not tried: below s3, the step of the stepped knob mtp kept on record")
        assert "experiments_retry: [s3] and sglang_service_tuning_retry_rejected: true" in verdict["reason"]
    assert sorted(ex.rejections(step["verdicts"], ["s1", "s2", "s3"], "r", "t")["tuning"]) == ["s1", "s2"]


def test_a_step_superseded_on_record_is_the_knobs_step_where_the_one_that_superseded_it_is_not_run():
    record = {"s1": {"decision": ex.SUPERSEDED, "reason": "kept, then replaced", "superseded_by": "s2"},
              "s2": {"decision": ex.KEPT, "reason": "faster at load low"}}
    effects = {"s1": (1.2, 1.2), "s2": (1.5, 1.5), "s3": (1.3, 1.3)}
    # A twin asked for the first step only: it runs it, kept, not turned off.
    step, _restarts = drive(["s1"], model(effects), remembered=record, deployed=[], knobs=KNOBS)
    assert step["keep"] == ["s1"] and decisions(step) == {"s1": ex.KEPT}
    assert step["verdicts"][0]["reason"].startswith("kept: superseded on record by s2, which this run does not run")
    assert ex.rejections(step["verdicts"], ["s1"], "r", "t") == {"gates": {}, "tuning": {}}
    # The middle step retried: measured again in place of the first.
    measured = []
    retried = {"s1": record["s1"]}
    step, _restarts = drive(["s1", "s2"], model(effects), remembered=retried, deployed=[], knobs=KNOBS,
                            measured=measured)
    # (The server here runs neither: the first step, the baseline, is measured too.)
    assert measured == [["s1"], ["s2"]], measured
    assert decisions(step) == {"s1": ex.SUPERSEDED, "s2": ex.KEPT} and step["keep"] == ["s2"]
    s2 = step["verdicts"][1]
    assert s2["baseline_config"] == ["s1"] and s2["in_place_of"] == "s1"


def test_a_step_that_loses_to_the_step_before_it_ends_the_search_without_failing_the_run():
    from ansible_collections.sm120.sglang.plugins.plugin_utils.run_verdict import run_verdict
    step, _restarts = drive(["s1", "s2", "s3"], model({"s1": (1.2, 1.2), "s2": (1.5, 1.5), "s3": (1.2, 1.2)}),
                            deployed=[], knobs=KNOBS)
    assert decisions(step) == {"s1": ex.SUPERSEDED, "s2": ex.KEPT, "s3": ex.REJECTED}
    assert step["verdicts"][2]["in_place_of"] == "s2"
    verdict = run_verdict(step["verdicts"], on_rejection="fail")
    assert verdict["status"] == "pass" and verdict["rolled_back"] == [] and not verdict["stop"], verdict
    # The first step, judged against no step of its knob, is an experiment's rejection as any other.
    step, _restarts = drive(["s1", "s2"], model({"s1": (0.5, 0.5), "s2": (1.5, 1.5)}), deployed=[], knobs=KNOBS)
    assert run_verdict(step["verdicts"], on_rejection="fail")["rolled_back"] == ["s1"]
    # The memory keeps what a later run needs of a step: what superseded it, what it was judged against.
    searched, _restarts = drive(["s1", "s2", "s3"], model({"s1": (1.2, 1.2), "s2": (1.5, 1.5), "s3": (1.2, 1.2)}),
                                deployed=[], knobs=KNOBS)
    memory = ex.remember({}, "key", searched["verdicts"], "host-1", "run-1")
    assert memory["key"]["s1"]["superseded_by"] == "s2" and memory["key"]["s3"]["in_place_of"] == "s2"


def test_a_step_after_one_the_budget_left_untried_is_left_for_the_budget_and_after_a_loser_stopped():
    effects = {"s1": (0.5, 0.5), "x": (1.2, 1.2), "s2": (1.5, 1.5)}
    step, _restarts = drive(["s1", "x", "s2"], model(effects), deployed=[], knobs=KNOBS,
                            settings=dict(SETTINGS, restart_budget=1))
    assert decisions(step) == {"s1": ex.REJECTED, "x": ex.UNTRIED, "s2": ex.UNTRIED}
    assert step["untried"] == ["x"] and step["stopped"] == ["s2"]
    step, _restarts = drive(["x", "s1", "s2"], model(effects), deployed=[], knobs=KNOBS,
                            settings=dict(SETTINGS, restart_budget=1))
    assert step["untried"] == ["s1", "s2"] and step["stopped"] == []


@pytest.mark.parametrize("effects", [dict(zip(["s1", "s2", "s3", "h"], combo)) for combo in itertools.product(
    [(1.2, 1.2), (1.0, 1.0), (0.5, 0.5), (1.3, 0.8)], repeat=4)])
def test_a_twin_taking_a_searchs_verdicts_measures_nothing_and_ends_where_the_search_ended(effects):
    names = ["h", "s1", "s2", "s3"]
    first, _restarts = drive(names, model(effects), deployed=[], knobs=KNOBS)
    memory = ex.remember({}, "key", first["verdicts"], "canary", "run-1")
    remembered = ex.remembered_verdicts(memory, "key")
    measured = []
    twin, _restarts = drive(names, model(effects), remembered=remembered, deployed=[], knobs=KNOBS, measured=measured)
    # Only a step the search stopped short of has no verdict kept, and the twin stops short of it again.
    assert twin["keep"] == first["keep"] and twin["stopped"] == first["stopped"], (effects, first, twin)
    # (The role then switches to what is kept, which the plan does not ask to measure.)
    assert measured == [] and twin["measured"] == 1, (effects, measured)
    # Every experiment is kept or recorded as turned off: no later deploy turns on two steps of the knob.
    off = ex.rejections(twin["verdicts"], names, "run-2", "t")["tuning"]
    assert sorted(set(off) | set(twin["keep"])) == sorted(names) and not set(off) & set(twin["keep"]), (effects, off)
    assert len(set(twin["keep"]) & set(KNOBS["mtp"])) <= 1

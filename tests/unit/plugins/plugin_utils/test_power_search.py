# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The power limit as a live stepped experiment: its steps against the GPUs, a step's energy verdict, the search."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments as ex
from ansible_collections.sm120.sglang.plugins.plugin_utils import power_search as ps

LOADS = ["low", "high"]
SETTINGS = {"tolerance": 0.03, "noise_multiple": 2.0, "parity_min_match": 1.0, "loads": LOADS}
GPUS = [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "power_limit_w": 600.0,
         "power_min_limit_w": 150.0, "power_max_limit_w": 600.0} for i in range(8)]


def card(limit_w, knee_w=450.0, load_w=580.0, rate=(500.0, 3000.0), gpus=8):
    """A measurement of a card like the published sweep: flat above the knee, falling below; it draws what it
    needs up to the limit. Joules per output token: the GPUs' draw over the tokens per second."""
    speed = min(1.0, limit_w / knee_w) ** 3
    draw = min(load_w, limit_w) * gpus
    loads = {}
    for load, tok_s in zip(LOADS, rate):
        tok_s *= speed
        loads[load] = [{"output_tokens_per_s": tok_s, "ttft_ms": {"p99": 100.0 / speed},
                        "power": {"total_mean_w": draw, "joules_per_output_token": round(draw / tok_s, 4)}}
                       for _repeat in range(3)]
    return {"config": ["nccl_min_nchannels_8"], "label": "at %g W" % limit_w, "loads": loads, "parity": []}


def search(steps, settings=None, **shape):
    """The role's loop: ask, measure the step asked for, until done; the steps measured in order."""
    settings = settings or SETTINGS
    measured, asked = {}, []
    baseline = card(600.0, **shape)
    for _round in range(len(steps) + 1):
        step = ps.power_search_step(steps, measured, baseline, settings)
        if step["done"]:
            return step, asked
        asked.append(step["measure"])
        measured[str(step["measure"])] = card(step["measure"], **shape)
    raise AssertionError("the search did not end")


def decisions(step):
    return [(verdict["limit_w"], verdict["decision"]) for verdict in step["verdicts"]]


def test_steps_are_tried_highest_first_below_the_limit_the_gpus_run_at():
    assert ps.power_steps([450, "500", 600, 550.0, 500], GPUS) == [550.0, 500.0, 450.0]
    assert ps.power_steps([], GPUS) == []
    lowered = [dict(gpu, power_limit_w=500.0) for gpu in GPUS]
    assert ps.power_steps([550, 450], lowered) == [450.0]


@pytest.mark.parametrize("steps, gpus, message", [
    ([100], GPUS, "experiments_power_limit_steps_w has 100 W, which GPU 0 .* does not accept: its power limit goes "
                  "from 150 to 600 W"),
    ([650], GPUS, "has 650 W, which GPU 0"),
    (["lots"], GPUS, "each step must be a number of watts above 0"),
    ([True], GPUS, "each step must be a number of watts above 0"),
    ("450", GPUS, "must be a list of watts"),
    ([450], [], "needs the host's GPUs"),
    ([450], [{"index": 0, "name": "x"}], "GPU 0 reports no power limit"),
])
def test_a_step_a_gpu_cannot_take_is_refused_naming_it(steps, gpus, message):
    with pytest.raises(ex.ExperimentError, match=message):
        ps.power_steps(steps, gpus)


def test_the_search_settles_at_the_lowest_step_without_a_loss_and_stops_at_the_first_that_does_not_pay():
    # Flat down to 450 W: 550, 500 and 450 W each draw less for the same tokens; 400 W is below the knee.
    step, asked = search([550.0, 500.0, 450.0, 400.0, 350.0])
    assert decisions(step) == [(550.0, ex.KEPT), (500.0, ex.KEPT), (450.0, ex.KEPT), (400.0, ex.REJECTED),
                               (350.0, ex.UNTRIED)]
    assert asked == [550.0, 500.0, 450.0, 400.0] and step["limit_w"] == 450.0
    assert step["measurement"]["label"] == "at 450 W"
    kept = step["verdicts"][2]
    assert kept["reason"] == "less energy per output token at load low, high, no slower"
    assert kept["draw"] == {"baseline_w": 4000.0, "candidate_w": 3600.0}
    assert "All GPUs drew 3600.0 W at load high, against 4000.0 W" in kept["message"]
    # Each step is judged against the last one kept, not against the start.
    assert kept["energy"]["high"]["change"] == pytest.approx(450 / 500 - 1, abs=1e-3)
    assert step["verdicts"][3]["reason"] == "slower at load low, high"
    assert "the search stopped at 400 W" in step["verdicts"][4]["reason"]


def test_a_step_that_saves_nothing_ends_the_search_at_the_start():
    # The GPUs draw 400 W under load: limits above that change nothing.
    step, asked = search([550.0, 500.0, 450.0], load_w=400.0)
    assert decisions(step) == [(550.0, ex.NO_GAIN), (500.0, ex.UNTRIED), (450.0, ex.UNTRIED)]
    assert asked == [550.0] and step["limit_w"] is None and step["measurement"]["label"] == "at 600 W"


def test_a_step_that_breaks_a_latency_objective_is_rejected_although_it_saves_energy():
    # Just below the knee: 2 % slower is inside the band, but the TTFT bound is missed.
    settings = dict(SETTINGS, slo={"high": {"ttft_p99_ms": 102.0}}, tolerance=0.05)
    step, _asked = search([440.0], settings=settings, knee_w=443.0)
    verdict, = step["verdicts"]
    assert verdict["decision"] == ex.REJECTED and verdict["reason"].startswith("breaks the latency objective")
    assert step["limit_w"] is None


def test_a_measurement_without_energy_is_named():
    baseline = card(600.0)
    bare = card(550.0)
    for runs in bare["loads"].values():
        for run in runs:
            run["power"] = {}
    with pytest.raises(ex.ExperimentError, match="has a run without joules per output token"):
        ps.power_search_step([550.0], {"550": bare}, baseline, SETTINGS)
    with pytest.raises(ex.ExperimentError, match="keyed 'lots', not by its watts"):
        ps.power_search_step([550.0], {"lots": bare}, baseline, SETTINGS)

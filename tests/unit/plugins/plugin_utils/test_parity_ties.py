# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The parity check tells a near-tie from wrong output where the server gives the top two logprobs a step.

The case it is for came from the H100 harness run of 2026-12-05 (docs/evidence/real-sglang-h100-head-2026-12-05b.md):
max_running_requests_64 on a random-weight Llama was rejected as wrong output because one of the four parity prompts
parted from its baseline after 7 % of its text, a share no prefix rule can hold while still catching garbled text."""

from __future__ import annotations

import json
import urllib.request

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_compare import near_tie, parity_check
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_io import measurement_of, parity_output
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import ExperimentError, settings_of


def output(tokens, top):
    return {"text": "".join(tokens), "tokens": tokens, "top": top}


# The baseline chose " err" over " Parse" by 0.03 nats at its second token; the candidate took " Parse".
# (the texts are those of the H100's prompt 3, which share 7 % of the baseline's)
BASELINE = output([" gu", " err", " +++,arcLANlectorEventLoop"], [
    {" gu": -0.1, " x": -4.0}, {" err": -1.10, " Parse": -1.13}, {" +++,arcLANlectorEventLoop": -0.5, " y": -3.0}])
CANDIDATE = output([" gu", " Parse", "Error SimpleXMLRPC"], [
    {" gu": -0.1, " x": -4.0}, {" Parse": -1.1, " err": -1.12}, {"Error SimpleXMLRPC": -0.2, " z": -3.0}])


def test_a_part_at_a_near_tie_of_the_baseline_agrees():
    assert near_tie(BASELINE, CANDIDATE, 0.5) == {"token": 1, "margin": 0.03}
    check = parity_check([BASELINE], [CANDIDATE], 1.0, 0.25, 0.5)
    assert check["ok"] and check["matched"] == 1 and check["ties"] == [{"prompt": 0, "token": 1, "margin": 0.03}]
    assert check["agreement"][0] < 0.25  # the prefix rule alone calls it wrong output
    assert not parity_check([BASELINE], [CANDIDATE], 1.0, 0.25, 0.0)["ok"]


def test_a_part_where_the_baseline_was_sure_is_wrong_output():
    sure = output(BASELINE["tokens"], [BASELINE["top"][0], {" err": -0.05, " Parse": -3.0}, BASELINE["top"][2]])
    assert near_tie(sure, CANDIDATE, 0.5) is None
    check = parity_check([sure], [CANDIDATE], 1.0, 0.25, 0.5)
    assert not check["ok"] and check["ties"] == [] and check["first_mismatch"]["prompt"] == 0


def test_a_token_outside_the_baseline_top_two_is_wrong_output_however_close_the_two():
    garbled = output([" gu", " !!", " !!"], [{" gu": -0.1}, {" !!": -0.01, " ?": -6.0}, {" !!": -0.01, " ?": -6.0}])
    assert near_tie(BASELINE, garbled, 0.5) is None
    assert not parity_check([BASELINE], [garbled], 1.0, 0.25, 0.5)["ok"]


@pytest.mark.parametrize("baseline, candidate", [
    (BASELINE["text"], CANDIDATE),  # a baseline kept by a release that asked for no logprobs
    (BASELINE, CANDIDATE["text"]),
    (output(["gu"], [{"gu": -0.1}]), output(["xa"], [{"xa": -0.1}])),  # one token a step: no second to tie
])
def test_without_the_top_two_the_prefix_rule_alone_judges(baseline, candidate):
    assert near_tie(baseline, candidate, 0.5) is None
    assert not parity_check([baseline], [candidate], 1.0, 0.25, 0.5)["ok"]


def test_the_same_text_agrees_with_or_without_logprobs():
    check = parity_check([BASELINE, "x"], [dict(BASELINE), "x"], 1.0, 0.25, 0.5)
    assert check["ok"] and check["identical"] == 2 and check["ties"] == []


def test_the_tie_bound_is_checked_and_named():
    assert settings_of({})["parity_tie_nats"] == 0.5
    for bad in (-0.1, "half", True):
        with pytest.raises(ExperimentError, match="experiments_parity_tie_nats must be a number of nats, 0 or more"):
            settings_of({"parity_tie_nats": bad})


def test_the_measurement_keeps_the_logprobs_a_server_gives():
    logprobs = {"tokens": [" a"], "token_logprobs": [-0.1], "top_logprobs": [{" a": -0.1, " b": -0.2}],
                "text_offset": [-1]}
    measured = measurement_of([], [{"json": {"choices": [{"text": " a", "logprobs": logprobs}]}},
                                   {"json": {"choices": [{"text": " c", "logprobs": None}]}}], [])
    assert measured["parity"] == [{"text": " a", "tokens": [" a"], "top": [{" a": -0.1, " b": -0.2}]}, " c"]
    assert parity_output(" c", {"tokens": "not a list"}) == " c"


def ask(url, prompts):
    """The parity prompts as roles/smoke_test/tasks/measure.yml asks them (temperature 0, the top two logprobs)."""
    answers = []
    for prompt in prompts:
        body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 16, "temperature": 0, "logprobs": 2}).encode()
        request = urllib.request.Request(url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            answers.append({"json": json.loads(response.read())})
    return answers


PROMPTS = ["The capital of France is", "Write the next number: 2, 4, 8, 16,", "def fibonacci(n):"]


def test_two_starts_of_the_standin_part_at_a_near_tie_early_and_agree(start_standin):
    """The stand-in plays the H100's random-weight server: two starts part after 10 % of the text (the real one parted
    after 7 % and 29 %), at a near-tie. By the prefix alone that is wrong output; with the top two it agrees."""
    env = {"SGLANG_STANDIN_STABLE_SHARE": "0.1"}
    first = measurement_of([], ask(start_standin(env=dict(env, SGLANG_STANDIN_START_SEED="0")), PROMPTS), [])
    second = measurement_of([], ask(start_standin(env=dict(env, SGLANG_STANDIN_START_SEED="1")), PROMPTS), [])
    texts = [[answer["text"] for answer in measured["parity"]] for measured in (first, second)]
    assert all(left != right for left, right in zip(*texts))
    assert not parity_check(texts[0], texts[1], 1.0, 0.25, 0.5)["ok"]
    check = parity_check(first["parity"], second["parity"], 1.0, 0.25, 0.5)
    assert check["ok"] and [tie["prompt"] for tie in check["ties"]] == [0, 1, 2]
    assert all(tie["token"] == 2 and tie["margin"] == 0.02 for tie in check["ties"])

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The experiment data: tuning options as environment and flags, which gates are experiments, their order."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_data as data
from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases


def test_the_data_file_is_valid_and_names_only_gates_the_release_data_has():
    loaded = data.load()
    gates = set(sglang_releases.load()["gates"])
    assert set(loaded["profile_gates"]) <= gates and set(loaded["gates_by_risk"]) <= gates
    assert set(loaded["gates_by_risk"]) | set(loaded["profile_gates"]) == gates


def test_tuning_options_become_environment_and_flags():
    settings = data.tuning_settings(["nccl_min_nchannels_8", "cuda_graph_max_bs_128"])
    assert settings == {"names": ["cuda_graph_max_bs_128", "nccl_min_nchannels_8"],
                        "env": {"NCCL_MIN_NCHANNELS": "8"}, "flags": {"--cuda-graph-max-bs": 128}, "needs": []}
    assert data.tuning_settings(["nccl_min_nchannels_8"], off=["nccl_min_nchannels_8"])["names"] == []
    assert data.tuning_settings(None) == {"names": [], "env": {}, "flags": {}, "needs": []}


def test_an_unknown_option_is_refused_naming_the_known_ones():
    with pytest.raises(data.ExperimentDataError, match="sglang_service_tuning names nccl_fast, which data/experiments.yml "
                                                       "does not define; known tuning options: "
                                                       "attention_flashinfer, chunked_prefill_4096, "
                                                       "continuous_decode_steps_2, continuous_decode_steps_4, "
                                                       "continuous_decode_steps_8, cuda_graph_max_bs_128"):
        data.tuning_settings(["nccl_fast"])
    with pytest.raises(data.ExperimentDataError, match="must be a list of tuning option names"):
        data.tuning_settings("nccl_min_nchannels_8")


def test_two_options_that_set_the_same_variable_are_refused():
    loaded = copy.deepcopy(data.load())
    loaded["options"]["nccl_min_nchannels_16"] = dict(loaded["options"]["nccl_min_nchannels_8"],
                                                      env={"NCCL_MIN_NCHANNELS": "16"})
    with pytest.raises(data.ExperimentDataError, match="nccl_min_nchannels_16 and nccl_min_nchannels_8 both set "
                                                       "NCCL_MIN_NCHANNELS"):
        data.tuning_settings(["nccl_min_nchannels_8", "nccl_min_nchannels_16"], data=loaded)


@pytest.mark.parametrize("option, message", [
    ({"description": "d", "source": "s"}, "sets neither env nor flags"),
    ({"description": "d", "source": "s", "env": {"NCCL MIN": "8"}}, "needs a valid name and a quoted string"),
    ({"description": "d", "source": "s", "env": {"NCCL_MIN_NCHANNELS": 8}}, "needs a valid name and a quoted string"),
    ({"description": "d", "source": "s", "flags": {"cuda-graph-max-bs": 1}}, "must start with --"),
    ({"env": {"A": "1"}}, "needs a description and a source"),
    ({"description": "d", "source": "s", "env": {"A": "1"}, "note": "x"}, "unknown keys note"),
])
def test_a_bad_option_is_named(option, message):
    with pytest.raises(data.ExperimentDataError, match=message):
        data.check({"options": {"bad": option}})


def test_the_experiments_are_tuning_first_then_the_gates_by_risk_and_not_the_profiles():
    assert data.experiments_among(
        ["moe_runner_sm120", "flashinfer_allreduce_fusion", "pcie_ipc_allreduce"], ["nccl_min_nchannels_8"]) == [
        "nccl_min_nchannels_8", "pcie_ipc_allreduce", "flashinfer_allreduce_fusion"]
    assert data.experiments_among(["custom_allreduce_pcie", "a_new_gate"], []) == [
        "a_new_gate", "custom_allreduce_pcie"]


LOADS = {"low": {"concurrency": 4, "num_requests": 32, "input_tokens": 1024, "output_tokens": 256},
         "high": {"concurrency": 64, "num_requests": 256, "input_tokens": 1024, "output_tokens": 256}}


def test_mtp_sets_max_running_requests_to_the_highest_load_and_needs_the_mtp_layer():
    # Unset, SGLang resets --max-running-requests to 48 with speculative decoding on: a load of 64 would be capped.
    settings = data.tuning_settings(["mtp_nextn_3_4"], release="0.5.23", loads=LOADS)
    assert settings["flags"] == {"--speculative-algorithm": "NEXTN", "--speculative-num-steps": 3,
                                 "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": 4,
                                 "--max-running-requests": 64}
    assert settings["needs"] == ["mtp_layer"]
    # Another option that sets it wins: the cap is explicit either way.
    both = data.tuning_settings(["mtp_nextn_3_4", "max_running_requests_64"], release="0.5.23",
                                loads=dict(LOADS, high=dict(LOADS["high"], concurrency=256)))
    assert both["flags"]["--max-running-requests"] == 64


def test_mtp_without_loads_to_size_the_cap_is_refused():
    with pytest.raises(data.ExperimentDataError, match="mtp_nextn_3_4 sets --max-running-requests to the profile's "
                                                       "highest load, but the profile has no loads"):
        data.tuning_settings(["mtp_nextn_3_4"], loads={})


@pytest.mark.parametrize("release, refused", [("0.5.15.post1", False), ("0.5.15", False), ("0.5.16", True),
                                              ("0.5.23", True)])
def test_the_cutlass_moe_runner_is_refused_from_0_5_16_naming_the_release_and_the_reason(release, refused):
    if not refused:
        assert data.tuning_settings(["moe_runner_cutlass"], release=release)["flags"] == {
            "--moe-runner-backend": "cutlass"}
        return
    with pytest.raises(data.ExperimentDataError) as caught:
        data.tuning_settings(["moe_runner_cutlass"], release=release)
    assert str(caught.value).startswith(
        "SGLang %s cannot take the tuning option moe_runner_cutlass (it runs on <0.5.16): from SGLang 0.5.16 the "
        "cutlass MoE runner raises NotImplementedError for NVFP4" % release)
    assert str(caught.value).endswith("Take it out of sglang_service_tuning for this release.")


def test_an_unknown_release_is_not_judged_and_a_rejected_option_is_not_refused():
    assert data.tuning_settings(["moe_runner_cutlass"])["names"] == ["moe_runner_cutlass"]
    assert data.tuning_settings(["moe_runner_cutlass"], off=["moe_runner_cutlass"], release="0.5.23")["names"] == []


@pytest.mark.parametrize("change, message", [
    ({"versions": "around 0.5"}, "versions: 'around 0.5' is not a version range"),
    ({"versions": ">=0.5.9"}, "has versions but no 'refused'"),
    ({"needs": ["draft_model"]}, "needs must be a list of mtp_layer"),
    ({"max_running_requests": 48}, "max_running_requests must be highest_load"),
])
def test_bad_knob_data_is_refused_naming_the_option(change, message):
    loaded = copy.deepcopy(data.load())
    loaded["options"]["cuda_graph_max_bs_128"].update(change)
    with pytest.raises(data.ExperimentDataError, match="tuning option cuda_graph_max_bs_128.*" + message):
        data.check(loaded, "experiments.yml")


def test_the_mtp_steps_are_one_stepped_knob_searched_from_the_cheapest_draft_up():
    assert data.stepped()["mtp_nextn"] == ["mtp_nextn_1_2", "mtp_nextn_2_3", "mtp_nextn_3_4"]
    assert data.stepped()["continuous_decode_steps"] == [
        "continuous_decode_steps_2", "continuous_decode_steps_4", "continuous_decode_steps_8"]
    assert [data.load()["options"][name]["flags"]["--num-continuous-decode-steps"]
            for name in data.stepped()["continuous_decode_steps"]] == [2, 4, 8]
    # Each step: top-1 drafting, draft tokens one more than the steps (SGLang adjusts them so otherwise).
    for name, steps in zip(data.stepped()["mtp_nextn"], (1, 2, 3)):
        flags = data.load()["options"][name]["flags"]
        assert flags["--speculative-num-steps"] == steps and flags["--speculative-eagle-topk"] == 1
        assert flags["--speculative-num-draft-tokens"] == steps + 1
    # Sorted among the tuning options, the steps keep the knob's order (here the same as by name).
    assert data.experiments_among([], ["mtp_nextn_3_4", "cuda_graph_max_bs_128", "mtp_nextn_1_2"]) == [
        "cuda_graph_max_bs_128", "mtp_nextn_1_2", "mtp_nextn_3_4"]
    assert data.in_step_order(["b", "z", "a", "c"], {"k": ["c", "a", "b"]}) == ["c", "z", "a", "b"]


def test_two_steps_of_a_knob_run_only_as_a_search():
    wanted = data.tuning_settings(["mtp_nextn_1_2", "mtp_nextn_3_4", "nccl_min_nchannels_8"], release="0.5.23",
                                  loads=LOADS, searched=True)
    assert wanted["names"] == ["mtp_nextn_1_2", "mtp_nextn_3_4", "nccl_min_nchannels_8"]
    assert wanted["needs"] == ["mtp_layer"]
    with pytest.raises(data.ExperimentDataError) as caught:
        data.tuning_settings(["mtp_nextn_1_2", "mtp_nextn_3_4"], release="0.5.23", loads=LOADS)
    assert str(caught.value) == (
        "sglang_service_tuning turns on mtp_nextn_1_2 and mtp_nextn_3_4, which are steps of one knob, mtp_nextn, and "
        "one step runs at a time: keep one of them, or let the smoke test search them (experiments_enabled: "
        "true, the smoke phase in the run, and not -e sm120_deploy_hold_new=false), which starts the server without "
        "them and keeps the step that pays")
    # Another option that sets a step's flag is still refused in a search: it is not a step of the knob.
    with pytest.raises(data.ExperimentDataError, match="max_running_requests_64 and mtp_nextn_1_2 both set"):
        loaded = copy.deepcopy(data.load())
        loaded["options"]["max_running_requests_64"]["flags"] = {"--speculative-num-steps": 2}
        data.tuning_settings(["mtp_nextn_1_2", "max_running_requests_64"], data=loaded, loads=LOADS, searched=True)
    # One step, the other off on record: what the server runs.
    assert data.tuning_settings(["mtp_nextn_1_2", "mtp_nextn_3_4"], off=["mtp_nextn_1_2"], release="0.5.23",
                                loads=LOADS)["names"] == ["mtp_nextn_3_4"]


@pytest.mark.parametrize("stepped, message", [
    (["mtp_nextn_1_2"], "the stepped knob k needs a list of two or more tuning options"),
    ("mtp_nextn_1_2", "the stepped knob k needs a list of two or more tuning options"),
    (["mtp_nextn_1_2", "mtp_nextn_9_10"], "the stepped knob k names mtp_nextn_9_10, which is not a tuning option"),
])
def test_bad_stepped_knobs_are_named(stepped, message):
    loaded = copy.deepcopy(data.load())
    loaded["stepped"] = {"k": stepped}
    with pytest.raises(data.ExperimentDataError, match=message):
        data.check(loaded, "experiments.yml")
    loaded["stepped"] = {"k": ["mtp_nextn_1_2", "mtp_nextn_2_3"], "j": ["mtp_nextn_2_3", "mtp_nextn_3_4"]}
    with pytest.raises(data.ExperimentDataError, match="mtp_nextn_2_3 is a step of both k and j"):
        data.check(loaded, "experiments.yml")
    with pytest.raises(data.ExperimentDataError, match="stepped must be a mapping of knob name"):
        data.check(dict(loaded, stepped=["k"]), "experiments.yml")


def test_the_cutlass_refusal_is_the_wheels_own_from_the_release_the_data_names():
    """data/experiments.yml refuses moe_runner_cutlass where SGLang's own NVFP4 MoE method raises, which the real
    H100 probe reached only past the platform check that SM90 fails first (issue 37, docs/evidence/
    real-sglang-glm5-arch-h100-2026-12-06.md): every release's wheel holds the raise exactly where the data says, and
    the GPU stand-in raises the wheel's words."""
    from pathlib import Path

    from packaging.specifiers import SpecifierSet

    from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import needed_versions, sglang_wheel

    runs_on = SpecifierSet(data.load()["options"]["moe_runner_cutlass"]["versions"])
    raising = "moe_runner_backend=cutlass is not supported for NVFP4 MoE"
    for release in needed_versions():
        source = sglang_wheel(release).read("sglang/srt/layers/quantization/modelopt_quant.py").decode()
        assert (raising in source) is not runs_on.contains(release, prereleases=True), release
    standin = (Path(__file__).resolve().parents[4] / "molecule" / "resources" / "standin_server"
               / "sglang_standin_gpu.py").read_text()
    assert "NotImplementedError: %s" % raising in standin

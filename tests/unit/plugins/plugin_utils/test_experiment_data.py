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
                        "env": {"NCCL_MIN_NCHANNELS": "8"}, "flags": {"--cuda-graph-max-bs": 128}}
    assert data.tuning_settings(["nccl_min_nchannels_8"], off=["nccl_min_nchannels_8"])["names"] == []
    assert data.tuning_settings(None) == {"names": [], "env": {}, "flags": {}}


def test_an_unknown_option_is_refused_naming_the_known_ones():
    with pytest.raises(data.ExperimentDataError, match="sglang_service_tuning names nccl_fast, which data/experiments.yml "
                                                       "does not define; known tuning options: cuda_graph_max_bs_128"):
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

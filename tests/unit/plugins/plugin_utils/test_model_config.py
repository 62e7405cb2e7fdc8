# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vocabulary size the smoke test's token-id prompts are bounded by, read from config.json."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.filter.launch_profile import FilterModule
from ansible_collections.sm120.sglang.plugins.plugin_utils import model_config
from ansible_collections.sm120.sglang.plugins.plugin_utils.model_config import ModelConfigError, vocab_size
from ansible.errors import AnsibleFilterError


def test_a_text_model_names_its_vocabulary_at_the_top():
    # GLM-5-NVFP4's config.json, the keys that matter here.
    assert vocab_size({"architectures": ["GlmMoeDsaForCausalLM"], "vocab_size": 154880}) == 154880


def test_a_multimodal_checkpoint_names_it_under_text_config():
    assert vocab_size({"architectures": ["Qwen3VLForConditionalGeneration"],
                       "text_config": {"vocab_size": 151936}, "vision_config": {}}) == 151936


def test_a_config_without_one_gives_none():
    assert vocab_size({"architectures": ["Whatever"]}) is None


@pytest.mark.parametrize("value", ["32000", 0, -5, True, 3.5, None])
def test_a_damaged_value_is_refused_naming_the_file(value):
    with pytest.raises(ModelConfigError, match=r"/m/config.json has vocab_size .* fetch it again"):
        vocab_size({"vocab_size": value}, "/m/config.json")


def test_something_that_is_no_json_object_is_refused():
    with pytest.raises(ModelConfigError, match="is not a JSON object"):
        vocab_size(["vocab_size", 5])


def test_the_filter_refuses_as_ansible_does():
    flt = FilterModule().filters()["sglang_service_vocab_size"]
    assert flt({"vocab_size": 32000}) == 32000
    with pytest.raises(AnsibleFilterError, match="x.json has vocab_size"):
        flt({"vocab_size": "many"}, "x.json")


# ------------------------------------------------------------------ the MTP layer

GLM5 = {"architectures": ["GlmMoeDsaForCausalLM"], "num_hidden_layers": 78, "num_nextn_predict_layers": 1}


def index_with(*names):
    return {"metadata": {}, "weight_map": {name: "model-00080-of-00080.safetensors" for name in names}}


MTP_LAYER = ["model.layers.78.eh_proj.weight", "model.layers.78.enorm.weight", "model.layers.78.hnorm.weight",
             "model.layers.78.shared_head.norm.weight", "model.layers.78.mlp.experts.0.down_proj.weight"]


def test_a_checkpoint_with_its_mtp_layer_can_serve_speculative_decoding():
    index = index_with("model.layers.77.self_attn.q_a_proj.weight", *MTP_LAYER)
    assert model_config.mtp_layer_problem(GLM5, index, "/m/glm-5") == ""


def test_the_config_naming_the_layer_whose_weights_were_dropped_is_refused_naming_them():
    # lukealonso/GLM-5-NVFP4: config.json keeps num_nextn_predict_layers 1, the weights stop at layer 77.
    index = index_with("model.layers.77.self_attn.q_a_proj.weight", "lm_head.weight")
    assert model_config.mtp_layer_problem(GLM5, index, "/m/glm-5") == (
        "/m/glm-5 has no weights of its MTP layer (model.layers.78.{eh_proj,enorm,hnorm,shared_head.norm} in its "
        "weight index): the config names the layer but the checkpoint dropped it; take speculative decoding (the MTP "
        "options) out of sglang_service_tuning, or serve a checkpoint that holds the MTP layer (sglang_service_profile: "
        "glm-5-nvfp4-mtp, festr2/GLM-5-NVFP4-MTP); without it the largest measured gain on these hosts is forgone "
        "(1,010 -> 1,425 output tok/s at c64 with MTP)")


def test_a_layer_78_without_the_heads_own_weights_is_not_an_mtp_layer():
    index = index_with("model.layers.78.eh_proj.weight", "model.layers.78.mlp.gate.weight")
    assert "model.layers.78.{enorm,hnorm,shared_head.norm}" in model_config.mtp_layer_problem(GLM5, index, "/m")


@pytest.mark.parametrize("config, index, words", [
    (dict(GLM5, num_nextn_predict_layers=0), index_with(*MTP_LAYER),
     "has num_nextn_predict_layers 0 in its config.json; SGLang's MTP needs exactly 1"),
    ({"num_hidden_layers": 78}, index_with(*MTP_LAYER), "num_nextn_predict_layers None"),
    (GLM5, None, "has no model.safetensors.index.json with a weight_map"),
    (GLM5, {"metadata": {}}, "has no model.safetensors.index.json with a weight_map"),
    (dict(GLM5, num_hidden_layers="78"), index_with(*MTP_LAYER), "has num_hidden_layers '78'"),
    (None, None, "has no readable config.json"),
])
def test_what_cannot_be_told_or_is_missing_is_named(config, index, words):
    assert words in model_config.mtp_layer_problem(config, index, "/m/glm-5")


def test_a_multimodal_config_keeps_the_layers_under_text_config():
    config = {"architectures": ["X"], "text_config": {"num_hidden_layers": 2, "num_nextn_predict_layers": 1}}
    names = [name.replace("78", "2") for name in MTP_LAYER]
    assert model_config.mtp_layer_problem(config, index_with(*names), "/m") == ""

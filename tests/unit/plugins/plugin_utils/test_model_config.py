# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vocabulary size the smoke test's token-id prompts are bounded by, read from config.json."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.filter.launch_profile import FilterModule
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

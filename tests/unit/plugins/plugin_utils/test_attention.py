# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The refusal of a GLM-5 launch whose attention SM120 cannot run: the message names the backend, the release and the
fix; a launch SM120 runs, and a model that is not a DSA model, pass. (What each release resolves is proven on the
releases' own code in tests/unit/tooling/test_launch_resolution.py.)"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.filter.launch_profile import FilterModule
from ansible_collections.sm120.sglang.plugins.plugin_utils import attention, sglang_releases

DATA = sglang_releases.load()
GLM5 = "GlmMoeDsaForCausalLM"
FILTER = FilterModule().filters()["sglang_service_attention_problems"]


def test_bf16_kv_with_no_attention_backend_is_refused_on_0_5_23_naming_backends_release_and_fix():
    [message] = attention.problems({"--kv-cache-dtype": "bf16"}, DATA, "0.5.23", GLM5)
    assert "SGLang 0.5.23" in message
    assert "prefill flashmla_sparse does not run on SM120" in message
    assert "decode trtllm does not run on SM120" in message
    assert "--attention-backend triton or flashinfer" in message
    assert "fp8_e4m3 with flashinfer_sparse_mla" in message


@pytest.mark.parametrize("flags", [
    {"--kv-cache-dtype": "bf16", "--attention-backend": "triton"},
    {"--kv-cache-dtype": "bf16", "--attention-backend": "flashinfer"},
    {"--kv-cache-dtype": "fp8_e4m3"},
    {},
])
def test_pairings_sm120_runs_pass_on_0_5_23(flags):
    assert attention.problems(flags, DATA, "0.5.23", GLM5) == []


def test_the_fp8_pairing_is_refused_before_flashinfer_sparse_mla_exists():
    [message] = attention.problems({"--kv-cache-dtype": "fp8_e4m3"}, DATA, "0.5.16", GLM5)
    assert "trtllm does not run on SM120" in message and "SGLang 0.5.16" in message


def test_a_dsa_backend_named_that_sm120_lacks_is_refused_and_one_not_in_the_table_too():
    [lacks] = attention.problems({"--kv-cache-dtype": "fp8_e4m3", "--dsa-decode-backend": "flashmla_kv"}, DATA,
                                 "0.5.23", GLM5)
    assert "decode flashmla_kv does not run on SM120" in lacks and "prefill" not in lacks.split("; ")[1]
    [unknown] = attention.problems({"--kv-cache-dtype": "fp8_e4m3", "--dsa-decode-backend": "tilelang"}, DATA,
                                   "0.5.23", GLM5)
    assert "tilelang is not in the attention_backends table" in unknown


def test_a_sparse_backend_on_the_wrong_kv_cache_or_phase_is_refused():
    [dtype] = attention.problems({"--kv-cache-dtype": "bf16", "--dsa-prefill-backend": "flashinfer_sparse_mla",
                                  "--dsa-decode-backend": "flashinfer_sparse_mla"}, DATA, "0.5.23", GLM5)
    assert "takes a fp8_e4m3 KV cache only" in dtype
    [phase] = attention.problems({"--kv-cache-dtype": "fp8_e4m3", "--dsa-decode-backend": "triton_sparse_mla"},
                                 DATA, "0.5.23", GLM5)
    assert "decode triton_sparse_mla is a prefill backend only" in phase


def test_a_model_that_is_not_a_dsa_model_is_not_judged():
    assert attention.problems({"--kv-cache-dtype": "bf16"}, DATA, "0.5.23", "LlamaForCausalLM") == []


def test_a_kv_cache_dtype_a_dsa_model_does_not_take_is_refused_by_name():
    with pytest.raises(attention.AttentionError, match="--kv-cache-dtype fp8_e5m2"):
        attention.resolve({"--kv-cache-dtype": "fp8_e5m2"}, DATA, "0.5.23")


def test_a_release_without_a_dsa_attention_entry_is_named():
    with pytest.raises(attention.AttentionError, match="0 entries for SGLang 0.5.8"):
        attention.resolve({}, DATA, "0.5.8")


def test_the_filter_answers_as_the_function_and_defaults_to_the_collection_s_release():
    flags = {"--kv-cache-dtype": "bf16"}
    assert FILTER(flags, {"architecture": GLM5, "version": "0.5.23"}) == attention.problems(flags, DATA, "0.5.23", GLM5)
    assert "SGLang %s" % sglang_releases.default_version(DATA) in FILTER(flags, {"architecture": GLM5})[0]
    with pytest.raises(AnsibleFilterError, match="sglang_service_attention_problems"):
        FILTER(flags, {"architecture": GLM5, "release": "0.5.23"})
    with pytest.raises(AnsibleFilterError, match="0.5.99 is not in the release data"):
        FILTER(flags, {"architecture": GLM5, "version": "0.5.99"})

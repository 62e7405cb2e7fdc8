# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/real_gpu/glm5_arch.py, before device minutes are spent on it (here, beside the tests of the tooling whose
parser reader it uses): the scaled-down GLM-5 keeps every key of
GLM-5's config but the ones it says it scales, each start's command line is one SGLang 0.5.16's own parser takes
(the release the harness carries), and the start-up timeline is read from SGLang's log lines as they are written."""

from __future__ import annotations

import datetime
import importlib.util
import pathlib
import re
import sys

import pytest

from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import sglang_wheel
from ansible_collections.sm120.sglang.tooling.server_flag_problems import flag_problems
from ansible_collections.sm120.sglang.tooling.server_flags import read_server_flags

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "real_gpu" / "glm5_arch.py"  # beside the harness
sys.path.insert(0, str(SCRIPT.parent))
spec = importlib.util.spec_from_file_location("glm5_arch", SCRIPT)
glm5_arch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(glm5_arch)


def test_the_scaled_model_keeps_glm5s_structure_and_scales_only_its_size():
    made = glm5_arch.config()
    assert made["architectures"] == ["GlmMoeDsaForCausalLM"] and made["model_type"] == "glm_moe_dsa"
    changed = {key for key in glm5_arch.GLM5 if made[key] != glm5_arch.GLM5[key]}
    assert changed == {"num_hidden_layers", "n_routed_experts"}
    # GLM-5's attention and routing as its checkpoint has them: MLA (kv_lora 512, rope 64, nope 192, v 256), DSA's
    # indexer (32 heads of 128, top 2,048), 8 of the routed experts a token with sigmoid scores, one NextN layer, and
    # the three dense layers first, which 6 layers keep with 3 MoE layers after them.
    assert (made["kv_lora_rank"], made["qk_rope_head_dim"], made["qk_nope_head_dim"], made["v_head_dim"]) == (
        512, 64, 192, 256)
    assert (made["index_n_heads"], made["index_head_dim"], made["index_topk"]) == (32, 128, 2048)
    assert (made["num_experts_per_tok"], made["scoring_func"], made["num_nextn_predict_layers"]) == (8, "sigmoid", 1)
    assert made["first_k_dense_replace"] == 3 < made["num_hidden_layers"] == 6


def as_arguments(argv):
    """flag -> value of a command line (a flag followed by another flag, or last, is a switch)."""
    arguments, index = {}, 0
    while index < len(argv):
        flag = argv[index]
        if index + 1 < len(argv) and not argv[index + 1].startswith("--"):
            arguments[flag], index = argv[index + 1], index + 2
        else:
            arguments[flag], index = True, index + 1
    return arguments


# The start that records SGLang 0.5.16's own refusal: flashinfer_sparse_mla joins the DSA backends in 0.5.17.
REFUSED_BY_0_5_16 = {"fp8_sparse_mla": "flashinfer_sparse_mla"}


def _problems_0_5_16(start):
    archive = sglang_wheel("0.5.16")
    names = set(archive.namelist())
    parser = read_server_flags(lambda path: archive.read(path).decode() if path in names else None)
    arguments = as_arguments(["--model-path", "/m", "--port", "30010"] + glm5_arch.PROFILE_FLAGS
                             + glm5_arch.STARTS[start])
    return flag_problems(parser, arguments)


@pytest.mark.parametrize("start", sorted(set(glm5_arch.STARTS) - set(REFUSED_BY_0_5_16)))
def test_every_start_is_a_command_line_sglang_0_5_16_takes(start):
    assert _problems_0_5_16(start) == []


@pytest.mark.parametrize("start", sorted(REFUSED_BY_0_5_16))
def test_the_start_of_a_later_release_s_backend_is_one_0_5_16_s_parser_refuses(start):
    problems = _problems_0_5_16(start)
    assert problems and all(REFUSED_BY_0_5_16[start] in problem for problem in problems)


def test_the_timeline_is_read_from_sglangs_log_lines_and_a_second_load_is_the_drafts():
    # SGLang 0.5.16's own lines, from the mtp_3_4 start on the H100
    # (docs/evidence/real-sglang-glm5-arch-h100-2026-12-06/probe/logs/mtp_3_4.log), shortened after the figures.
    started = datetime.datetime(2026, 12, 6, 2, 29, 50).timestamp()
    log = "\n".join([
        "[2026-12-06 02:30:06] Load weight begin. avail mem=78.47 GB",
        "[2026-12-06 02:30:07] Load weight end. elapsed=0.08 s, type=GlmMoeDsaForCausalLM, avail mem=67.43 GB",
        "[2026-12-06 02:30:07] Load weight begin. avail mem=67.43 GB",
        "[2026-12-06 02:30:07] Load weight end. elapsed=0.01 s, type=GlmMoeDsaForCausalLMNextN, avail mem=64.05 GB",
        "[2026-12-06 02:30:07] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 6102400, KV size: 43.78 GB",
        "[2026-12-06 02:30:07] Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4",
        "[2026-12-06 02:30:12] Capture target verify CUDA graph end. elapsed=4.41 s, mem usage=0.21 GB",
        "[2026-12-06 02:30:12] Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1",
        "[2026-12-06 02:30:20] Capture draft decode CUDA graph end. elapsed=8.28 s, mem usage=0.13 GB",
        "a line without a stamp: Load weight end",
        "[2026-12-06 02:30:32] The server is fired up and ready to roll!",
    ])
    assert glm5_arch.timeline(log, started) == {
        "weights_begin": 16.0, "weights_end": 17.0, "weights_begin_2": 17.0, "weights_end_2": 17.0,
        "kv_cache": 17.0, "graphs_begin": 17.0, "graphs_end": 22.0, "graph_target_verify_s": 4.41,
        "graphs_begin_2": 22.0, "graphs_end_2": 30.0, "graph_draft_decode_s": 8.28, "ready": 42.0}


def test_the_weight_index_names_the_nextn_layer_the_collection_s_mtp_check_looks_for():
    from ansible_collections.sm120.sglang.plugins.plugin_utils.model_config import mtp_layer_problem

    made = glm5_arch.config()
    index = glm5_arch.weight_index(made)
    assert mtp_layer_problem(made, index, "/m") == ""
    # Without the index, or for a config whose layers it does not name, the check refuses speculative decoding.
    assert "no model.safetensors.index.json" in mtp_layer_problem(made, None, "/m")
    assert "no weights of its MTP layer" in mtp_layer_problem(dict(made, num_hidden_layers=7), index, "/m")


def excluded(name, patterns):
    """SGLang 0.5.16's rule for a ModelOpt ``ignore`` pattern (modelopt_quant.py is_layer_excluded): a glob, "*" any
    characters, matched against the whole module name."""
    return any(re.fullmatch(pattern.replace(".", r"\.").replace("*", ".*"), name) for pattern in patterns)


def test_the_nvfp4_config_quantizes_the_routed_experts_alone():
    made = glm5_arch.config(nvfp4=True)
    assert {key for key in made if made[key] != glm5_arch.config().get(key)} == {"quantization_config"}
    quantization = made["quantization_config"]
    assert (quantization["quant_method"], quantization["quant_algo"], quantization["group_size"]) == (
        "modelopt", "NVFP4", 16)
    ignore = quantization["ignore"]
    # SGLang's module names for this architecture (models/deepseek_v2.py, deepseek_nextn.py: the NextN layer is
    # model.decoder): the MoE layers' routed experts are quantized, every other module stays BF16.
    for name in ("model.layers.3.mlp.experts", "model.layers.5.mlp.experts", "model.decoder.mlp.experts"):
        assert not excluded(name, ignore), name
    for name in ("lm_head", "model.embed_tokens", "model.layers.3.self_attn.fused_qkv_a_proj_with_mqa",
                 "model.layers.4.self_attn.indexer.wq_b", "model.layers.0.mlp.gate_up_proj",
                 "model.layers.2.mlp.down_proj", "model.layers.3.mlp.gate",
                 "model.layers.3.mlp.shared_experts.gate_up_proj", "model.decoder.self_attn.o_proj", "model.eh_proj"):
        assert excluded(name, ignore), name


def test_the_nvfp4_start_serves_the_nvfp4_model(tmp_path):
    model = tmp_path / "glm-5-arch"
    assert glm5_arch.model_of("nvfp4", model) == tmp_path / "glm-5-arch-nvfp4"
    assert glm5_arch.model_of("base", model) == model


def test_a_start_waited_for_is_sampled_for_the_gpu_and_the_compilers_beside_it(monkeypatch):
    """The nvfp4 start took no capture step in 200 s: the record says whether the GPU worked or a compiler ran."""
    outputs = {"ps": "python3\nnvcc\ncicc\nbash\n", "nvidia-smi": "3, 71.5, 66000\n"}
    monkeypatch.setattr(glm5_arch, "_output", lambda argv: outputs[argv[0]])

    class Running:
        returncode = None

        @staticmethod
        def poll():
            return None

    samples = []
    # Port 9 (discard) answers nothing: the start is never healthy within the limit of one second.
    assert glm5_arch.wait_ready("http://127.0.0.1:9", Running, 1, samples) == "not healthy within 1 s"
    assert samples == [{"util_pct": "3", "power_w": "71.5", "memory_mib": "66000", "t_s": 0,
                        "compilers": ["cicc", "nvcc"]}]
    monkeypatch.setattr(glm5_arch, "_output", lambda argv: "")
    assert glm5_arch.gpu_now() == {} and glm5_arch.compilers_running() == []

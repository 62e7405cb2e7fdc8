# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The production profile's memory on one RTX PRO 6000, from GLM-5's config: the arithmetic by hand beside the
function's, and the fits that fail naming what to change."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.plugin_utils import memory_fit

ROOT = pathlib.Path(__file__).resolve().parents[4]
PROFILE = yaml.safe_load((ROOT / "roles" / "sglang_service" / "vars" / "profiles.yml").read_text())[
    "__sglang_service_builtin_profiles"]["glm-5-nvfp4"]
# zai-org/GLM-5's config.json, the keys the fit reads (benchmarks/real_gpu/glm5_arch.py GLM5).
GLM5 = {"num_hidden_layers": 78, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_head_dim": 128}
# One RTX PRO 6000 Blackwell Server Edition: 97,887 MiB (tests/unit/plugins/module_utils/fixtures/gpu/
# rtx-pro-6000-server-x8); the checkpoint lukealonso/GLM-5-NVFP4, about 410 GB; the headroom rtx6kpro's hosts ran
# with at --mem-fraction-static 0.92 (7.43-7.53 GB free, ../shared/research/glm5-sm120-2026-12.md 1.3).
GPU = 97887 * 1024 ** 2
CHECKPOINT = 410e9
RESERVE = 7.43e9


def _fit(**changes):
    values = dict(config=GLM5, checkpoint_bytes=CHECKPOINT, tp_size=PROFILE["tp_size"], gpu_bytes=GPU,
                  mem_fraction_static=PROFILE["mem_fraction_static"], loads=PROFILE["loads"],
                  kv_cache_dtype=PROFILE["kv_cache_dtype"], graph_bound=PROFILE["arguments"]["--cuda-graph-max-bs"],
                  reserve_bytes=RESERVE)
    values.update(changes)
    return memory_fit.fit(**values)


def test_the_production_profile_fits_an_rtx_pro_6000_with_the_arithmetic_by_hand():
    result = _fit()
    # bf16: 78 layers x (2 x (512 + 64) latent + 128 + 4 indexer) bytes = 100,152 bytes a token.
    assert result["kv_per_token"] == 78 * (2 * 576 + 132) == 100152
    # The high load holds 64 x (1,024 + 256) tokens at once.
    assert result["tokens"] == 64 * 1280
    assert result["weights"] == pytest.approx(51.25e9)
    assert result["kv_room"] == pytest.approx(0.85 * GPU - 51.25e9)
    assert result["kv_room"] > result["kv_needed"] and result["left"] > RESERVE
    assert result["problems"] == []


def test_an_fp8_cache_takes_flashmla_s_656_bytes_a_layer_and_the_indexer_s_key():
    assert memory_fit.kv_bytes_per_token(GLM5, "fp8_e4m3") == 78 * (512 + 16 + 128 + 132)


def test_the_old_fraction_without_a_graph_bound_is_refused_naming_both():
    problems = _fit(mem_fraction_static=0.95, graph_bound=None)["problems"]
    assert any("0.95 leaves 4.8 GiB" in problem and "lower --mem-fraction-static" in problem for problem in problems)
    assert any("no --cuda-graph-max-bs" in problem and "sglang#29580" in problem for problem in problems)


def test_weights_that_leave_no_room_for_the_loads_kv_are_refused():
    [problem] = _fit(tp_size=4)["problems"]
    assert "do not fit in --mem-fraction-static 0.85" in problem


def test_a_config_without_the_mla_keys_is_named():
    with pytest.raises(memory_fit.FitError, match="kv_lora_rank"):
        memory_fit.kv_bytes_per_token({"num_hidden_layers": 78}, "bf16")

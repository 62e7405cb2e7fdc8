# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Does a GLM-5 launch fit one GPU: weights + the KV cache its loads need within --mem-fraction-static, and room left.

SGLang holds ``mem_fraction_static`` of each GPU for the weights and the KV pool; the rest is for activations, the
CUDA graphs and NCCL's buffers. GLM-5's MLA keeps one latent KV entry a token and layer that every TP rank holds
whole (kv_lora_rank + qk_rope_head_dim values), and DSA's indexer one FP8 key (index_head_dim bytes and a 4-byte
scale) beside it. The FP8 cache's entry is FlashMLA's layout: the latent in FP8 with one 4-byte scale per 128
values, the rope part in bf16. Pure: the checkpoint's config.json and the launch's numbers in, the arithmetic out.
"""

from __future__ import annotations

GIB = 1024 ** 3
# Bytes a token and layer of GLM-5's KV cache per GPU, by dtype (see the module docstring).
_ENTRY = {
    "bfloat16": lambda c: 2 * (c["kv_lora_rank"] + c["qk_rope_head_dim"]),
    "fp8_e4m3": lambda c: c["kv_lora_rank"] + 4 * (c["kv_lora_rank"] // 128) + 2 * c["qk_rope_head_dim"],
}
_SPELLING = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp8_e4m3": "fp8_e4m3", "auto": "fp8_e4m3"}


def gib(value):
    return "%.1f GiB" % (value / GIB)


class FitError(Exception):
    """The inputs cannot be fitted; the message names the one missing."""


def kv_bytes_per_token(config, kv_cache_dtype):
    """One token's KV cache on one GPU, every layer, with the DSA indexer's key."""
    dtype = _SPELLING.get(str(kv_cache_dtype))
    if dtype is None:
        raise FitError("kv_cache_dtype %s: GLM-5 takes bf16, fp8_e4m3 or auto" % kv_cache_dtype)
    try:
        per_layer = _ENTRY[dtype](config) + config.get("index_head_dim", 0) + (4 if config.get("index_head_dim") else 0)
        return config["num_hidden_layers"] * per_layer
    except KeyError as missing:
        raise FitError("the checkpoint's config.json has no %s" % missing)


def fit(config, checkpoint_bytes, tp_size, gpu_bytes, mem_fraction_static, loads, kv_cache_dtype, graph_bound,
        reserve_bytes):
    """The fit on one GPU: ``{weights, kv_per_token, kv_needed, static, kv_room, tokens, left, problems}`` (bytes).

    ``loads`` are the profile's (each concurrency x (input + output) tokens at once); ``graph_bound`` the decode
    CUDA-graph bound (None: SGLang's own); ``reserve_bytes`` what must stay outside the static pool.
    """
    weights = checkpoint_bytes / tp_size
    per_token = kv_bytes_per_token(config, kv_cache_dtype)
    tokens = max(int(load["concurrency"]) * (int(load["input_tokens"]) + int(load["output_tokens"]))
                 for load in loads.values())
    static = mem_fraction_static * gpu_bytes
    kv_room = static - weights
    left = gpu_bytes - static
    result = {"weights": weights, "kv_per_token": per_token, "tokens": tokens, "kv_needed": tokens * per_token,
              "static": static, "kv_room": kv_room, "left": left, "problems": []}
    if kv_room < result["kv_needed"]:
        result["problems"].append(
            "the weights (%s a GPU) and the KV cache the loads need (%d tokens x %d bytes = %s) do not fit in "
            "--mem-fraction-static %.2f of %s (%s): raise it, lower the loads, or use more GPUs"
            % (gib(weights), tokens, per_token, gib(result["kv_needed"]), mem_fraction_static, gib(gpu_bytes),
               gib(static)))
    if left < reserve_bytes:
        result["problems"].append(
            "%.2f leaves %s a GPU for activations and CUDA graphs, less than the %s these cards were run with: "
            "lower --mem-fraction-static" % (mem_fraction_static, gib(left), gib(reserve_bytes)))
    if graph_bound is None:
        result["problems"].append(
            "no --cuda-graph-max-bs: SGLang captures decode graphs up to 512 on 96 GB cards at TP >= 4, which ran "
            "out of memory at capture on RTX PRO 6000 (sglang#29580); bound it at the highest load")
    return result

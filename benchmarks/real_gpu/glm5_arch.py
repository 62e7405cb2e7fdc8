# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GLM-5's architecture on the lent GPU: a scaled-down GlmMoeDsaForCausalLM of random weights, started by SGLang.

The weights of GLM-5-NVFP4 (about 410 GB) cannot come to the device host and its NVFP4 kernels need SM100/SM120,
but SGLang serves a model from its config.json alone with ``--load-format dummy`` (random weights). So ``make``
writes a config.json that keeps every structural key of GLM-5's (``GlmMoeDsaForCausalLM``: MLA attention with
DeepSeek sparse attention (DSA) and its indexer, a MoE of routed and shared experts with sigmoid routing and
``noaux_tc``, three dense layers first, one MTP (NextN) layer) at GLM-5's own head sizes, which the attention
kernels are built for, and scales down only what sets the model's size (SCALED: layers, routed experts, vocabulary).
Its tokenizer is make_model.py's BPE.

``probe`` starts SGLang on it once per named start (STARTS: the production profile's flags with the exceptions
the GPU or the carried packages force, then MTP, then MoE runners), each as its own process: the start-up
timeline read from SGLang's log (weights, KV cache, CUDA graphs, ready), /server_info (the running-request bound,
the draft's accept length), the smoke test's own measurement (run_benchmark) at the profile's two loads scaled to
fewer requests, or the error that ended the start (the log's last lines). One JSON line a start to --out.

    python3 glm5_arch.py make OUT_DIR
    python3 glm5_arch.py probe --model OUT_DIR --out results/glm5.jsonl --logs results/glm5 [--starts base,mtp_3_4]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# GLM-5 (zai-org/GLM-5, the base of lukealonso/GLM-5-NVFP4): transformers 5.12.1's GlmMoeDsaConfig defaults, which
# its docstring ties to that checkpoint, and the checkpoint keys SGLang reads beyond them (num_nextn_predict_layers,
# scoring_func, topk_method; tests/unit/plugins/plugin_utils/test_model_config.py has 78 layers and 1 NextN layer).
GLM5 = {
    "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "torch_dtype": "bfloat16",
    "vocab_size": 154880, "hidden_size": 6144, "intermediate_size": 12288, "moe_intermediate_size": 2048,
    "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64,
    "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256,
    "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32,
    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "routed_scaling_factor": 2.5,
    "n_group": 1, "topk_group": 1, "norm_topk_prob": True, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
    "first_k_dense_replace": 3, "moe_layer_freq": 1, "num_nextn_predict_layers": 1,
    "hidden_act": "silu", "rms_norm_eps": 1e-05, "max_position_embeddings": 202752, "rope_theta": 1000000,
    "attention_bias": False, "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1,
}
# What is scaled down, and only that: 6 layers keep the 3 dense ones and 3 MoE ones (the real model has 75 MoE
# layers), 32 routed experts of 256 (8 still chosen a token, so a token's work per layer is the real one), the
# tokenizer's 32,000 tokens for 154,880 (the request's token ids must decode). About 6.9 B parameters, 14 GB bf16.
SCALED = {"num_hidden_layers": 6, "n_routed_experts": 32}
# The nvfp4 start's model: the same config with a ModelOpt NVFP4 quantization_config, which SGLang reads from
# config.json (modelopt_quant.py ModelOptFp4Config.from_config: quant_algo, group_size, ``ignore`` as glob patterns
# matched against each module's name). The layout is assumed, the checkpoint's own list not being here: the routed
# experts NVFP4 in groups of 16 (the NextN layer's too: SGLang names it model.decoder), everything else BF16
# (attention and DSA's indexer under self_attn, the dense layers' MLPs, the router, the shared expert, the NextN
# layer's eh_proj, the embedding and the head). The dummy loader fills the BF16 weights and the scales and leaves the
# packed FP4 bytes as allocated: a probe of the kernels and the start, not of the output.
NVFP4_QUANTIZATION = {
    "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": None,
    "ignore": ["lm_head", "model.embed_tokens", "*self_attn*", "model.layers.0.*", "model.layers.1.*",
               "model.layers.2.*", "*mlp.gate", "*shared_experts*", "*eh_proj*"],
}

# The production profile's launch (roles/sglang_service/vars/profiles.yml, glm-5-nvfp4) at TP 1, and what this GPU
# and the carried packages cannot run, each said where it is left out or replaced:
#   --quantization modelopt_fp4   only in the nvfp4 start, on the NVFP4 config (NVFP4_QUANTIZATION): the other
#                                 starts' random weights are BF16 and their config has no quantization_config. Not
#                                 a refusal of the GPU: 0.5.16 serves an NVFP4 MoE on SM80 to SM90 through Marlin
#                                 where the MoE runner is auto (modelopt_quant.py, ModelOptNvFp4FusedMoEMethod, "use
#                                 moe_runner_backend=marlin on SM80+")
#   --tp-size 8                   --tp-size 1: one GPU is lent
#   DSA's decode on SM90          SGLang picks fa3 for a bf16 KV cache on Hopper (arg_groups/overrides.py,
#                                 _dsa_split_backend_resolution), whose library (sgl_kernel/flash_ops, 1.07 GB)
#                                 cannot be carried in 64 MiB: flashmla_sparse (sgl_kernel/flashmla_ops, 14 MB,
#                                 carried) decodes instead, the prefill's own default
PROFILE_FLAGS = ["--kv-cache-dtype", "bf16", "--disable-shared-experts-fusion", "--load-format", "dummy",
                 "--tp-size", "1", "--context-length", "4096", "--enable-metrics",
                 "--dsa-prefill-backend", "flashmla_sparse", "--dsa-decode-backend", "flashmla_sparse"]
# SGLang's environment for every start. DSA prefills a short sequence with dense MHA through FlashAttention 3 on
# SM90 and SM100 only (dsa_backend.py, "SM90/SM100 only", SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD): SM120 never
# takes that path, and FA3's library cannot be carried (above); the first real run died there ("Can not import FA3
# in sgl_kernel", in _forward_standard_mha). A threshold of 0 makes the H100 prefill as SM120 does, through MLA.
PROFILE_ENV = {"SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD": "0"}
# The starts: the profile as above; the knob mtp_nextn of data/experiments.yml, its flags as shipped and
# --max-running-requests left to SGLang; the MoE runners; and fa3's decode, to record its refusal here.
STARTS = {
    "base": [],
    "mtp_1_2": ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", "2"],
    "mtp_3_4": ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", "4"],
    "moe_triton": ["--moe-runner-backend", "triton"],
    "moe_flashinfer_cutlass": ["--moe-runner-backend", "flashinfer_cutlass"],
    "decode_fa3": ["--dsa-decode-backend", "fa3"],
    # The profile's --quantization on the NVFP4 config (make --nvfp4): 0.5.16 runs an NVFP4 MoE below SM100 through
    # Marlin where the MoE runner is auto.
    "nvfp4": ["--quantization", "modelopt_fp4"],
    # The MoE runners the release data names for NVFP4 (item 4 of issue 37): data/sglang_releases.yml moe_runner_sm120
    # (flashinfer_cutlass, which SGLang itself picks on SM120 from 0.5.13) and data/experiments.yml moe_runner_cutlass
    # (sgl-kernel's cutlass_moe_fp4, which the data refuses from 0.5.16), each named on the NVFP4 config.
    "nvfp4_moe_flashinfer_cutlass": ["--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass"],
    "nvfp4_moe_cutlass": ["--quantization", "modelopt_fp4", "--moe-runner-backend", "cutlass"],
    # GLM-5's attention pairings (issue 48): bf16 KV on dense MLA, the production profile's (triton) and the tuning
    # option attention_flashinfer's, which SM90 runs as SM120 does; and SGLang's own SM120 path (FP8 KV on
    # flashinfer_sparse_mla, 0.5.17+), to record what the release says of it on this GPU.
    "bf16_triton": ["--attention-backend", "triton"],
    "bf16_flashinfer": ["--attention-backend", "flashinfer"],
    "fp8_sparse_mla": ["--kv-cache-dtype", "fp8_e4m3", "--dsa-prefill-backend", "flashinfer_sparse_mla",
                       "--dsa-decode-backend", "flashinfer_sparse_mla"],
}
# The starts that serve the NVFP4 config (the directory make --nvfp4 writes, the model's name + NVFP4_SUFFIX).
NVFP4_STARTS = {"nvfp4", "nvfp4_moe_flashinfer_cutlass", "nvfp4_moe_cutlass"}
NVFP4_SUFFIX = "-nvfp4"
# The profile's loads (low: concurrency 4, high: 64; 1,024 tokens in, 256 out) with fewer requests a run.
LOADS = {"low": {"concurrency": 4, "num_requests": 16, "input_tokens": 1024, "output_tokens": 256},
         "high": {"concurrency": 64, "num_requests": 128, "input_tokens": 1024, "output_tokens": 256}}
# What SGLang 0.5.16 logs at each step of a start (the scheduler's lines carry " TP0" in their stamp); its CUDA graph
# lines name the graph ("Capture target decode CUDA graph begin", then the draft's "draft decode", "draft extend").
MARKS = {name: re.compile(pattern, re.I) for name, pattern in {
    "weights_begin": r"Load weight begin",
    "weights_end": r"Load weight end",
    "kv_cache": r"KV Cache is allocated",
    "graphs_begin": r"Capture (\w+ )*CUDA graph begin",
    "graphs_end": r"Capture (\w+ )*CUDA graph end",
    "ready": r"The server is fired up and ready to roll",
}.items()}
GRAPH_END = re.compile(r"Capture ((?:\w+ )*)CUDA graph end\. elapsed=([\d.]+) s")
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\] (.*)$")
# The weights' index make writes beside the config. The dummy loader reads no file, but the collection checks a
# checkpoint for its MTP layer before a speculative restart (plugin_utils/model_config.py mtp_layer_problem reads the
# index's weight_map for model.layers.<num_hidden_layers>.{eh_proj,enorm,hnorm,shared_head.norm}): the index names
# that layer's weights, which the dummy loader does create, so that the check sees the layer the served model has.
# The names are those of GLM-5's checkpoint for its NextN layer; the file they point to is not there and not read.
NEXTN_WEIGHTS = ("eh_proj.weight", "enorm.weight", "hnorm.weight", "shared_head.norm.weight")
INDEX_FILE = "model-dummy.safetensors"


def config(nvfp4=False):
    """GLM5 with SCALED applied (and NVFP4_QUANTIZATION where nvfp4), the tokenizer's vocabulary set by make."""
    return dict(GLM5, **SCALED, **({"quantization_config": NVFP4_QUANTIZATION} if nvfp4 else {}))


def weight_index(made):
    """model.safetensors.index.json for a config: the NextN layer's weights (see NEXTN_WEIGHTS)."""
    layer = "model.layers.%d." % made["num_hidden_layers"]
    return {"metadata": {"note": "names the NextN layer for the collection's MTP check; --load-format dummy reads "
                                 "no weights"},
            "weight_map": {layer + name: INDEX_FILE for name in NEXTN_WEIGHTS}}


def model_of(start, model):
    """The model directory a start serves: the NVFP4 config's for NVFP4_STARTS."""
    return model.with_name(model.name + NVFP4_SUFFIX) if start in NVFP4_STARTS else model


def make(out, nvfp4=False):
    from make_model import make_tokenizer

    if (out / "config.json").exists():
        return {"model": str(out), "made": False}
    partial = out.with_name(out.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tokenizer(partial, 32000)
    made = dict(config(nvfp4), vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id)
    (partial / "config.json").write_text(json.dumps(made, indent=1) + "\n")
    (partial / "model.safetensors.index.json").write_text(json.dumps(weight_index(made), indent=1) + "\n")
    for path in [partial, *partial.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.replace(partial, out)
    return {"model": str(out), "made": True, "config": made}


def timeline(log_text, started):
    """Seconds from the process's start to the first line of each MARK (and where each was seen twice, the second:
    a speculative start loads the draft's weights and KV cache too), and each CUDA graph's capture as SGLang timed it
    (``graph_<name>_s``: the target's decode or verify graph, the draft's decode and extend)."""
    import datetime

    found = {}
    for line in log_text.splitlines():
        match = STAMP.match(line)
        if not match:
            continue
        at = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
        for name, mark in MARKS.items():
            if mark.search(match.group(2)):
                key = name if name not in found else name + "_2"
                if key not in found:
                    found[key] = round(at - started, 1)
        graph = GRAPH_END.search(match.group(2))
        if graph:
            found["graph_%s_s" % graph.group(1).strip().replace(" ", "_")] = float(graph.group(2))
    return found


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read()


# What a start that is slow to answer is doing, sampled while it is waited for: the GPU's utilisation and power
# (busy at the GPU, or underfed) and the compilers running beside the server (a kernel built just in time on the
# host: the nvfp4 start's first decode graph took no step in 200 s on 2026-12-06).
COMPILERS = ("nvcc", "cicc", "ptxas", "fatbinary", "nvlink", "gcc", "g++", "c++", "cc1plus", "ninja", "ld")
SAMPLE_EVERY_S = 20


def _output(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def compilers_running():
    return sorted({name for name in _output(["ps", "-eo", "comm="]).split() if name in COMPILERS})


def gpu_now():
    """The first GPU's utilisation (%), power (W) and memory used (MiB), {} where nvidia-smi does not answer."""
    lines = _output(["nvidia-smi", "--query-gpu=utilization.gpu,power.draw,memory.used",
                     "--format=csv,noheader,nounits"]).splitlines()
    return dict(zip(("util_pct", "power_w", "memory_mib"), (field.strip() for field in lines[0].split(",")))) \
        if lines else {}


def wait_ready(url, process, limit, samples=None):
    began = time.monotonic()
    sampled = -SAMPLE_EVERY_S
    while time.monotonic() - began < limit:
        if process.poll() is not None:
            return "exited with %d" % process.returncode
        try:
            if get(url + "/health", timeout=10)[0] == 200:
                return None
        except (OSError, urllib.error.URLError):
            pass
        elapsed = time.monotonic() - began
        if samples is not None and elapsed - sampled >= SAMPLE_EVERY_S:
            sampled = elapsed
            samples.append(dict(gpu_now(), t_s=round(elapsed), compilers=compilers_running()))
        time.sleep(2)
    return "not healthy within %d s" % limit


def measure(url, model, vocab_size):
    from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark import BenchmarkPlan, run_benchmark

    rows = {}
    for name, load in LOADS.items():
        plan = BenchmarkPlan(url=url, model=model, concurrency=load["concurrency"], num_requests=load["num_requests"],
                             num_warmup=4, input_tokens=load["input_tokens"], output_tokens=load["output_tokens"],
                             timeout=300, vocab_size=vocab_size)
        try:
            result = run_benchmark(plan)
        except Exception as exc:  # the start's record keeps what the run said
            rows[name] = {"error": str(exc)[-800:]}
            continue
        rows[name] = {key: result.get(key) for key in (
            "output_tokens_per_s", "duration_s", "failed_requests", "ttft_ms", "itl_ms", "accept_length",
            "max_running_requests")}
    return rows


def parity(url, model):
    """The smoke test's parity prompts (roles/smoke_test/defaults/main.yml) at temperature 0 with the two most likely
    tokens at each step: where two starts' texts part, the baseline's margin between its top two says whether the
    greedy choice was a near-tie (the order of a kernel's sums decides it) or a confident token another start lost."""
    import yaml

    defaults = yaml.safe_load((Path(__file__).resolve().parents[2] / "roles" / "smoke_test" / "defaults" /
                               "main.yml").read_text())
    answers = []
    for prompt in defaults["smoke_test_parity_prompts"]:
        body = json.dumps({"model": model, "prompt": prompt, "temperature": 0, "logprobs": 2,
                           "max_tokens": int(defaults["smoke_test_parity_max_tokens"])}).encode()
        request = urllib.request.Request(url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                choice = json.loads(response.read())["choices"][0]
            answers.append({"text": choice.get("text"), "logprobs": choice.get("logprobs")})
        except (OSError, ValueError, KeyError, IndexError) as exc:
            answers.append({"error": str(exc)})
    return answers


def stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    # The scheduler and detokenizer are children; a start that died may leave them holding the GPU.
    subprocess.run(["pkill", "-9", "-f", "sglang.launch_server"], check=False)
    time.sleep(3)


def probe_one(name, model, port, logs, limit):
    url = "http://127.0.0.1:%d" % port
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--served-model-name",
            "glm-5", "--host", "127.0.0.1", "--port", str(port)] + PROFILE_FLAGS + STARTS[name]
    log_path = logs / (name + ".log")
    started = time.time()
    with open(log_path, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                   env=dict(os.environ, **PROFILE_ENV))
    record = {"start": name, "argv": argv[3:], "env": PROFILE_ENV, "began": started, "waiting": []}
    try:
        problem = wait_ready(url, process, limit, record["waiting"])
        record["up_s"] = round(time.time() - started, 1)
        if problem:
            record["error"] = problem
        else:
            vocab = json.loads((model / "config.json").read_text())["vocab_size"]
            record["loads"] = measure(url, "glm-5", vocab)
            record["parity"] = parity(url, "glm-5")
            try:
                info = json.loads(get(url + "/server_info", timeout=10)[1])
                record["max_running_requests"] = info.get("max_running_requests")
                states = info.get("internal_states") or []
                record["accept_length"] = [s.get("avg_spec_accept_length") for s in states if isinstance(s, dict)]
                record["server_args"] = {key: info.get(key) for key in (
                    "attention_backend", "dsa_prefill_backend", "dsa_decode_backend", "moe_runner_backend",
                    "page_size", "cuda_graph_max_bs", "speculative_algorithm", "speculative_num_steps",
                    "speculative_num_draft_tokens", "mem_fraction_static", "max_total_num_tokens",
                    "chunked_prefill_size")}
                record["max_total_num_tokens"] = next((s.get("max_total_num_tokens") for s in states
                                                       if isinstance(s, dict) and "max_total_num_tokens" in s), None)
            except (OSError, ValueError) as exc:
                record["server_info_error"] = str(exc)
    finally:
        stop(process)
    text = log_path.read_text(errors="replace")
    record["timeline_s"] = timeline(text, started)
    if record.get("error"):
        record["log_tail"] = text.splitlines()[-40:]
    record["seconds"] = round(time.time() - started, 1)
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    made = sub.add_parser("make")
    made.add_argument("out", type=Path)
    made.add_argument("--nvfp4", action="store_true", help="also write OUT%s, the NVFP4 config" % NVFP4_SUFFIX)
    probe = sub.add_parser("probe")
    probe.add_argument("--model", type=Path, required=True)
    probe.add_argument("--out", type=Path, required=True)
    probe.add_argument("--logs", type=Path, required=True)
    probe.add_argument("--starts", default="base,mtp_3_4,mtp_1_2,nvfp4,moe_flashinfer_cutlass")
    probe.add_argument("--port", type=int, default=30010)
    probe.add_argument("--limit", type=int, default=240, help="seconds a start may take to answer")
    args = parser.parse_args(argv)
    if args.command == "make":
        print(json.dumps(make(args.out)))
        if args.nvfp4:
            print(json.dumps(make(model_of("nvfp4", args.out), nvfp4=True)))
        return 0
    starts = [name for name in args.starts.split(",") if name]
    unknown = [name for name in starts if name not in STARTS]
    if unknown:
        parser.error("--starts names %s, not starts of this probe (%s)" % (", ".join(unknown), ", ".join(STARTS)))
    args.logs.mkdir(parents=True, exist_ok=True)
    for name in starts:
        record = probe_one(name, model_of(name, args.model), args.port, args.logs, args.limit)
        with open(args.out, "a") as out:
            out.write(json.dumps(record) + "\n")
        print("%s: %s in %.1f s; timeline %s; loads %s; accept %s; max running %s" % (
            name, record.get("error") or "up", record["seconds"], record["timeline_s"],
            {k: (v.get("output_tokens_per_s") if isinstance(v, dict) else v)
             for k, v in (record.get("loads") or {}).items()},
            record.get("accept_length"), record.get("max_running_requests")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

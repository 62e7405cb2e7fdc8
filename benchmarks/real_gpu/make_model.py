# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make the harness's model on the GPU host: a Llama of random bf16 weights and a BPE tokenizer trained there.

It stands in for GLM-5-NVFP4 (410 GB, 8 SM120 GPUs) and for any checkpoint from the hub, which the host cannot
reach. What matters to what the collection measures is real: SGLang loads it with its own loader, tokenizer and
kernels, and serves it with CUDA graphs at batch sizes up to 256. Random weights make the generated text
meaningless, and their near-flat logits make greedy decoding sensitive to the last bit of a kernel's result:
the parity check meets its hardest case here (docs/evidence/real-sglang-h200.md).

    python3 make_model.py OUT_DIR [--layers 22] [--hidden 2048] [--seed 0]

The default shape is TinyLlama's (1.1 B parameters, 32,000 tokens, 22 layers, GQA with 4 KV heads). The tokenizer
is a byte-level BPE of up to 32,000 tokens trained on English text of the host's Python (pydoc's topic pages, the
standard library's docstrings), so it makes a word of prose one to two tokens as a real one does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def english_text(limit_bytes=3_000_000):
    """Prose the host has without a network: pydoc's help topics, then the standard library's docstrings."""
    chunks, size = [], 0
    try:
        from pydoc_data.topics import topics
        for text in topics.values():
            chunks.append(text)
            size += len(text)
    except ImportError:
        pass
    import ast
    import sysconfig
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        if size >= limit_bytes:
            break
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    chunks.append(doc)
                    size += len(doc)
    return chunks


def make_tokenizer(out, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    special = ["<s>", "</s>", "<unk>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(english_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.model_max_length = 4096
    fast.save_pretrained(out)
    return fast


def make_model(out, tokenizer, layers, hidden, seed):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 11 // 4,
        num_hidden_layers=layers, num_attention_heads=hidden // 64, num_key_value_heads=4,
        max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, torch_dtype="bfloat16")
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    return sum(p.numel() for p in model.parameters()), device


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=22)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if (args.out / "config.json").exists():
        print(json.dumps({"model": str(args.out), "made": False}))
        return 0
    partial = args.out.with_name(args.out.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    tokenizer = make_tokenizer(partial, args.vocab)
    tokenized_at = time.monotonic()
    parameters, device = make_model(partial, tokenizer, args.layers, args.hidden, args.seed)
    for path in [partial, *partial.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.replace(partial, args.out)
    print(json.dumps({"model": str(args.out), "made": True, "parameters": parameters, "device": device,
                      "vocab_size": len(tokenizer), "tokenizer_s": round(tokenized_at - began, 1),
                      "weights_s": round(time.monotonic() - tokenized_at, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the smoke test needs to know of the model from its config.json. Pure.

The vocabulary size bounds the token ids serving_benchmark sends as prompts (ids past it are refused by the
server). A multimodal checkpoint keeps it under text_config (transformers' composite configs).
"""

from __future__ import annotations

from collections.abc import Mapping


class ModelConfigError(ValueError):
    """config.json cannot say the vocabulary size; the message names the file and the fix."""


def vocab_size(config, where="config.json"):
    """The model's vocabulary size: config.json's vocab_size, or its text_config's; None where neither is."""
    if not isinstance(config, Mapping):
        raise ModelConfigError("%s is not a JSON object, so it is not a model's config.json: %r" % (where, config))
    for holder in (config, config.get("text_config")):
        if isinstance(holder, Mapping) and "vocab_size" in holder:
            value = holder["vocab_size"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ModelConfigError("%s has vocab_size %r, not a positive whole number: the checkpoint's "
                                       "config.json is damaged; fetch it again" % (where, value))
            return value
    return None


# The weights of the one MTP (NextN) layer SGLang's DeepSeek-family loader reads, GLM-5's included
# (GlmMoeDsaForCausalLMNextN is a DeepseekV3ForCausalLMNextN; 0.5.16 wheel,
# models/deepseek_common/deepseek_weight_loader.py _initialize_nextn_conf): the layer after the last decoder layer,
# model.layers.<num_hidden_layers> (0 for a one-layer model), with these weights of its own besides a decoder layer's.
MTP_WEIGHTS = ("eh_proj", "enorm", "hnorm", "shared_head.norm")


def _text_config(config):
    text = config.get("text_config")
    return text if isinstance(text, Mapping) else config


def mtp_layer_problem(config, index, checkpoint):
    """Why the checkpoint cannot serve speculative decoding with its own MTP head ("" where it can).

    ``config``: its config.json; ``index``: its model.safetensors.index.json (None where it has none);
    ``checkpoint``: the directory, for the message. SGLang needs num_nextn_predict_layers of 1 in the config, and
    the layer's weights: some GLM-5-NVFP4 checkpoints keep the config's 1 but drop the layer's weights
    (lukealonso/GLM-5-NVFP4 has no layer 78; festr2/GLM-5-NVFP4-MTP restores it, ../shared/research/
    launch-knobs-2026-12.md), and the server would fail at load, a restart of minutes spent for nothing.
    """
    if not isinstance(config, Mapping):
        return "%s has no readable config.json, so it cannot be told whether it holds the MTP layer" % checkpoint
    text = _text_config(config)
    layers, nextn = text.get("num_hidden_layers"), text.get("num_nextn_predict_layers")
    fix = ("take speculative decoding (the MTP options) out of sglang_service_tuning, or serve a checkpoint that "
           "holds the MTP layer (sglang_service_profile: glm-5-nvfp4-mtp, festr2/GLM-5-NVFP4-MTP); without it the "
           "largest measured gain on these hosts is forgone (1,010 -> 1,425 output tok/s at c64 with MTP)")
    if nextn != 1:
        return ("%s has num_nextn_predict_layers %r in its config.json; SGLang's MTP needs exactly 1: %s"
                % (checkpoint, nextn, fix))
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        return "%s has num_hidden_layers %r in its config.json: the checkpoint's config is damaged" % (checkpoint, layers)
    weight_map = index.get("weight_map") if isinstance(index, Mapping) else None
    if not isinstance(weight_map, Mapping):
        return ("%s has no model.safetensors.index.json with a weight_map, so it cannot be told whether it holds the "
                "MTP layer's weights: %s" % (checkpoint, fix))
    layer = 0 if layers == 1 else layers
    prefix = "model.layers.%d." % layer
    names = [name for name in weight_map if str(name).startswith(prefix)]
    missing = [weight for weight in MTP_WEIGHTS if not any(name.startswith(prefix + weight + ".") for name in names)]
    if missing:
        return ("%s has no weights of its MTP layer (%s%s in its weight index): the config names the layer but the "
                "checkpoint dropped it; %s" % (checkpoint, prefix, "{%s}" % ",".join(missing), fix))
    return ""

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

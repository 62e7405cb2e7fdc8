# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attention a GLM-5 launch lands on with the device taken as SM120, and a refusal where SM120 cannot run it.

GLM-5 (``GlmMoeDsaForCausalLM``) is a DeepSeek sparse attention (DSA) model: its KV cache dtype and attention
backend come as a pair. Left to SGLang, the attention is the sparse one and its prefill and decode backends follow
from the KV cache dtype; a bf16 cache then lands on ``flashmla_sparse`` and ``trtllm``, which SM120 has no kernels
for, and the server dies after a 7-8 minute start. The release data's ``dsa_attention`` entries say what each
release resolves (proven on each release's own code by tests/unit/tooling/test_launch_resolution.py) and its
``attention_backends`` table what SM120 runs. Pure: the rendered launch flags and the data in, a mapping or
messages out.
"""

from __future__ import annotations

from ansible_collections.sm120.sglang.plugins.plugin_utils.data_files import version_range

DSA_ARCHITECTURES = ("GlmMoeDsaForCausalLM",)
_ATTENTION_FLAGS = ("--attention-backend", "--prefill-attention-backend", "--decode-attention-backend")
_KV_SPELLING = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp8_e4m3": "fp8_e4m3"}
_FIX = ("set --attention-backend triton or flashinfer in the profile's arguments (dense MLA, which runs a bf16 KV "
        "cache on SM120), or kv_cache_dtype: fp8_e4m3 with flashinfer_sparse_mla (SGLang 0.5.17 or newer)")


class AttentionError(Exception):
    """The release data cannot answer for this release; the message names what is missing."""


def _entry(data, version):
    found = [entry for entry in data.get("dsa_attention") or []
             if version_range(entry["versions"], "dsa_attention", AttentionError).contains(
                 str(version), prereleases=True)]
    if len(found) != 1:
        raise AttentionError("data/sglang_releases.yml dsa_attention has %d entries for SGLang %s; it needs one"
                             % (len(found), version))
    return found[0]


def _value(flags, flag):
    value = flags.get(flag)
    return None if value in (None, False, "") else str(value)


def resolve(flags, data, version):
    """What SGLang ``version`` runs a DSA model's attention on for these launch flags (flag -> value), on SM120:
    ``{attention_backend, kv_cache_dtype, sparse, prefill, decode}``."""
    entry = _entry(data, version)
    kv_given = _value(flags, "--kv-cache-dtype") or "auto"
    kv = "fp8_e4m3" if kv_given == "auto" else _KV_SPELLING.get(kv_given)
    if kv is None:
        raise AttentionError("--kv-cache-dtype %s: a DSA model takes bf16, bfloat16, fp8_e4m3 or auto" % kv_given)
    backends = {flag: _value(flags, flag) for flag in _ATTENTION_FLAGS}
    if not any(backends.values()):
        defaults = dict(zip(("prefill", "decode"), entry["sm120"][kv]))
        prefill = _value(flags, entry["flags"]["prefill"]) or defaults["prefill"]
        decode = _value(flags, entry["flags"]["decode"]) or defaults["decode"]
        return {"attention_backend": entry["sparse_backend"], "kv_cache_dtype": kv, "sparse": True,
                "prefill": prefill, "decode": decode}
    attention = backends["--attention-backend"]
    return {"attention_backend": attention, "kv_cache_dtype": kv, "sparse": False,
            "prefill": backends["--prefill-attention-backend"] or attention,
            "decode": backends["--decode-attention-backend"] or attention}


def _backend_problem(data, version, backend, phase, kv):
    table = data.get("attention_backends") or {}
    row = table.get(backend)
    if row is None:
        return ("%s %s is not in the attention_backends table of data/sglang_releases.yml, so whether SM120 runs "
                "it is unknown; describe it there (from the wheel or a report on SM120) or" % (phase, backend))
    if not row.get("sm120"):
        return "%s %s does not run on SM120 (it runs on %s: %s)" % (
            phase, backend, ", ".join(str(arch).upper() for arch in row.get("runs_on") or []) or "other GPUs",
            " ".join(str(row.get("source", "")).split()))
    if row.get("versions") and not version_range(row["versions"], "attention_backends %s" % backend,
                                                 AttentionError).contains(str(version), prereleases=True):
        return "%s %s is not in SGLang %s (it needs %s)" % (phase, backend, version, row["versions"])
    if row.get("needs_kv_cache_dtype") and row["needs_kv_cache_dtype"] != kv:
        return "%s %s takes a %s KV cache only, and the profile's is %s" % (
            phase, backend, row["needs_kv_cache_dtype"], kv)
    if row.get("prefill_only") and phase == "decode":
        return "decode %s is a prefill backend only" % backend
    return None


def problems(flags, data, version, architecture, where="the profile"):
    """Why SM120 cannot run this launch's attention, as messages naming the backend, the release and the fix; empty
    where it can, and for a model that is not a DSA model."""
    if architecture not in DSA_ARCHITECTURES:
        return []
    resolved = resolve(flags, data, version)
    found = []
    seen = set()
    for phase in ("prefill", "decode"):
        backend = resolved[phase]
        if backend in seen:
            continue
        seen.add(backend)
        problem = _backend_problem(data, version, backend, phase, resolved["kv_cache_dtype"])
        if problem:
            found.append(problem)
    if not found:
        return []
    how = ("left to SGLang, the %s KV cache resolves to %s attention with prefill %s and decode %s"
           % (resolved["kv_cache_dtype"], resolved["attention_backend"], resolved["prefill"], resolved["decode"])
           if resolved["sparse"] else "--attention-backend %s with a %s KV cache"
           % (resolved["attention_backend"], resolved["kv_cache_dtype"]))
    return ["%s on SGLang %s: %s; %s. The server would fail after its 7-8 minute start on SM120. Fix: %s."
            % (where, version, how, "; ".join(found), _FIX)]

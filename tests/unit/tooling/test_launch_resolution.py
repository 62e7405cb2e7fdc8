# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GLM-5's attention as each release's own code resolves it with the device taken as SM120, against the data.

For every release of data/sglang_releases.yml that serves GLM-5, the release's own resolution functions run from its
wheel (tooling/launch_resolution.py) on the production profile as the service renders it, and on the overrides a
user would try; the controller's answer (plugins/plugin_utils/attention.py, from the data's dsa_attention) must be
the same, and the rendered production profile must land only on backends the data's table says run on SM120.
"""

from __future__ import annotations

import functools
import pathlib

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.plugin_utils import attention, launch_profile, sglang_releases
from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import sglang_wheel
from ansible_collections.sm120.sglang.tooling.launch_resolution import resolve as resolve_in_wheel
from ansible_collections.sm120.sglang.tooling.server_flags import read_server_flags

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROFILE = yaml.safe_load((ROOT / "roles" / "sglang_service" / "vars" / "profiles.yml").read_text())[
    "__sglang_service_builtin_profiles"]["glm-5-nvfp4"]
DATA = sglang_releases.load()
GLM5_RELEASES = [version for version in sglang_releases.versions(DATA) if DATA["releases"][version]["glm5"]]
# The keys of GLM-5's config.json the resolution reads (zai-org/GLM-5, benchmarks/real_gpu/glm5_arch.py GLM5).
GLM5_CONFIG = {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "index_topk": 2048,
               "index_head_dim": 128, "index_n_heads": 32, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
SM120, SM90 = (12, 0), (9, 0)
# The overrides a user reaches for: the dtype alone, each dense backend, each DSA backend named.
VARIANTS = [
    {"--kv-cache-dtype": "bf16"},
    {"--kv-cache-dtype": "bfloat16", "--attention-backend": "flashinfer"},
    {"--kv-cache-dtype": "fp8_e4m3"},
    {},
    {"--kv-cache-dtype": "auto", "--attention-backend": "triton"},
    {"--kv-cache-dtype": "fp8_e4m3", "--decode-attention-backend": "triton"},
]


@functools.lru_cache(maxsize=None)
def _reader(version):
    archive = sglang_wheel(version)
    names = set(archive.namelist())
    return lambda path: archive.read(path).decode() if path in names else None


@functools.lru_cache(maxsize=None)
def _dests(version):
    return {flag: record["dest"] for flag, record in read_server_flags(_reader(version)).items()}


def _in_wheel(version, flags, capability=SM120):
    """The release's own resolution, the flags handed to it by their parser dests."""
    dests = _dests(version)
    arguments = {dests[flag]: value for flag, value in flags.items() if flag in dests and value not in (None, False)}
    return resolve_in_wheel(_reader(version), arguments, capability, GLM5_CONFIG)


def _rendered(version):
    return launch_profile.launch_flags(PROFILE, {}, "0.0.0.0", 30000, "/var/lib/sglang/models/glm-5-nvfp4", None,
                                       None, None, None, DATA["flag_renames"], version)


def _same(ours, theirs):
    keys = ("attention_backend", "kv_cache_dtype", "sparse", "prefill", "decode")
    return {key: ours[key] for key in keys} == {key: theirs[key] for key in keys}


@pytest.mark.parametrize("version", GLM5_RELEASES)
def test_the_rendered_production_profile_lands_only_on_backends_sm120_runs(version):
    flags = _rendered(version)
    theirs = _in_wheel(version, flags)
    ours = attention.resolve(flags, DATA, version)
    assert _same(ours, theirs), (ours, theirs)
    assert attention.problems(flags, DATA, version, "GlmMoeDsaForCausalLM") == []
    assert DATA["attention_backends"][theirs["prefill"]]["sm120"] and DATA["attention_backends"][theirs["decode"]]["sm120"]


@pytest.mark.parametrize("version", GLM5_RELEASES)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: ",".join("%s=%s" % item for item in variant.items())
                         or "unset")
def test_the_data_says_what_the_release_s_own_code_resolves_on_sm120(version, variant):
    flags = dict(_rendered(version), **{"--attention-backend": False})
    flags.pop("--kv-cache-dtype")
    flags = {flag: value for flag, value in dict(flags, **variant).items() if value is not False}
    assert _same(attention.resolve(flags, DATA, version), _in_wheel(version, flags))


@pytest.mark.parametrize("version", ["0.5.9", "0.5.13", "0.5.16", "0.5.23"])
def test_a_dsa_backend_named_by_flag_is_kept_as_the_release_keeps_it(version):
    entry = next(entry for entry in DATA["dsa_attention"]
                 if sglang_releases.SpecifierSet(entry["versions"]).contains(version))
    flags = {"--kv-cache-dtype": "bf16", entry["flags"]["decode"]: "flashmla_kv"}
    theirs = _in_wheel(version, flags)
    assert theirs["decode"] == "flashmla_kv" and _same(attention.resolve(flags, DATA, version), theirs)


def test_on_sm90_the_same_release_picks_other_backends_so_the_device_is_what_decides():
    flags = {"--kv-cache-dtype": "bf16"}
    assert (_in_wheel("0.5.23", flags, SM90)["decode"], _in_wheel("0.5.23", flags, SM120)["decode"]) == ("fa3", "trtllm")
    assert _in_wheel("0.5.23", {}, SM90)["kv_cache_dtype"] == "bfloat16"
    assert _in_wheel("0.5.23", {}, SM120)["prefill"] == "flashinfer_sparse_mla"


def test_every_backend_a_glm5_release_resolves_to_is_in_the_table():
    resolved = {backend for entry in DATA["dsa_attention"] for pair in entry["sm120"].values() for backend in pair}
    assert resolved <= set(DATA["attention_backends"])


def test_the_sm120_only_pairing_is_refused_on_sm90_by_the_release_s_own_check():
    """0.5.23's own validator (kernels/ops/attention/flash_mla_sm120.py) run from the wheel: flashinfer_sparse_mla on
    an SM90 device is refused with SGLang's message, and taken on SM120."""
    from ansible_collections.sm120.sglang.tooling.launch_resolution import Release
    release = Release(_reader("0.5.23"), SM90, GLM5_CONFIG)
    torch = release.world["torch"]
    torch.float8_e4m3fn, torch.bfloat16 = "float8_e4m3fn", "bfloat16"
    validate = release.module("sglang.kernels.ops.attention.flash_mla_sm120").namespace[
        "_validate_flashinfer_sparse_mla_backend"]
    arguments = {"model_arch": "GlmMoeDsaForCausalLM", "kv_cache_dtype": "float8_e4m3fn",
                 "prefill_impl": "flashinfer_sparse_mla", "decode_impl": "flashinfer_sparse_mla"}
    with pytest.raises(ValueError, match="supports only GLM DSA with FP8 KV cache on NVIDIA SM120/SM121"):
        validate(device_sm_major=9, **arguments)
    assert validate(device_sm_major=12, **arguments) is True

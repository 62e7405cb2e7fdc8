"""After converge: the complete default set, consistent and importable without a GPU."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "resources", "tests"))
from sglang_host import DATA, sglang_releases  # noqa: E402

testinfra_hosts = ["ansible://sm120-bookworm"]
DEFAULT_SET = sglang_releases.install_set(DATA, "newest")
PYTHON = "/opt/sglang/bin/python"

VERSIONS = r"""
import json
from importlib import metadata
print(json.dumps({name: metadata.version(name) for name in %r}))
"""


def test_every_package_is_at_the_sets_version(host):
    installed = json.loads(host.check_output("%s -c %s" % (PYTHON, _quote(VERSIONS % list(DEFAULT_SET["versions"])))))
    assert {name: version.split("+")[0] for name, version in installed.items()} == DEFAULT_SET["versions"]


def test_torch_is_the_sets_cuda_build(host):
    out = host.check_output("%s -c 'import torch; print(torch.version.cuda)'" % PYTHON)
    assert out.strip() == DEFAULT_SET["torch_cuda"]


def test_pip_check_is_clean(host):
    result = host.run("%s -m pip check --disable-pip-version-check" % PYTHON)
    assert result.rc == 0, result.stdout


def test_sglang_and_flashinfer_import_without_a_gpu(host):
    # The model classes import sgl_kernel, which needs libcuda: not here. The
    # server's arguments, which know GLM-5's architecture, import without it.
    out = host.check_output(
        "%s -c 'import sglang, flashinfer, sglang.srt.server_args; print(sglang.__version__, flashinfer.__version__)'"
        % PYTHON)
    assert out.split() == [DEFAULT_SET["version"], DEFAULT_SET["versions"]["flashinfer-python"]]


def test_the_installed_sglang_has_glm5s_architecture(host):
    site = host.check_output("%s -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'" % PYTHON).strip()
    assert "class GlmMoeDsaForCausalLM(" in host.file(site + "/sglang/srt/models/glm4_moe.py").content_string


def test_the_gates_were_rolled_back_after_the_effect_check(host):
    assert not host.file("/var/lib/sm120-sglang/patch-ledger.json").exists


def test_the_ca_bundle_pip_used_is_on_the_host(host):
    bundle = host.file("/etc/sm120-sglang/pip-ca-bundle.pem")
    assert bundle.is_file and bundle.mode == 0o644
    assert "BEGIN CERTIFICATE" in bundle.content_string


def _quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"

"""After the upgrade: SGLang 0.5.9 alone in /opt/sglang, every file as its wheel shipped it, no patch ledger."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "resources", "tests"))
from sglang_host import installed_version, record_sha256, site_packages  # noqa: E402

VENV = "/opt/sglang"

# Run with the venv's interpreter: every file of the installed sglang against its RECORD.
CHECK_RECORD = r"""
import base64, hashlib, json
from importlib import metadata
dist = metadata.distribution("sglang")
checked, differ = 0, []
for entry in dist.files:
    if entry.hash is None or entry.hash.mode != "sha256":
        continue
    digest = base64.urlsafe_b64encode(hashlib.sha256(entry.locate().read_bytes()).digest()).rstrip(b"=").decode()
    checked += 1
    if digest != entry.hash.value:
        differ.append(str(entry))
print(json.dumps({"checked": checked, "differ": differ}))
"""


def test_the_venv_is_made_from_the_distributions_python3(host):
    cfg = host.file(VENV + "/pyvenv.cfg")
    assert cfg.exists
    assert "home = /usr/bin" in cfg.content_string
    assert host.file(VENV + "/bin/python").exists


def test_sglang_0_5_9_is_installed_alone(host):
    assert installed_version(host, VENV) == "0.5.9"
    listed = host.check_output("%s/bin/python -m pip list --format=json --disable-pip-version-check" % VENV)
    names = {entry["name"].lower() for entry in json.loads(listed)}
    assert "sglang" in names
    assert not names & {"torch", "flashinfer-python", "flashinfer-cubin", "sgl-kernel"}


def test_only_one_sglang_distribution_is_left(host):
    site = site_packages(host, VENV)
    assert host.check_output("ls -d %s/sglang-*.dist-info" % site).split() == [site + "/sglang-0.5.9.dist-info"]


def test_every_installed_file_is_as_the_wheel_shipped_it(host):
    result = json.loads(host.check_output("%s/bin/python -c %s" % (VENV, _quote(CHECK_RECORD))))
    assert result["checked"] > 1000
    assert result["differ"] == []


def test_the_gate_file_is_the_shipped_0_5_9_file(host):
    site, hashes = record_sha256(host, VENV)
    path = "sglang/srt/distributed/device_communicators/custom_all_reduce.py"
    assert host.file(os.path.join(site, path)).sha256sum == hashes[path]
    assert "is_sm120_supported" not in host.file(os.path.join(site, path)).content_string


def test_no_patch_ledger_is_left(host):
    assert not host.file("/var/lib/sm120-sglang/patch-ledger.json").exists


def test_the_offline_wheels_were_copied_to_the_host(host):
    for release in ("0.5.8", "0.5.9"):
        wheel = host.file("/var/cache/sglang-wheels/sglang-%s-py3-none-any.whl" % release)
        assert wheel.is_file and wheel.mode == 0o644


def _quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"

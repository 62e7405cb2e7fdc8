"""After converge: every catalog edit is live in the real SGLang files, and recorded."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "resources", "tests"))
from sglang_host import catalog_files, installed_version, record_sha256  # noqa: E402

LEDGER = "/var/lib/sm120-sglang/patch-ledger.json"


def test_the_expected_release_is_installed(host):
    expected = {"sm120-patches-bookworm": "0.5.8", "sm120-patches-trixie": "0.5.9"}[host.backend.get_hostname()]
    assert installed_version(host, "/opt/sglang") == expected


def test_every_edit_is_live_once(host):
    site, _hashes = record_sha256(host, "/opt/sglang")
    for _gate, path, edits in catalog_files():
        content = host.file(os.path.join(site, path)).content_string
        for edit in edits:
            assert content.count(edit["new"]) == 1, (path, edit["id"])


def test_patched_files_compile_with_the_venv_python(host):
    site, _hashes = record_sha256(host, "/opt/sglang")
    paths = sorted({os.path.join(site, path) for _gate, path, _edits in catalog_files()})
    host.check_output("/opt/sglang/bin/python -m py_compile %s" % " ".join(paths))


def test_the_ledger_records_gates_and_hashes(host):
    site, hashes = record_sha256(host, "/opt/sglang")
    ledger = json.loads(host.file(LEDGER).content_string)
    assert ledger["sglang_version"] == installed_version(host, "/opt/sglang")
    assert ledger["package_dir"] == site
    assert ledger["gates"] == ["custom_allreduce_pcie", "flashinfer_allreduce_fusion"]
    assert len(ledger["files"]) == 3
    for entry in ledger["files"]:
        assert entry["record_sha256"] == hashes[entry["relative_path"]]
        assert host.file(entry["path"]).sha256sum == entry["sha256"] != entry["record_sha256"]
        assert entry["patched_at"].endswith("Z") and entry["edits"]


def test_the_unsupported_release_was_left_as_shipped(host):
    site, hashes = record_sha256(host, "/opt/sglang-0.5.10")
    assert installed_version(host, "/opt/sglang-0.5.10") == "0.5.10"
    for _gate, path, _edits in catalog_files():
        if path in hashes:
            assert host.file(os.path.join(site, path)).sha256sum == hashes[path], path
    assert not host.file("/var/lib/sm120-sglang/unsupported-ledger.json").exists


def test_nothing_is_left_in_the_package_directory(host):
    site, _hashes = record_sha256(host, "/opt/sglang")
    leftovers = host.run("find %s/sglang -name '*.lock' -o -name '.source_patch.*' -o -name '*~'" % site)
    assert leftovers.stdout.strip() == ""

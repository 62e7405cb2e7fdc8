"""After --tags rollback: every file is the shipped file again and no ledger is left."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "resources", "tests"))
from sglang_host import catalog_files, record_sha256  # noqa: E402


def test_every_catalog_file_equals_its_record_sha256(host):
    site, hashes = record_sha256(host, "/opt/sglang")
    paths = sorted({path for _gate, path, _edits in catalog_files()})
    assert len(paths) == 3
    for path in paths:
        assert host.file(os.path.join(site, path)).sha256sum == hashes[path], path


def test_no_edit_is_left(host):
    site, _hashes = record_sha256(host, "/opt/sglang")
    for _gate, path, edits in catalog_files():
        content = host.file(os.path.join(site, path)).content_string
        assert "sm120" not in content.lower().replace("is_sm120_supported,", "").replace(
            "is_sm120_supported()", "") or path.endswith("server_args.py"), path
        for edit in edits:
            if edit["old"] not in edit["new"]:
                assert content.count(edit["new"]) == 0, (path, edit["id"])
            assert content.count(edit["old"]) == 1, (path, edit["id"])


def test_the_ledger_is_cleared(host):
    assert not host.file("/var/lib/sm120-sglang/patch-ledger.json").exists

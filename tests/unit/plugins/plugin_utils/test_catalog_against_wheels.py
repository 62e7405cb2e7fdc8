# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every catalog entry against the real SGLang wheels of the releases it names.

The wheels come from PyPI (`pip download --no-deps`, about 5 MB each) into
.cache/wheels, once. The files are checked against the wheel's RECORD, patched
with the same render() the module uses, byte-compiled, and reverted to the
shipped bytes. Where the catalog marks the next release unsupported because an
anchor moved, the test shows that it really moved.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import py_compile

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.module_utils.source_patch import ABSENT, PatchError, render
from ansible_collections.sm120.sglang.plugins.plugin_utils.patch_catalog import patch_plan
from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import sglang_wheel

HERE = os.path.dirname(__file__)
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))

with open(os.path.join(ROOT, "roles", "sm120_patches", "vars", "catalog.yml")) as handle:
    CATALOG = yaml.safe_load(handle)["__sm120_patches_catalog"]
GATES = [gate["id"] for gate in CATALOG["gates"]]
SUPPORTED = ["0.5.8", "0.5.8.post1", "0.5.9"]


wheel = sglang_wheel


def record_sha256(archive):
    record = next(name for name in archive.namelist() if name.endswith(".dist-info/RECORD"))
    hashes = {}
    for row in csv.reader(io.StringIO(archive.read(record).decode())):
        if len(row) >= 2 and row[1].startswith("sha256="):
            digest = row[1][len("sha256="):]
            hashes[row[0]] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return hashes


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_gate_applies_compiles_and_reverts_on_the_real_wheel(version, tmp_path):
    archive = wheel(version)
    hashes = record_sha256(archive)
    plan = patch_plan(CATALOG, version, {gate: True for gate in GATES})
    assert sorted(plan["enabled"]) == sorted(GATES)
    for entry in plan["files"]:
        shipped = archive.read(entry["path"])
        assert hashlib.sha256(shipped).hexdigest() == hashes[entry["path"]]
        patched, outcome = render(shipped.decode(), entry["edits"], path=entry["path"])
        assert outcome["applied"] == [edit["id"] for edit in entry["edits"]]
        target = tmp_path / os.path.basename(entry["path"])
        target.write_text(patched)
        py_compile.compile(str(target), doraise=True)
        assert render(patched, entry["edits"], path=entry["path"])[0] == patched
        backwards = [dict(edit, state=ABSENT) for edit in entry["edits"]]
        assert render(patched, backwards, path=entry["path"])[0].encode() == shipped


def test_the_first_unsupported_release_really_moved_the_anchors():
    archive = wheel("0.5.10")
    plan = patch_plan(CATALOG, "0.5.9", {gate: True for gate in GATES})
    moved = {}
    for entry in plan["files"]:
        for edit in entry["edits"]:
            try:
                render(archive.read(entry["path"]).decode(), [edit], path=entry["path"])
            except (PatchError, KeyError):
                moved.setdefault(edit["id"].split(".")[0], []).append(edit["id"])
    # Each gate marked unsupported from 0.5.10 has at least one edit that no longer anchors.
    assert sorted(moved) == sorted(GATES)
    assert "flashinfer_allreduce_fusion.widen_fusion_auto_enable" in moved["flashinfer_allreduce_fusion"]

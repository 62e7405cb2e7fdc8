# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every gate entry against the real wheel of every release in its range: it anchors, and it takes effect.

For each release the data describes and each gate: the files the entry edits match
the wheel's RECORD, every edit applies once, the result byte-compiles, applying again
changes nothing and reverting gives back the shipped bytes. Then every decision the
entry names is evaluated on the shipped and on the gated file (gate_effect.py): on
SM120 it must flip to what the gate is for, on SM90 and SM100 it must stay as shipped.
An upstream entry's decision must already hold on the shipped code. The release x
gate table is printed (pytest -s) as docs/releases.md carries it.
"""

from __future__ import annotations

import hashlib

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.source_patch import PatchError, render
from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases
from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import record_sha256, sglang_wheel
from ansible_collections.sm120.sglang.tooling import gate_check, gate_effect

DATA = sglang_releases.load()
RELEASES = sglang_releases.versions(DATA)
GATES = list(DATA["gates"])
CASES = [(version, gate) for version in RELEASES for gate in GATES]


def _reader(archive):
    names = set(archive.namelist())
    return lambda path: archive.read(path).decode() if path in names else None


@pytest.mark.parametrize("version,gate", CASES, ids=["%s-%s" % case for case in CASES])
def test_the_gate_entry_anchors_and_takes_effect_on_the_real_wheel(version, gate):
    archive = sglang_wheel(version)
    entry = sglang_releases.gate_entry(DATA, gate, version)
    # The files the entry edits are the ones the wheel's RECORD lists, as the role checks on the host.
    hashes = record_sha256(archive)
    for file_entry in entry.get("files") or []:
        assert hashlib.sha256(archive.read(file_entry["path"])).hexdigest() == hashes[file_entry["path"]]
    assert gate_check.check_entry(entry, _reader(archive)) == []
    if entry["kind"] == "unsupported":
        assert entry["reason"].strip()


def test_the_first_catalog_s_custom_allreduce_edit_alone_changes_nothing_at_tp8():
    """The edit of the first catalog let the object start, and should_custom_ar still refused every allreduce."""
    archive = sglang_wheel("0.5.9")
    entry = sglang_releases.gate_entry(DATA, "custom_allreduce_pcie", "0.5.9")
    path = "sglang/srt/distributed/device_communicators/custom_all_reduce.py"
    shipped = archive.read(path).decode()
    old_edit = [{"id": "allow_pcie_sm120", "old": "        if world_size > 2 and not full_nvlink:\n",
                 "new": "        if world_size > 2 and not full_nvlink and torch.cuda.get_device_capability() != (12, 0):\n"}]
    first_catalog, _outcome = render(shipped, old_edit, path=path)
    serves = next(decision for decision in entry["decisions"] if decision["id"] == "custom_ar_serves")
    _values, problems = gate_effect.check_effect(shipped, first_catalog, serves)
    assert problems == ["%s CustomAllreduce.should_custom_ar (custom_ar_serves): on SM120 the gated code decides False, "
                        "the gate needs True" % path]


def test_the_fusion_edits_of_0_5_13_leave_0_5_14_refusing_sm120_at_model_load():
    """0.5.14 added _resolve_backend: the older entry anchors there, and the server would still raise."""
    archive = sglang_wheel("0.5.14")
    older = sglang_releases.gate_entry(DATA, "flashinfer_allreduce_fusion", "0.5.13")
    newer = sglang_releases.gate_entry(DATA, "flashinfer_allreduce_fusion", "0.5.14")
    for file_entry in older["files"]:
        render(archive.read(file_entry["path"]).decode(), file_entry["edits"], path=file_entry["path"])
    refused = next(decision for decision in newer["decisions"] if decision["id"] == "fusion_backend_refused")
    shipped = archive.read(refused["file"]).decode()
    assert gate_effect.evaluate_decision(shipped, refused, gate_effect.DEVICES["sm120"]) is True


def test_an_edit_that_uses_a_helper_its_file_does_not_import_is_caught_on_the_real_wheel():
    archive = sglang_wheel("0.5.9")
    entry = sglang_releases.gate_entry(DATA, "flashinfer_allreduce_fusion", "0.5.9")
    file_entry = entry["files"][0]
    without_import = [edit for edit in file_entry["edits"] if edit["id"] != "import_is_sm120_supported"]
    shipped = archive.read(file_entry["path"]).decode()
    gated, _outcome = render(shipped, without_import, path=file_entry["path"])
    with pytest.raises(gate_effect.EffectError, match="is_sm120_supported is neither imported"):
        gate_effect.check_effect(shipped, gated, entry["decisions"][0])


def test_the_0_5_10_edits_do_not_anchor_on_0_5_8_where_the_check_lived_in_custom_all_reduce_py():
    archive = sglang_wheel("0.5.8")
    entry = sglang_releases.gate_entry(DATA, "custom_allreduce_pcie", "0.5.10")
    utils = entry["files"][0]
    with pytest.raises(PatchError, match="occurs 0 times"):
        render(archive.read(utils["path"]).decode(), utils["edits"], path=utils["path"])
    problems = gate_check.check_entry(entry, _reader(archive))
    assert any("allow_pcie_sm120_init" in problem and "occurs 0 times" in problem for problem in problems)


def test_the_release_gate_table_covers_every_release_and_gate(capsys):
    lines = sglang_releases.release_table(DATA)
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    install, gates = lines[:2 + len(RELEASES)], lines[3 + len(RELEASES):]
    assert len(gates) == 2 + len(RELEASES)
    for version, install_line, gate_line in zip(RELEASES, install[2:], gates[2:]):
        assert install_line.startswith("| %s" % version) and gate_line.startswith("| %s |" % version)
        assert gate_line.count(" | ") == len(GATES)

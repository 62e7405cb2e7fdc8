# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""phase_stamp through main(), on real files, with a systemctl on PATH.

The systemctl is a test double standing in for systemd, which unit tests cannot drive: it answers ``is-enabled``
and ``is-active`` for each unit from a JSON file the test writes (and exits non-zero for any answer but enabled and
active, as systemctl does).
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from ansible_collections.sm120.sglang.plugins.modules import phase_stamp
from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail

UNIT = "nvidia-persistenced.service"
INPUTS = "c" * 64
FAKE_SYSTEMCTL = """#!%s
import json, sys
verb, unit = sys.argv[1], sys.argv[2]
answer = json.load(open(%r)).get(unit, {}).get(verb, "unknown")
print(answer)
sys.exit(0 if answer in ("enabled", "active") else 3)
"""


@pytest.fixture
def units(tmp_path, monkeypatch):
    """Put a systemctl on PATH; set(unit, enabled, active) says what it answers."""
    bin_dir, answers = tmp_path / "bin", tmp_path / "units.json"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(FAKE_SYSTEMCTL % (sys.executable, str(answers)))
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bin_dir)

    def answer(unit, enabled, active):
        state = json.loads(answers.read_text()) if answers.exists() else {}
        state[unit] = {"is-enabled": enabled, "is-active": active}
        answers.write_text(json.dumps(state))

    answer(UNIT, "enabled", "active")
    return answer


@pytest.fixture
def phase(tmp_path):
    """A phase owning two files, one written, one not (yet)."""
    owned, later = tmp_path / "etc" / "blacklist-nouveau.conf", tmp_path / "etc" / "grub.cfg"
    owned.parent.mkdir()
    owned.write_text("blacklist nouveau\n")
    stamp = tmp_path / "state" / "phases" / "driver.json"
    return {"owned": owned, "later": later, "stamp": stamp,
            "args": {"path": str(stamp), "phase": "driver", "inputs": INPUTS, "files": [str(owned), str(later)],
                     "units": [UNIT], "tag": "driver", "run_tags": ["all"]}}


def _run(run_module, phase, **changes):
    return run_module(phase_stamp.main, dict(phase["args"], **changes))


def test_a_first_run_runs_the_phase_then_records_it_and_a_rerun_skips_it(run_module, units, phase):
    first = _run(run_module, phase)
    assert first["changed"] is False and first["unchanged"] is False
    assert first["reason"] == "phase driver runs: no stamp is recorded (a first run, or the phase never ran through)"
    assert not phase["stamp"].exists()
    written = _run(run_module, phase, state="recorded")
    assert written["changed"] is True and written["reason"] == "phase driver: stamp recorded"
    stamp = json.loads(phase["stamp"].read_text())
    assert stamp["inputs"] == INPUTS and stamp["units"] == {UNIT: "enabled/active"}
    # sha256 of "blacklist nouveau\n", as sha256sum prints it.
    assert stamp["files"] == {str(phase["owned"]): "b3dbf277d507c2a3659775968d3e57bd211b58927a62787706e0e1952e959dac",
                              str(phase["later"]): "absent"}
    assert oct(os.stat(phase["stamp"]).st_mode & 0o777) == "0o644"
    again = _run(run_module, phase, state="recorded")
    assert again["changed"] is False and again["reason"] == "phase driver: stamp already recorded"
    rerun = _run(run_module, phase)
    assert rerun["unchanged"] is True and rerun["changed"] is False
    assert rerun["reason"] == "phase driver skipped: its inputs, its 2 files and 1 units are as it left them"


def test_a_file_edited_by_hand_or_a_unit_stopped_runs_the_phase(run_module, units, phase):
    _run(run_module, phase, state="recorded")
    phase["owned"].write_text("# blacklist nouveau\n")
    assert _run(run_module, phase)["reason"] == (
        "phase driver runs: %s was changed since it last ran through" % phase["owned"])
    phase["owned"].write_text("blacklist nouveau\n")
    units(UNIT, "enabled", "inactive")
    assert _run(run_module, phase)["reason"] == (
        "phase driver runs: unit %s is enabled/inactive, was enabled/active since it last ran through" % UNIT)
    units(UNIT, "enabled", "active")
    phase["later"].write_text("GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt\"\n")
    assert _run(run_module, phase)["reason"] == (
        "phase driver runs: %s appeared since it last ran through" % phase["later"])


def test_a_directory_where_an_owned_file_was_counts_as_the_file_gone(run_module, units, phase):
    # Someone replaced the file with a directory: no hash to take, the phase runs and puts the file back.
    _run(run_module, phase, state="recorded")
    phase["owned"].unlink()
    phase["owned"].mkdir()
    assert _run(run_module, phase)["reason"] == (
        "phase driver runs: %s was removed since it last ran through" % phase["owned"])


def test_other_inputs_a_named_tag_or_skipping_off_run_the_phase(run_module, units, phase):
    _run(run_module, phase, state="recorded")
    assert _run(run_module, phase, inputs="d" * 64)["reason"] == (
        "phase driver runs: its inputs (variables or code) changed since it last ran through")
    assert _run(run_module, phase, run_tags=["driver"])["reason"] == (
        "phase driver runs: asked for by name (--tags driver)")
    assert _run(run_module, phase, skip_unchanged=False)["reason"] == (
        "phase driver runs: skipping unchanged phases is off (sm120_skip_unchanged: false)")


def test_check_mode_writes_nothing_and_diff_mode_shows_the_stamp(run_module, units, phase):
    result = _run(run_module, phase, state="recorded", _ansible_check_mode=True, _ansible_diff=True)
    assert result["changed"] is True and not phase["stamp"].parent.exists()
    assert result["diff"]["before"] == "" and json.loads(result["diff"]["after"])["inputs"] == INPUTS
    assert result["diff"]["after_header"] == str(phase["stamp"])


def test_a_stamp_that_cannot_be_written_fails_naming_the_directory_and_changes_nothing(run_module, units, phase):
    blocker = phase["stamp"].parent
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a file where the stamp's directory should be\n")
    # Compared, there is no stamp: the phase runs.
    assert _run(run_module, phase)["unchanged"] is False
    with pytest.raises(ModuleFail, match="phase driver: cannot write its stamp in %s" % blocker):
        _run(run_module, phase, state="recorded")
    assert blocker.read_text() == "a file where the stamp's directory should be\n"
    assert os.listdir(str(blocker.parent)) == ["phases"]


def test_units_without_systemctl_are_refused_naming_the_phase(run_module, phase, monkeypatch, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(phase_stamp.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None)
    with pytest.raises(ModuleFail, match="phase driver keeps units nvidia-persistenced.service but systemctl is not on "
                                         "the PATH of the target"):
        _run(run_module, phase)

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A phase's stamp: skipped only where its inputs, every file and every unit are as it left them."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.phase_stamp import (
    PhaseStampError,
    decide,
    document,
    fingerprint,
    forced_by,
    parse,
    render,
)

NOUVEAU = "/etc/modprobe.d/blacklist-nouveau.conf"
UNIT_FILE = "/etc/systemd/system/nvidia-persistenced.service"
INPUTS = "a" * 64


def host(nouveau="1f2e", unit_file="9a8b", persistenced=("enabled", "active")):
    return fingerprint({NOUVEAU: nouveau, UNIT_FILE: unit_file}, {"nvidia-persistenced.service": persistenced})


def recorded(**changes):
    return render(document("driver", INPUTS, host(**changes)))


def test_the_host_side_is_each_files_digest_or_absent_and_each_units_two_answers():
    assert fingerprint({NOUVEAU: "1f2e", UNIT_FILE: None}, {"nvidia-persistenced.service": ("enabled", "inactive"),
                                                            "x.service": ("", "")}) == {
        "files": {NOUVEAU: "1f2e", UNIT_FILE: "absent"},
        "units": {"nvidia-persistenced.service": "enabled/inactive", "x.service": "unknown/unknown"}}


def test_the_same_state_is_the_same_bytes_and_holds_no_time():
    assert recorded() == recorded()
    assert render(document("driver", INPUTS, host())) == (
        '{\n  "files": {\n    "/etc/modprobe.d/blacklist-nouveau.conf": "1f2e",\n'
        '    "/etc/systemd/system/nvidia-persistenced.service": "9a8b"\n  },\n  "inputs": "%s",\n'
        '  "phase": "driver",\n  "units": {\n    "nvidia-persistenced.service": "enabled/active"\n  },\n'
        '  "version": 1\n}\n' % INPUTS)


def test_a_phase_whose_inputs_files_and_units_are_as_recorded_is_skipped():
    assert decide("driver", recorded(), INPUTS, host()) == {
        "unchanged": True, "reason": "phase driver skipped: its inputs, its 2 files and 1 units are as it left them"}


@pytest.mark.parametrize("text, reason", [
    (None, "phase driver runs: no stamp is recorded (a first run, or the phase never ran through)"),
    ("{not json", "phase driver runs: the stamp cannot be read (Expecting property name enclosed in double quotes: "
                  "line 1 column 2 (char 1))"),
    ('{"version": 0}', "phase driver runs: the stamp is of another format (version 0, this collection writes 1)"),
    ("[]", "phase driver runs: the stamp is of another format (version None, this collection writes 1)"),
])
def test_without_a_readable_stamp_the_phase_runs(text, reason):
    assert decide("driver", text, INPUTS, host()) == {"unchanged": False, "reason": reason}


def test_other_inputs_run_the_phase():
    assert decide("driver", recorded(), "b" * 64, host()) == {
        "unchanged": False,
        "reason": "phase driver runs: its inputs (variables or code) changed since it last ran through"}


@pytest.mark.parametrize("now, reason", [
    (host(nouveau="7777"), "/etc/modprobe.d/blacklist-nouveau.conf was changed"),
    (host(unit_file=None), "/etc/systemd/system/nvidia-persistenced.service was removed"),
    (host(persistenced=("enabled", "inactive")), "unit nvidia-persistenced.service is enabled/inactive, was "
                                                 "enabled/active"),
    (host(nouveau="7777", persistenced=("disabled", "inactive")),
     "/etc/modprobe.d/blacklist-nouveau.conf was changed; unit nvidia-persistenced.service is disabled/inactive, was "
     "enabled/active"),
])
def test_a_file_or_unit_changed_by_hand_runs_the_phase_and_is_named(now, reason):
    assert decide("driver", recorded(), INPUTS, now) == {
        "unchanged": False, "reason": "phase driver runs: %s since it last ran through" % reason}


def test_a_file_that_appeared_or_was_not_recorded_runs_the_phase():
    assert decide("driver", recorded(unit_file=None), INPUTS, host())["reason"] == (
        "phase driver runs: /etc/systemd/system/nvidia-persistenced.service appeared since it last ran through")
    wider = fingerprint({NOUVEAU: "1f2e", UNIT_FILE: "9a8b", "/etc/kernel/cmdline": "55"},
                        {"nvidia-persistenced.service": ("enabled", "active")})
    assert decide("driver", recorded(), INPUTS, wider)["reason"] == (
        "phase driver runs: /etc/kernel/cmdline was not recorded since it last ran through")


def test_a_phase_asked_for_by_name_or_with_skipping_off_runs_whatever_the_stamp_says():
    assert forced_by("driver", ["driver", "sglang"], True) == "asked for by name (--tags driver)"
    assert forced_by("driver", ["all"], False) == "skipping unchanged phases is off (sm120_skip_unchanged: false)"
    assert forced_by("driver", ["all"], True) == "" and forced_by("driver", ["tagged", "smoke"], True) == ""
    assert decide("driver", recorded(), INPUTS, host(), "asked for by name (--tags driver)") == {
        "unchanged": False, "reason": "phase driver runs: asked for by name (--tags driver)"}


@pytest.mark.parametrize("call, message", [
    (lambda: forced_by("driver", "driver", True), "run_tags must be a list of tags"),
    (lambda: forced_by("driver", [], "yes"), "skip_unchanged must be true or false, got 'yes'"),
    (lambda: fingerprint({"etc/x": "1"}, {}), "a phase's file must be an absolute path, got 'etc/x'"),
    (lambda: fingerprint({}, {"x.service": "active"}), "unit x.service: expected (enabled, active), got 'active'"),
    (lambda: document("driver", "", host()), "phase driver: the digest of its inputs is empty"),
    (lambda: document("", INPUTS, host()), "the phase's name is empty"),
])
def test_bad_input_is_refused_naming_it(call, message):
    with pytest.raises(PhaseStampError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_a_recorded_stamp_reads_back():
    stamp, problem = parse(recorded())
    assert problem == "" and stamp["inputs"] == INPUTS and stamp["units"] == {
        "nvidia-persistenced.service": "enabled/active"}

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.source_patch import (
    ABSENT,
    PRESENT,
    PatchError,
    attribute_drift,
    check_edits,
    check_file_args,
    check_original,
    decode_source,
    edit_state,
    lock_timeout_message,
    merge_context,
    original_text,
    render,
    sha256_hex,
    validate_argv,
    validate_not_run_message,
    wait_for_lock,
    wanted_attributes,
    wanted_id,
    wanted_mode,
)

# The shape of SGLang 0.5.9's communicator.py around the fusion gate.
SOURCE = (
    "from sglang.srt.utils import (\n"
    "    is_sm90_supported,\n"
    "    is_sm100_supported,\n"
    ")\n"
    "\n"
    "_is_sm100_supported = _is_cuda and is_sm100_supported()\n"
    "\n"
    "def apply_flashinfer_allreduce_fusion(batch_size: int):\n"
    "    return (\n"
    "        (_is_sm90_supported or _is_sm100_supported)\n"
    "        and batch_size > 0\n"
    "    )\n"
)
IMPORT = {"id": "import", "old": "    is_sm100_supported,\n)\n",
          "new": "    is_sm100_supported,\n    is_sm120_supported,\n)\n"}
CACHE = {"id": "cache", "old": "_is_sm100_supported = _is_cuda and is_sm100_supported()\n",
         "new": "_is_sm100_supported = _is_cuda and is_sm100_supported()\n"
                "_is_sm120_supported = _is_cuda and is_sm120_supported()\n"}
WIDEN = {"id": "widen", "old": "(_is_sm90_supported or _is_sm100_supported)\n",
         "new": "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n"}
EDITS = [IMPORT, CACHE, WIDEN]


def test_present_again_absent_again_gives_the_original_text():
    patched, outcome = render(SOURCE, EDITS, PRESENT)
    assert outcome == {"applied": ["import", "cache", "widen"], "reverted": [], "skipped": []}
    assert "or _is_sm120_supported)" in patched and "    is_sm120_supported,\n" in patched

    again, outcome = render(patched, EDITS, PRESENT)
    assert again == patched
    assert outcome["applied"] == [] and sorted(outcome["skipped"]) == ["cache", "import", "widen"]

    reverted, outcome = render(patched, EDITS, ABSENT)
    assert outcome["reverted"] == ["widen", "cache", "import"]
    assert reverted == SOURCE

    again, outcome = render(reverted, EDITS, ABSENT)
    assert again == SOURCE and outcome["reverted"] == []


def test_edit_state_of_an_insertion_counts_the_anchor_inside_new():
    assert edit_state(SOURCE, CACHE) == ABSENT
    assert edit_state(render(SOURCE, [CACHE])[0], CACHE) == PRESENT


def test_edit_state_when_new_is_inside_old():
    # A deletion: old contains new, so the pristine text contains new once already.
    narrow = {"id": "narrow", "old": "(_is_sm90_supported or _is_sm100_supported)",
              "new": "(_is_sm90_supported)"}
    source = "x = (_is_sm90_supported or _is_sm100_supported)\n"
    assert edit_state(source, narrow) == ABSENT
    shrunk, _outcome = render(source, [narrow])
    assert shrunk == "x = (_is_sm90_supported)\n"
    assert edit_state(shrunk, narrow) == PRESENT
    assert render(shrunk, [narrow], ABSENT)[0] == source


def test_old_missing_names_the_edit_the_file_and_the_counts():
    with pytest.raises(PatchError, match=r"edit 'widen' on comm\.py: its old text occurs 0 times and its new text 0"):
        render(SOURCE.replace("_is_sm100_supported)\n", "_is_sm100_supported )\n"), EDITS, PRESENT, "comm.py")


def test_old_ambiguous_fails_before_anything_is_returned():
    doubled = SOURCE + "        (_is_sm90_supported or _is_sm100_supported)\n"
    with pytest.raises(PatchError, match=r"'widen'.*old text occurs 2 times"):
        render(doubled, EDITS, PRESENT)


def test_new_present_twice_is_refused_on_revert():
    patched, _outcome = render(SOURCE, [WIDEN])
    with pytest.raises(PatchError, match="new text 2 times"):
        render(patched + WIDEN["new"], [WIDEN], ABSENT)


def test_an_edit_that_creates_a_second_occurrence_is_refused():
    # Replacing "a" by "aa" inside "a b": after the change "a" occurs twice, not via new.
    with pytest.raises(PatchError):
        render("a b a2", [{"id": "x", "old": "b", "new": "a"}])


def test_per_edit_state_turns_one_edit_off_and_another_on_in_one_pass():
    patched, _outcome = render(SOURCE, [IMPORT, CACHE])
    mixed = [dict(IMPORT, state=ABSENT), dict(CACHE, state=ABSENT), WIDEN]
    out, outcome = render(patched, mixed, PRESENT)
    assert outcome == {"applied": ["widen"], "reverted": ["cache", "import"], "skipped": []}
    assert out == render(SOURCE, [WIDEN])[0]


def test_original_text_and_check_original():
    sha = sha256_hex(SOURCE.encode())
    partly, _outcome = render(SOURCE, [IMPORT])
    assert original_text(partly, EDITS) == SOURCE
    check_original(partly, EDITS, sha.upper())
    foreign = partly.replace("batch_size > 0", "batch_size > 1")
    with pytest.raises(PatchError, match="edited by something else"):
        check_original(foreign, EDITS, sha, "comm.py")


def test_check_original_reports_an_undecidable_file():
    with pytest.raises(PatchError, match="refusing to touch it"):
        check_original("nothing here\n", EDITS, "0" * 64)


@pytest.mark.parametrize("edits, message", [
    ([{"id": "", "old": "a", "new": "b"}], "needs an id"),
    ([{"id": "a", "old": "x", "new": "y"}, {"id": "a", "old": "z", "new": "w"}], "used twice"),
    ([{"id": "a", "old": "", "new": "y"}], "empty old"),
    ([{"id": "a", "old": "x", "new": "x"}], "new equal to old"),
    ([{"id": "a", "old": "x", "new": None}], "no new text"),
    ([{"id": "a", "old": "x", "new": "y", "state": "gone"}], "state 'gone'"),
])
def test_check_edits_refuses_undecidable_edit_lists(edits, message):
    with pytest.raises(PatchError, match=message):
        check_edits(edits)


def test_decode_source_refuses_non_utf8():
    assert decode_source("é\n".encode(), "f.py") == "é\n"
    with pytest.raises(PatchError, match=r"f\.py is not UTF-8"):
        decode_source(b"\xff\xfe", "f.py")


def test_line_endings_and_trailing_bytes_survive_a_round_trip():
    crlf = SOURCE.replace("\n", "\r\n")
    edits = [{k: (v.replace("\n", "\r\n") if k != "id" else v) for k, v in e.items()} for e in EDITS]
    patched, _outcome = render(crlf, edits)
    assert render(patched, edits, ABSENT)[0] == crlf


def test_validate_argv_puts_the_file_in_every_placeholder_and_keeps_quoted_words_whole():
    assert validate_argv("python3 -c 'import sys' %s --out=%s.log", "/t/x") == [
        "python3", "-c", "import sys", "/t/x", "--out=/t/x.log"]
    with pytest.raises(PatchError, match="validate must contain %s"):
        validate_argv("true", "/t/x")
    with pytest.raises(PatchError, match=r"validate is not a command line \(No closing quotation\)"):
        validate_argv("python3 'x %s", "/t/x")


def test_the_message_for_a_validate_that_cannot_run_names_the_command_the_string_and_the_file():
    msg = validate_not_run_message("pyhton3 -m py_compile %s", "pyhton3", "No such file or directory", "c.py")
    assert msg.startswith("validate could not run pyhton3: No such file or directory (validate: pyhton3 -m py_compile %s)")
    assert "c.py is unchanged" in msg


def symbolic_stand_in(text):
    # Stands in for AnsibleModule._symbolic_mode_to_octal, which raises ValueError on a bad symbolic mode.
    if text != "u=rw":
        raise ValueError("bad symbolic permission for mode: %s" % text)
    return 0o600


@pytest.mark.parametrize("mode, bits", [(None, None), ("0644", 0o644), ("644", 0o644), ("0o4755", 0o4755),
                                        (0o600, 0o600), ("u=rw", 0o600)])
def test_wanted_mode_reads_octal_integers_and_symbolic_modes(mode, bits):
    assert wanted_mode(mode, symbolic_stand_in, "c.py") == bits


@pytest.mark.parametrize("mode, message", [
    ("0999", r"mode '0999' for c\.py is neither octal \(0644\) nor symbolic .*bad symbolic permission"),
    ("u=rwz", r"mode 'u=rwz' for c\.py is neither octal"),
    ("017777", r"mode '017777' for c\.py is not a permission between 0000 and 07777"),
    (-1, r"mode -1 for c\.py is not a permission"),
])
def test_wanted_mode_refuses_what_chmod_cannot_take(mode, message):
    with pytest.raises(PatchError, match=message + ".*c\\.py is unchanged"):
        wanted_mode(mode, symbolic_stand_in, "c.py")


def test_wanted_id_takes_numbers_as_they_are_and_looks_names_up():
    users = {"sglang": 1001}.__getitem__
    assert wanted_id(None, users, "owner") is None
    assert wanted_id("0", users, "owner") == 0
    assert wanted_id("sglang", users, "owner") == 1001
    with pytest.raises(PatchError, match=r"owner 'sglnag' for c\.py does not exist on this host \(not in the passwd"):
        wanted_id("sglnag", users, "owner", "c.py")
    with pytest.raises(PatchError, match=r"group 'gpu' for c\.py does not exist .*group database.*numeric id"):
        wanted_id("gpu", {}.__getitem__, "group", "c.py")


@pytest.mark.parametrize("attributes, wanted", [(None, None), ("", None), ("i", "i"), ("+i", "+i"), ("-ae", "-ae")])
def test_wanted_attributes_takes_chattr_flags(attributes, wanted):
    assert wanted_attributes(attributes) == wanted


@pytest.mark.parametrize("attributes", ["+Q", "=i", "immutable"])
def test_wanted_attributes_refuses_flags_chattr_cannot_set(attributes):
    with pytest.raises(PatchError, match="hold flags chattr cannot set"):
        wanted_attributes(attributes, "c.py")


def test_check_file_args_resolves_every_attribute_and_stops_at_the_first_bad_one():
    file_args = {"mode": "u=rw", "owner": "sglang", "group": "7", "attributes": "+i"}
    users, groups = {"sglang": 1001}.__getitem__, {}.__getitem__
    assert check_file_args(file_args, symbolic_stand_in, users, groups) == {
        "mode": 0o600, "uid": 1001, "gid": 7, "attributes": "+i"}
    assert check_file_args({}, symbolic_stand_in, users, groups) == {
        "mode": None, "uid": None, "gid": None, "attributes": None}
    with pytest.raises(PatchError, match="group 'gpu'"):
        check_file_args(dict(file_args, group="gpu"), symbolic_stand_in, users, groups)


def test_merge_context_puts_requested_fields_over_the_current_ones():
    current = ["system_u", "object_r", "lib_t", "s0"]
    assert merge_context(current, [None, None, "usr_t", None]) == ["system_u", "object_r", "usr_t", "s0"]
    assert merge_context(current, [None, None, None]) == current
    assert merge_context([None, None, None], [None, None, None]) == [None, None, None]


def stat_of(uid, gid, mode):
    # Stands in for os.stat_result: the three fields attribute_drift reads.
    return SimpleNamespace(st_uid=uid, st_gid=gid, st_mode=0o100000 | mode)


def test_attribute_drift_finds_what_the_move_lost_and_sets_the_mode_again_after_a_chown():
    assert attribute_drift(stat_of(1001, 1001, 0o644), stat_of(1001, 1001, 0o644)) == {}
    assert attribute_drift(stat_of(1001, 1001, 0o600), stat_of(1001, 1001, 0o644)) == {"mode": 0o600}
    assert attribute_drift(stat_of(1001, 100, 0o4755), stat_of(0, 0, 0o4755)) == {"owner": (1001, 100), "mode": 0o4755}


class FakeClock:
    """Stands in for time.monotonic and time.sleep: sleeping moves the clock on."""

    def __init__(self):
        self.now, self.sleeps = 100.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_for_lock_polls_with_growing_pauses_until_the_lock_is_free():
    clock, answers = FakeClock(), iter([False, False, False, True])
    assert wait_for_lock(lambda: next(answers), 10, clock, clock.sleep)
    assert clock.sleeps == [0.05, 0.1, 0.2]


def test_wait_for_lock_gives_up_at_the_deadline_and_never_sleeps_past_it():
    clock = FakeClock()
    assert not wait_for_lock(lambda: False, 3, clock, clock.sleep)
    assert clock.now == pytest.approx(103.0) and max(clock.sleeps) == 1.0


def test_wait_for_lock_with_timeout_zero_tries_once():
    clock, tries = FakeClock(), []
    assert not wait_for_lock(lambda: tries.append(1) and False, 0, clock, clock.sleep)
    assert tries == [1] and clock.sleeps == []
    with pytest.raises(PatchError, match="lock_timeout must be 0 or more seconds, got -5"):
        wait_for_lock(lambda: True, -5, clock, clock.sleep)


def test_the_lock_timeout_message_names_the_lock_the_file_the_timeout_and_how_to_find_the_holder():
    msg = lock_timeout_message("/run/lock/sm120-source-patch-ab.lock", 300, "c.py")
    assert "/run/lock/sm120-source-patch-ab.lock on c.py" in msg and "lock_timeout=300 s" in msg
    assert "nothing was changed" in msg and "fuser -v /run/lock/sm120-source-patch-ab.lock" in msg

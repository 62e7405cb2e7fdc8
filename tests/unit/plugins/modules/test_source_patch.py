# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import shutil
import stat
import sys
import threading
import time

import pytest
from ansible.module_utils import basic

from ansible_collections.sm120.sglang.plugins.modules import source_patch
from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail

SOURCE = (
    "from sglang.srt.utils import (\n"
    "    is_sm90_supported,\n"
    "    is_sm100_supported,\n"
    ")\n"
    "_is_sm100_supported = _is_cuda and is_sm100_supported()\n"
    "ok = (_is_sm90_supported or _is_sm100_supported)\n"
).encode()
EDITS = [
    {"id": "import", "old": "    is_sm100_supported,\n)\n",
     "new": "    is_sm100_supported,\n    is_sm120_supported,\n)\n"},
    {"id": "cache", "old": "_is_sm100_supported = _is_cuda and is_sm100_supported()\n",
     "new": "_is_sm100_supported = _is_cuda and is_sm100_supported()\n"
            "_is_sm120_supported = _is_cuda and is_sm120_supported()\n"},
    {"id": "widen", "old": "(_is_sm90_supported or _is_sm100_supported)\n",
     "new": "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n"},
]
ORIGINAL_SHA = hashlib.sha256(SOURCE).hexdigest()
PY_COMPILE = "%s -m py_compile %%s" % sys.executable


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "communicator.py"
    path.write_bytes(SOURCE)
    return path


def call(run_module, path, **args):
    module_args = {"path": str(path), "edits": EDITS, "original_sha256": ORIGINAL_SHA, "validate": PY_COMPILE}
    module_args.update(args)
    return run_module(source_patch.main, module_args)


def test_the_full_cycle_of_ansible_posix_patch(run_module, target):
    checked = call(run_module, target, _ansible_check_mode=True)
    assert checked["changed"] and checked["applied"] == ["import", "cache", "widen"]
    assert target.read_bytes() == SOURCE

    applied = call(run_module, target)
    assert applied["changed"] and applied["applied"] == checked["applied"]
    assert applied["sha256_before"] == ORIGINAL_SHA
    assert applied["sha256_after"] == hashlib.sha256(target.read_bytes()).hexdigest() == checked["sha256_after"]
    assert b"or _is_sm120_supported)" in target.read_bytes()

    again = call(run_module, target)
    assert not again["changed"] and sorted(again["skipped"]) == ["cache", "import", "widen"]

    patched = target.read_bytes()
    checked = call(run_module, target, state="absent", _ansible_check_mode=True)
    assert checked["changed"] and checked["reverted"] == ["widen", "cache", "import"]
    assert target.read_bytes() == patched

    reverted = call(run_module, target, state="absent")
    assert reverted["changed"] and reverted["sha256_after"] == ORIGINAL_SHA

    again = call(run_module, target, state="absent")
    assert not again["changed"]
    assert target.read_bytes() == SOURCE


def test_diff_and_backup(run_module, target):
    result = call(run_module, target, backup=True, _ansible_diff=True)
    assert result["diff"]["before"] == SOURCE.decode()
    assert result["diff"]["after"] == target.read_text()
    assert result["diff"]["before_header"] == "%s (content)" % target
    assert open(result["backup_file"], "rb").read() == SOURCE
    assert "backup_file" not in call(run_module, target, backup=True)


def test_file_attributes_are_applied(run_module, target):
    result = call(run_module, target, mode="0600")
    assert result["changed"] and oct(os.stat(target).st_mode & 0o777) == "0o600"


def assert_fails(run_module, target, match, **args):
    before = target.read_bytes() if target.exists() else None
    with pytest.raises(ModuleFail, match=match) as failure:
        call(run_module, target, **args)
    if before is not None:
        assert target.read_bytes() == before, "a failed call must leave the file untouched"
    return failure.value.result


def test_old_missing(run_module, target):
    target.write_bytes(SOURCE.replace(b"_is_sm100_supported)\n", b"_is_sm100_supported )\n"))
    assert_fails(run_module, target, r"'widen'.*occurs 0 times", original_sha256=None)


def test_old_ambiguous_applies_no_edit_at_all(run_module, target):
    target.write_bytes(SOURCE + b"again = (_is_sm90_supported or _is_sm100_supported)\n")
    result = assert_fails(run_module, target, r"'widen'.*occurs 2 times", original_sha256=None)
    assert result["applied"] == []


def test_file_missing(run_module, tmp_path):
    assert_fails(run_module, tmp_path / "gone.py", "does not exist")


def test_not_utf8(run_module, target):
    target.write_bytes(SOURCE + b"\xff\n")
    assert_fails(run_module, target, "is not UTF-8", original_sha256=None)


def test_validate_fails(run_module, target):
    broken = dict(EDITS[2], new="(_is_sm90_supported or\n")
    assert_fails(run_module, target, r"validate failed \(rc 1\)", edits=[broken])


def test_validate_without_placeholder(run_module, target):
    assert_fails(run_module, target, "validate must contain %s", validate="true")


def test_read_only_file(run_module, target):
    os.chmod(target, 0o444)
    assert_fails(run_module, target, r"is read-only \(mode 0444\)")


def test_file_changed_between_read_and_write(run_module, target):
    # The validate command stands in for another process writing the file mid-run.
    intruder = "%s -c \"open('%s', 'a').write('# foreign\\n')\" %%s" % (sys.executable, target)
    with pytest.raises(ModuleFail, match="changed while it was being patched"):
        call(run_module, target, validate=intruder)
    assert target.read_bytes() == SOURCE + b"# foreign\n"


def test_foreign_edit_is_refused_unless_forced(run_module, target):
    target.write_bytes(SOURCE.replace(b"ok =", b"ok  ="))
    assert_fails(run_module, target, "edited by something else")
    forced = call(run_module, target, force=True)
    assert forced["changed"] and forced["applied"] == ["import", "cache", "widen"]


def test_absent_must_give_back_the_original(run_module, target):
    call(run_module, target, original_sha256=None, edits=EDITS[:1])
    with pytest.raises(ModuleFail, match="with these edits reverted has sha256"):
        call(run_module, target, state="absent", original_sha256="0" * 64)


def test_bad_edit_list_is_refused_before_reading(run_module, target):
    assert_fails(run_module, target, "used twice", edits=[EDITS[0], EDITS[0]])


def test_a_second_run_waits_for_the_lock_of_the_first(run_module, target):
    # The test holds the lock the way a concurrent run of the module would.
    results = []
    with open(source_patch._lock_path(str(target)), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        worker = threading.Thread(target=lambda: results.append(call(run_module, target)))
        worker.start()
        worker.join(0.5)
        assert worker.is_alive() and target.read_bytes() == SOURCE, "the run must wait while the lock is held"
    worker.join(10)
    assert results and results[0]["changed"]


def test_lock_file_cannot_be_opened(run_module, target, monkeypatch, tmp_path):
    monkeypatch.setattr(source_patch, "_lock_path", lambda path: str(tmp_path / "missing-dir" / "x.lock"))
    assert_fails(run_module, target, "cannot open the lock file .*missing-dir")


def test_unreadable_file(run_module, target, monkeypatch):
    # Root reads any file whatever its mode, so the refusal is injected at open().
    real_open = open

    def refusing_open(path, *args, **kwargs):
        if str(path) == str(target):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(source_patch, "open", refusing_open, raising=False)
    assert_fails(run_module, target, "cannot read .*communicator.py: .*Permission denied")


def test_a_missing_validate_command_is_named_with_the_validate_string(run_module, target):
    assert_fails(run_module, target, r"validate could not run /no/such/python: No such file or directory "
                 r"\(validate: /no/such/python -m py_compile %s\); .*communicator.py is unchanged",
                 validate="/no/such/python -m py_compile %s")


def test_a_validate_string_that_is_not_a_command_line_is_refused(run_module, target):
    assert_fails(run_module, target, "validate is not a command line", validate="python3 'x %s")


def file_state(path):
    st = os.stat(path)
    return path.read_bytes(), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_ino


@pytest.mark.parametrize("file_args, message", [
    ({"mode": "0999"}, r"mode '0999' for .* is neither octal"),
    ({"mode": "u=rwz"}, r"mode 'u=rwz' for .* is neither octal"),
    ({"owner": "no-such-user-sm120"}, r"owner 'no-such-user-sm120' for .* does not exist on this host"),
    ({"group": "no-such-group-sm120"}, r"group 'no-such-group-sm120' for .* does not exist on this host"),
    ({"attributes": "+Q"}, r"attributes '\+Q' for .* hold flags chattr cannot set \(Q\)"),
], ids=["mode 0999", "mode u=rwz", "unknown owner", "unknown group", "unknown chattr flag"])
@pytest.mark.parametrize("scenario", ["an edit to make", "the edits in place", "check mode"])
def test_a_bad_file_attribute_fails_before_the_file_is_touched(run_module, target, file_args, message, scenario):
    if scenario == "the edits in place":
        call(run_module, target)
    os.chmod(target, 0o640)
    before = file_state(target)
    args = dict(file_args, _ansible_check_mode=scenario == "check mode")
    result = assert_fails(run_module, target, message + ".* is unchanged", **args)
    assert not result["changed"]
    assert file_state(target) == before, "bytes, mode, owner and inode must be the original ones"


def test_a_mode_given_with_an_edit_lands_with_the_content(run_module, target):
    os.chmod(target, 0o644)
    result = call(run_module, target, mode="u=rw,g=,o=")
    assert result["changed"] and result["applied"] == ["import", "cache", "widen"]
    assert b"or _is_sm120_supported)" in target.read_bytes()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert not call(run_module, target, mode="0600")["changed"]


def test_an_attribute_only_change_is_reported_and_check_mode_leaves_it_alone(run_module, target):
    call(run_module, target)
    os.chmod(target, 0o644)
    patched = target.read_bytes()
    checked = call(run_module, target, mode="0600", _ansible_check_mode=True)
    assert checked["changed"] and stat.S_IMODE(os.stat(target).st_mode) == 0o644
    done = call(run_module, target, mode="0600")
    assert done["changed"] and done["applied"] == [] and stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert not call(run_module, target, mode="0600")["changed"]
    assert target.read_bytes() == patched


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


@needs_root
def test_the_patched_file_keeps_its_owner_group_and_mode(run_module, target):
    os.chown(target, 65534, 65534)
    os.chmod(target, 0o664)
    call(run_module, target)
    _content, mode, uid, gid, _inode = file_state(target)
    assert (mode, uid, gid) == (0o664, 65534, 65534)


@needs_root
def test_an_owner_and_group_given_with_an_edit_land_with_the_content(run_module, target):
    result = call(run_module, target, owner="65534", group="65534", mode="0640")
    content, mode, uid, gid, _inode = file_state(target)
    assert result["changed"] and b"or _is_sm120_supported)" in content and (mode, uid, gid) == (0o640, 65534, 65534)


def test_an_owner_the_temporary_copy_cannot_take_fails_before_the_move(run_module, target, monkeypatch):
    # Stands in for a user who may not give files away: set_owner_if_different's lchown is refused.
    def refusing_lchown(path, uid, gid):
        raise PermissionError(errno.EPERM, "Operation not permitted", path)

    monkeypatch.setattr(os, "lchown", refusing_lchown)
    before = file_state(target)
    assert_fails(run_module, target, "chown failed", owner="65534")
    assert file_state(target) == before


def test_a_temporary_copy_that_cannot_take_the_owner_of_the_file_fails_naming_it(run_module, target, monkeypatch):
    # Stands in for a filesystem that refuses chown for another reason than permission.
    def failing_chown(path, uid, gid):
        raise OSError(errno.EIO, "Input/output error", path)

    monkeypatch.setattr(os, "chown", failing_chown)
    assert_fails(run_module, target, "cannot give the patched copy the owner of .*Input/output error.* is unchanged")


def writes_in_place(self, src, dest, unsafe_writes=False, keep_dest_attrs=True):
    # Stands in for atomic_move's unsafe_writes fallback, which writes into the old inode and keeps its mode.
    shutil.copyfile(src, dest)
    os.unlink(src)


def test_attributes_the_move_loses_are_set_again(run_module, target, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "atomic_move", writes_in_place)
    os.chmod(target, 0o644)
    assert call(run_module, target, mode="0600")["changed"]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600 and b"or _is_sm120_supported)" in target.read_bytes()


def test_attributes_that_cannot_be_set_again_after_the_move_are_reported(run_module, target, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "atomic_move", writes_in_place)
    os.chmod(target, 0o644)
    real_chmod = os.chmod

    def refusing_chmod_of_target(path, mode, *args, **kwargs):
        if os.path.realpath(path) == os.path.realpath(target):
            raise PermissionError(errno.EPERM, "Operation not permitted", str(path))
        return real_chmod(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "chmod", refusing_chmod_of_target)
    with pytest.raises(ModuleFail, match=r"holds the patched content, but .*set owner \d+:\d+ and mode 0600 by hand"):
        call(run_module, target, mode="0600")


def test_a_lock_held_past_lock_timeout_fails_naming_the_lock_and_how_to_find_its_holder(run_module, target):
    # The test holds the lock the way a stuck run of the module would.
    lock_path = source_patch._lock_path(str(target))
    with open(lock_path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        started = time.monotonic()
        assert_fails(run_module, target, re.escape(lock_path) + r" .*lock_timeout=1 s; nothing was changed.*"
                     + re.escape("fuser -v " + lock_path), lock_timeout=1)
        waited = time.monotonic() - started
    assert 1 <= waited < 5


def test_a_negative_lock_timeout_is_refused(run_module, target):
    assert_fails(run_module, target, "lock_timeout must be 0 or more seconds, got -1", lock_timeout=-1)


def test_a_lock_that_cannot_be_taken_fails_naming_it(run_module, target, monkeypatch):
    # Stands in for a filesystem without flock support (ENOLCK on some NFS mounts).
    def no_locks(handle, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert_fails(run_module, target, r"cannot lock .*sm120-source-patch-.*\.lock: .*No locks available")

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
import threading

import pytest

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

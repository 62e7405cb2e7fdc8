# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Content-anchored, reversible edits of one text file.

An edit is ``{id, old, new}``: ``old`` must occur exactly once and becomes
``new``. Whether an edit is in place is decided by content, the way
ansible.posix.patch decides it: an edit is *applied* when reversing it would
succeed, *pristine* when applying it would succeed. ``old`` and ``new`` may
contain each other (an insertion is ``old: ANCHOR``, ``new: ANCHOR + text``),
so the counts below discount the occurrences of one inside the other.

Everything here is pure (read -> decide -> render); the module does the I/O.
The file-attribute, validate and lock helpers at the end take the lookups and
clocks they need as arguments, so they decide without touching the host.
"""

from __future__ import annotations

import hashlib
import shlex
import stat

PRESENT = "present"
ABSENT = "absent"


class PatchError(Exception):
    """An edit cannot be decided or done; the message names the edit and the fix."""


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def decode_source(data, path):
    """Bytes of a source file as text; refuses anything that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PatchError(
            "%s is not UTF-8 text (byte %d: %s); source_patch edits only UTF-8 source files"
            % (path, exc.start, exc.reason)
        )


def check_edits(edits):
    """Refuse edit lists that cannot be decided by content, before reading any file."""
    seen = set()
    for edit in edits:
        edit_id = edit.get("id")
        if not edit_id:
            raise PatchError("every edit needs an id, got %r" % (edit,))
        if edit_id in seen:
            raise PatchError("edit id %r is used twice; ids must be unique within one call" % edit_id)
        seen.add(edit_id)
        if not edit.get("old"):
            raise PatchError("edit %r has an empty old: give the exact snippet to replace" % edit_id)
        if edit["old"] == edit.get("new"):
            raise PatchError("edit %r has new equal to old: it would change nothing" % edit_id)
        if edit.get("new") is None:
            raise PatchError("edit %r has no new text" % edit_id)
        if edit.get("state") not in (None, PRESENT, ABSENT):
            raise PatchError("edit %r has state %r; use present or absent" % (edit_id, edit["state"]))


def edit_state(content, edit, path="<text>"):
    """Return PRESENT when the edit is in place, ABSENT when it can be applied.

    Raises PatchError naming the edit, the file and the counts otherwise.
    """
    old, new = edit["old"], edit["new"]
    count_old, count_new = content.count(old), content.count(new)
    # Occurrences that exist only because one snippet contains the other.
    old_inside_new, new_inside_old = new.count(old), old.count(new)
    if count_new == 1 and count_old == old_inside_new:
        return PRESENT
    if count_old == 1 and count_new == new_inside_old:
        return ABSENT
    problem = (
        "its old text occurs %d times and its new text %d times (to apply, old must occur "
        "exactly once; once applied, new occurs exactly once)" % (count_old, count_new)
    )
    raise PatchError(
        "edit %r on %s: %s; this file is not the release the edit was written for, "
        "or someone else edited it" % (edit["id"], path, problem)
    )


def _apply(content, edit):
    return content.replace(edit["old"], edit["new"], 1)


def _revert(content, edit):
    return content.replace(edit["new"], edit["old"], 1)


def render(content, edits, state=PRESENT, path="<text>"):
    """Return (new_content, outcome) for the edits, each at its own or the default state.

    outcome: ``applied``, ``reverted``, ``skipped`` (lists of edit ids). Edits go
    forward in order and backward in reverse order, so an edit may build on the
    text of the one before it and ``present`` then ``absent`` gives the same text.
    All edits are decided on the text as it stands at their turn; any failure
    raises before anything is returned, so a caller never holds a partial result.
    """
    outcome = {"applied": [], "reverted": [], "skipped": []}
    wanted = [(edit, edit.get("state") or state) for edit in edits]
    # Reversals first, last edit first; then applications in order.
    for edit, edit_wanted in reversed(wanted):
        if edit_wanted != ABSENT:
            continue
        if edit_state(content, edit, path) == PRESENT:
            content = _revert(content, edit)
            _expect(content, edit, ABSENT, path)
            outcome["reverted"].append(edit["id"])
        else:
            outcome["skipped"].append(edit["id"])
    for edit, edit_wanted in wanted:
        if edit_wanted != PRESENT:
            continue
        if edit_state(content, edit, path) == ABSENT:
            content = _apply(content, edit)
            _expect(content, edit, PRESENT, path)
            outcome["applied"].append(edit["id"])
        else:
            outcome["skipped"].append(edit["id"])
    return content, outcome


def _expect(content, edit, wanted, path):
    """After an edit, its own state must read back as wanted (no new ambiguity)."""
    try:
        got = edit_state(content, edit, path)
    except PatchError as exc:
        raise PatchError("after %s: %s" % ("applying" if wanted == PRESENT else "reverting", exc))
    if got != wanted:
        raise PatchError("edit %r on %s does not read back as %s after the change" % (edit["id"], path, wanted))


def original_text(content, edits, path="<text>"):
    """The file as it was before any of these edits: every edit reverted."""
    pristine, _outcome = render(content, [dict(edit, state=ABSENT) for edit in edits], ABSENT, path)
    return pristine


def check_original(content, edits, original_sha256, path="<text>"):
    """Refuse a file that is not the expected original plus (some of) these edits.

    With all edits reverted the text must hash to original_sha256 (for an
    installed wheel: the sha256 its RECORD holds). Anything else is a foreign
    edit or another release, and patching it would stack on unknown code.
    """
    try:
        pristine = original_text(content, edits, path)
    except PatchError as exc:
        raise PatchError("%s; refusing to touch it (set force to override)" % exc)
    got = sha256_hex(pristine.encode("utf-8"))
    if got != original_sha256.lower():
        raise PatchError(
            "%s with these edits reverted has sha256 %s, expected %s (the shipped file): "
            "it was edited by something else or belongs to another release; reinstall the "
            "package to restore it, or set force to patch it anyway" % (path, got, original_sha256)
        )


# Flags chattr(1) sets; lsattr shows a few more (E, I, N, ...) that only the kernel sets.
_CHATTR_FLAGS = frozenset("aAcCdDeFijmPsStTux")


def validate_argv(validate, tmp_path):
    """The validate command as an argv list, with %s standing for the file to check."""
    if "%s" not in validate:
        raise PatchError("validate must contain %%s for the file to check, got: %s" % validate)
    try:
        words = shlex.split(validate)
    except ValueError as exc:
        raise PatchError("validate is not a command line (%s): %s; quote it the way a shell would" % (exc, validate))
    return [word.replace("%s", tmp_path) for word in words]


def validate_not_run_message(validate, command, reason, path):
    return (
        "validate could not run %s: %s (validate: %s); %s is unchanged. Install the command or give its full path"
        % (command, reason, validate, path)
    )


def wanted_mode(mode, parse_symbolic, path="<file>"):
    """The permission bits O(mode) asks for (None for no mode), or PatchError before anything is written.

    parse_symbolic(text) turns a symbolic mode into bits relative to the file's
    current mode; the module passes AnsibleModule's own parser, so what passes
    here is exactly what set_mode_if_different will accept.
    """
    if mode is None:
        return None
    if isinstance(mode, int) and not isinstance(mode, bool):
        bits = mode
    else:
        try:
            bits = int(str(mode), 8)
        except ValueError:
            try:
                bits = parse_symbolic(str(mode))
            except Exception as exc:  # the parser raises ValueError, and KeyError or IndexError on odd input
                raise PatchError(
                    "mode %r for %s is neither octal (0644) nor symbolic (u=rw,g=r,o=r): %s; %s is unchanged"
                    % (mode, path, exc, path)
                )
    if not 0 <= bits <= 0o7777:
        raise PatchError("mode %r for %s is not a permission between 0000 and 07777; %s is unchanged"
                         % (mode, path, path))
    return bits


def wanted_id(name, lookup, kind, path="<file>"):
    """The numeric id O(owner) or O(group) names (None for none), or PatchError when the host has no such one."""
    if name is None:
        return None
    try:
        return int(name)
    except ValueError:
        pass
    try:
        return lookup(name)
    except KeyError:
        database = "passwd" if kind == "owner" else "group"
        raise PatchError(
            "%s %r for %s does not exist on this host (not in the %s database); %s is unchanged. "
            "Create it first, or give a numeric id" % (kind, name, path, database, path)
        )


def wanted_attributes(attributes, path="<file>"):
    """O(attributes) as chattr takes it, or PatchError for a flag chattr cannot set."""
    if not attributes:
        return None
    # set_attributes_if_different strips one leading + or -, and passes the rest as =flags.
    flags = attributes[1:] if attributes[0] in "+-" else attributes
    unknown = "".join(sorted(set(flags) - _CHATTR_FLAGS))
    if unknown:
        raise PatchError(
            "attributes %r for %s hold flags chattr cannot set (%s); use [+-]flags from %s; %s is unchanged"
            % (attributes, path, unknown, "".join(sorted(_CHATTR_FLAGS)), path)
        )
    return attributes


def check_file_args(file_args, parse_symbolic, user_id, group_id, path="<file>"):
    """Resolve the file attributes a call asks for before anything is read or written.

    Returns ``mode`` (bits), ``uid``, ``gid`` and ``attributes``, each None when
    not asked for. Refusing here is what keeps a bad mode or an unknown user from
    failing after the patched file was moved into place.
    """
    return {
        "mode": wanted_mode(file_args.get("mode"), parse_symbolic, path),
        "uid": wanted_id(file_args.get("owner"), user_id, "owner", path),
        "gid": wanted_id(file_args.get("group"), group_id, "group", path),
        "attributes": wanted_attributes(file_args.get("attributes"), path),
    }


def merge_context(current, requested):
    """The SELinux context a file should get: requested fields over the current ones."""
    requested = list(requested or [])
    return [requested[i] if i < len(requested) and requested[i] is not None else field
            for i, field in enumerate(current)]


def attribute_drift(staged, landed):
    """What the atomic move lost of the owner and mode given to the temporary file.

    atomic_move falls back to a copy across filesystems (the copy belongs to
    whoever runs the module) and, with unsafe_writes, writes into the old inode
    (which keeps its old mode and owner). Returns ``owner`` (uid, gid) and
    ``mode`` to set again; after a chown the mode is always set again, because
    chown clears the set-id bits.
    """
    drift = {}
    if (staged.st_uid, staged.st_gid) != (landed.st_uid, landed.st_gid):
        drift["owner"] = (staged.st_uid, staged.st_gid)
    if "owner" in drift or stat.S_IMODE(staged.st_mode) != stat.S_IMODE(landed.st_mode):
        drift["mode"] = stat.S_IMODE(staged.st_mode)
    return drift


def wait_for_lock(try_lock, timeout, clock, sleep, first_interval=0.05, max_interval=1.0):
    """Poll try_lock() until it returns True or timeout seconds have passed; return whether it did."""
    if timeout < 0:
        raise PatchError("lock_timeout must be 0 or more seconds, got %d" % timeout)
    deadline = clock() + timeout
    interval = first_interval
    while not try_lock():
        remaining = deadline - clock()
        if remaining <= 0:
            return False
        sleep(min(interval, remaining))
        interval = min(interval * 2, max_interval)
    return True


def lock_timeout_message(lock_path, timeout, path):
    return (
        "the lock %s on %s was still held by another process after lock_timeout=%d s; nothing was changed. "
        "Find the holder with `fuser -v %s` (or `lsof %s`), let it finish or stop it if it is stuck, then run again"
        % (lock_path, path, timeout, lock_path, lock_path)
    )

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
"""

from __future__ import annotations

import hashlib

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

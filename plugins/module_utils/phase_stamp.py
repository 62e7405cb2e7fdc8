# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A phase's stamp on a host: whether the phase may be skipped because nothing it depends on changed. Pure.

A phase (the driver's host configuration, say) records, once it has run through, the digest of its inputs (the
role's variables and code, computed on the controller by the lookup ``sm120.sglang.phase_inputs``) and the host's
side of it: the content of every file it owns and the state of every unit it keeps. A later run compares both
with what is there now. Only where all are the same is the phase skipped: another input, a file edited or removed
by hand, a unit stopped or disabled since, a stamp missing or unreadable, or the phase asked for by name (its tag
among ansible_run_tags) or skipping turned off, and it runs.

The stamp holds no time, so that recording the same state again changes nothing.
"""

from __future__ import annotations

import json

STAMP_VERSION = 1


class PhaseStampError(ValueError):
    """Input the stamp cannot be taken or compared with; the message names it and the fix."""


def fingerprint(file_hashes, unit_states):
    """The host's side of a phase: {"files": {path: sha256 or "absent"}, "units": {name: "enabled/active"}}.

    ``file_hashes``: path -> the file's sha256, None where it does not exist; ``unit_states``: unit ->
    (``systemctl is-enabled``'s answer, ``systemctl is-active``'s answer).
    """
    if not isinstance(file_hashes, dict) or not isinstance(unit_states, dict):
        raise PhaseStampError("a phase's files and units must be mappings, got %r and %r" % (file_hashes, unit_states))
    files = {}
    for path, digest in file_hashes.items():
        if not str(path).startswith("/"):
            raise PhaseStampError("a phase's file must be an absolute path, got %r" % (path,))
        files[str(path)] = "absent" if digest is None else str(digest)
    units = {}
    for name, states in unit_states.items():
        if not isinstance(states, (list, tuple)) or len(states) != 2:
            raise PhaseStampError("unit %s: expected (enabled, active), got %r" % (name, states))
        units[str(name)] = "%s/%s" % (str(states[0]).strip() or "unknown", str(states[1]).strip() or "unknown")
    return {"files": files, "units": units}


def document(phase, inputs, host):
    """The stamp to record: the phase, its inputs' digest and the host's fingerprint (``fingerprint``)."""
    if not str(phase or "").strip():
        raise PhaseStampError("the phase's name is empty; give the phase the stamp is of (e.g. driver)")
    if not str(inputs or "").strip():
        raise PhaseStampError("phase %s: the digest of its inputs is empty; compute it with "
                              "lookup('sm120.sglang.phase_inputs', ROLE)" % phase)
    return {"version": STAMP_VERSION, "phase": str(phase), "inputs": str(inputs),
            "files": dict(sorted(host["files"].items())), "units": dict(sorted(host["units"].items()))}


def render(stamp):
    """The stamp file's text: the same state, the same bytes."""
    return json.dumps(stamp, indent=2, sort_keys=True) + "\n"


def parse(text):
    """The recorded stamp, or None with the reason where there is none or it cannot be read."""
    if text is None:
        return None, "no stamp is recorded (a first run, or the phase never ran through)"
    try:
        stamp = json.loads(text)
    except ValueError as exc:
        return None, "the stamp cannot be read (%s)" % exc
    if not isinstance(stamp, dict) or stamp.get("version") != STAMP_VERSION:
        return None, "the stamp is of another format (version %r, this collection writes %d)" % (
            stamp.get("version") if isinstance(stamp, dict) else None, STAMP_VERSION)
    return stamp, ""


def _changes(kind, recorded, now):
    changes = []
    for name in sorted(set(recorded) | set(now)):
        before, after = recorded.get(name), now.get(name)
        if before == after:
            continue
        if kind == "file":
            if after in (None, "absent") and before not in (None, "absent"):
                changes.append("%s was removed" % name)
            elif before in (None, "absent"):
                changes.append("%s %s" % (name, "was not recorded" if before is None else "appeared"))
            else:
                changes.append("%s was changed" % name)
        else:
            changes.append("unit %s is %s, was %s" % (name, after or "not recorded", before or "not recorded"))
    return changes


def decide(phase, text, inputs, host, forced_by=""):
    """{"unchanged": bool, "reason": str}: whether the phase may be skipped, and why (not).

    ``text``: the recorded stamp's text, None where there is none; ``inputs``: the digest of the phase's inputs now;
    ``host``: ``fingerprint`` of the host now; ``forced_by``: why the phase runs whatever the stamp says ("" where
    nothing forces it).
    """
    if forced_by:
        return {"unchanged": False, "reason": "phase %s runs: %s" % (phase, forced_by)}
    stamp, problem = parse(text)
    if stamp is None:
        return {"unchanged": False, "reason": "phase %s runs: %s" % (phase, problem)}
    if stamp.get("inputs") != str(inputs):
        return {"unchanged": False, "reason": "phase %s runs: its inputs (variables or code) changed since it last "
                                              "ran through" % phase}
    changes = (_changes("file", stamp.get("files") or {}, host["files"])
               + _changes("unit", stamp.get("units") or {}, host["units"]))
    if changes:
        return {"unchanged": False, "reason": "phase %s runs: %s since it last ran through" % (
            phase, "; ".join(changes))}
    return {"unchanged": True, "reason": "phase %s skipped: its inputs, its %d files and %d units are as it left "
                                         "them" % (phase, len(host["files"]), len(host["units"]))}


def forced_by(tag, run_tags, skip_unchanged):
    """Why a phase runs whatever its stamp says: its tag named in this run (``--tags TAG``), or skipping turned off.

    ``tag``: the phase's tag; ``run_tags``: ansible_run_tags; ``skip_unchanged``: the role's switch
    (``sm120_skip_unchanged`` by default). "" where nothing forces it.
    """
    if not isinstance(skip_unchanged, bool):
        raise PhaseStampError("skip_unchanged must be true or false, got %r" % (skip_unchanged,))
    if isinstance(run_tags, (str, bytes)) or not isinstance(run_tags, (list, tuple)):
        raise PhaseStampError("run_tags must be a list of tags (ansible_run_tags), got %r" % (run_tags,))
    if not skip_unchanged:
        return "skipping unchanged phases is off (sm120_skip_unchanged: false)"
    if tag and tag in [str(name) for name in run_tags]:
        return "asked for by name (--tags %s)" % tag
    return ""

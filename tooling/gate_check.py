# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A release's gate entries tried on its real files: every edit anchors, and every decision takes effect.

What the unit tests assert for the releases the data describes, and what
``scripts/upstream-watch.py`` tries on a release it does not describe yet.
``read_source(path)`` returns a file of the release (path relative to the wheel's
root, as text) or None. Pure: sources in, findings out.
"""

from __future__ import annotations

from ansible_collections.sm120.sglang.plugins.module_utils.source_patch import ABSENT, PatchError, render
from ansible_collections.sm120.sglang.plugins.plugin_utils.sglang_releases import gate_entry
from ansible_collections.sm120.sglang.tooling import gate_effect


def _gated(entry, read_source):
    """path -> (shipped, gated) for every file the entry edits; problems for edits that do not anchor or revert."""
    sources, problems = {}, []
    for file_entry in entry.get("files") or []:
        shipped = read_source(file_entry["path"])
        if shipped is None:
            problems.append("%s is not in the release" % file_entry["path"])
            continue
        try:
            gated, outcome = render(shipped, file_entry["edits"], path=file_entry["path"])
            if outcome["applied"] != [edit["id"] for edit in file_entry["edits"]]:
                problems.append("%s: edits %s are already in place in the shipped file" % (file_entry["path"], outcome["skipped"]))
            compile(gated, file_entry["path"], "exec")
            backwards = [dict(edit, state=ABSENT) for edit in file_entry["edits"]]
            if render(gated, backwards, path=file_entry["path"])[0] != shipped:
                problems.append("%s: reverting the edits does not give back the shipped file" % file_entry["path"])
        except PatchError as exc:
            problems.append(str(exc))
            continue
        except SyntaxError as exc:
            problems.append("%s: the gated file does not compile: %s" % (file_entry["path"], exc))
            continue
        sources[file_entry["path"]] = (shipped, gated)
    return sources, problems


def check_entry(entry, read_source):
    """Problems of one gate entry on one release's files; empty when it anchors and takes effect."""
    if entry["kind"] == "unsupported":
        return []
    sources, problems = _gated(entry, read_source)
    environ = read_source("sglang/srt/environ.py")
    declarations = gate_effect.read_env_declarations(environ) if environ else None
    for decision in entry.get("decisions") or []:
        shipped = read_source(decision["file"])
        if shipped is None:
            problems.append("%s (decision %s) is not in the release" % (decision["file"], decision["id"]))
            continue
        try:
            if entry["kind"] == "upstream":
                _value, found = gate_effect.check_native(shipped, decision, declarations)
            else:
                gated = sources.get(decision["file"], (shipped, shipped))[1]
                _values, found = gate_effect.check_effect(shipped, gated, decision, declarations, entry.get("env"))
        except gate_effect.EffectError as exc:
            found = [str(exc)]
        problems.extend(found)
    if entry["kind"] in ("source", "upstream") and not entry.get("decisions"):
        problems.append("the entry names no decision it changes")
    return problems


def check_release(data, version, read_source):
    """gate -> {versions, kind, problems} for the entries that cover this release."""
    findings = {}
    for gate_id in data["gates"]:
        entry = gate_entry(data, gate_id, version)
        findings[gate_id] = {"versions": entry["versions"], "kind": entry["kind"], "problems": check_entry(entry, read_source)}
    return findings

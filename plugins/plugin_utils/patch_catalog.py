# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Choose the gate patches for one installed SGLang release from the catalog.

Runs on the controller only (filters of roles/sm120_patches), so it may use
``packaging``, which ansible-core itself depends on. Pure: catalog in, plan out.
"""

from __future__ import annotations

try:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version
except ImportError:  # ansible-core requires packaging; only a stripped-down controller lacks it
    SpecifierSet = None


class CatalogError(Exception):
    """The catalog, the release or the choice of gates cannot make a plan."""


def _specifier(release, gate_id):
    if SpecifierSet is None:
        raise CatalogError("the Python package 'packaging' is missing on the controller; install it (pip install packaging)")
    try:
        return SpecifierSet(release["versions"])
    except (KeyError, TypeError, InvalidSpecifier) as exc:
        raise CatalogError("gate %r: release entry %r has no valid versions specifier (%s)" % (gate_id, release, exc))


def check_catalog(catalog):
    """Refuse a catalog a plan cannot be read from; returns the gates by id."""
    gates = {}
    for gate in (catalog or {}).get("gates") or []:
        gate_id = gate.get("id")
        if not gate_id or gate_id in gates:
            raise CatalogError("every gate needs a unique id; got %r" % gate_id)
        for key in ("description", "risk", "releases"):
            if not gate.get(key):
                raise CatalogError("gate %r has no %s" % (gate_id, key))
        for release in gate["releases"]:
            _specifier(release, gate_id)
            if bool(release.get("files")) == bool(release.get("unsupported")):
                raise CatalogError("gate %r, versions %r: give either files or unsupported (a reason)"
                                   % (gate_id, release["versions"]))
            for entry in release.get("files") or []:
                ids = [edit.get("id") for edit in entry.get("edits") or []]
                if not entry.get("path") or not ids or len(set(ids)) != len(ids) or not all(ids):
                    raise CatalogError("gate %r, versions %r: every file needs a path and edits with unique ids"
                                       % (gate_id, release["versions"]))
        gates[gate_id] = gate
    if not gates:
        raise CatalogError("the catalog holds no gates")
    return gates


def catalog_paths(catalog):
    """Every file any release of any gate edits, relative to the package root."""
    paths = set()
    for gate in check_catalog(catalog).values():
        for release in gate["releases"]:
            paths.update(entry["path"] for entry in release.get("files") or [])
    return sorted(paths)


def release_entry(gate, version):
    """The one release entry of a gate whose specifier holds the version, or None."""
    matches = [release for release in gate["releases"]
               if _specifier(release, gate["id"]).contains(version, prereleases=True)]
    if len(matches) > 1:
        raise CatalogError("gate %r has %d entries for SGLang %s; their versions must not overlap"
                           % (gate["id"], len(matches), version))
    return matches[0] if matches else None


def _supported_ranges(gate):
    return ", ".join(release["versions"] for release in gate["releases"] if release.get("files")) or "none"


def patch_plan(catalog, version, enabled=None):
    """The files to edit for this release: enabled gates present, the others absent.

    ``enabled`` maps gate ids to booleans over each gate's default_enabled.
    Disabled gates that have edits for this release are planned as absent, so
    turning a gate off reverts it on the next run. What the user asked for and
    the catalog cannot do (an enabled gate with no edits for this release, an
    unknown gate id) goes to ``refused``, one message each naming the release,
    the gate and the fix, so the role can stop with all of them at once.
    """
    gates = check_catalog(catalog)
    try:
        Version(str(version))
    except InvalidVersion:
        raise CatalogError("%r is not a SGLang release number" % (version,))
    version = str(version)
    enabled = dict(enabled or {})
    files = {}
    plan = {"sglang_version": version, "enabled": [], "disabled": [], "files": [], "refused": []}
    refused = plan["refused"]
    unknown = sorted(set(enabled) - set(gates))
    if unknown:
        refused.append("unknown gate(s) %s in sm120_patches_enabled; the catalog has: %s."
                       % (", ".join(unknown), ", ".join(sorted(gates))))
    for gate_id, gate in gates.items():
        wanted = bool(enabled.get(gate_id, gate.get("default_enabled", False)))
        plan["enabled" if wanted else "disabled"].append(gate_id)
        release = release_entry(gate, version)
        if release is None or release.get("unsupported"):
            if wanted:
                why = release["unsupported"] if release else "no catalog entry covers it"
                refused.append("gate %r does not support SGLang %s: %s (supported: %s). Install a supported "
                               "release, or turn the gate off with sm120_patches_enabled: {%s: false}."
                               % (gate_id, version, why.strip(), _supported_ranges(gate), gate_id))
            continue
        for entry in release["files"]:
            planned = files.setdefault(entry["path"], {"path": entry["path"], "gates": [], "edits": []})
            if wanted:
                planned["gates"].append(gate_id)
            for edit in entry["edits"]:
                planned["edits"].append({"id": "%s.%s" % (gate_id, edit["id"]), "old": edit["old"],
                                         "new": edit["new"], "state": "present" if wanted else "absent"})
    plan["files"] = [files[path] for path in sorted(files)]
    return plan

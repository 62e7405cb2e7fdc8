# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang release data (data/sglang_releases.yml): read, checked, and asked.

One release is one entry of that file: its install set and, through the gates'
version ranges, its gate entries. Everything that needs a release list, an
install set, a driver minimum or a gate entry asks these functions, so no list is
kept by hand anywhere else. Runs on the controller (lookup, filters, tests,
scripts); it may use PyYAML and packaging, which ansible-core requires.
"""

from __future__ import annotations

import os
import re

try:
    import yaml
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:  # ansible-core requires both; only a stripped-down controller lacks them
    yaml = None

from ansible_collections.sm120.sglang.plugins.plugin_utils.data_files import read_checked, version_range

DATA_PATH = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "data", "sglang_releases.yml"))
KINDS = ("source", "option", "upstream", "unsupported")


class ReleaseDataError(Exception):
    """The release data, a release or a gate cannot answer the question; the message says why and what to do."""


def _need_libraries():
    if yaml is None:
        raise ReleaseDataError("PyYAML and packaging are missing on the controller; install them (pip install pyyaml packaging)")


def load(path=DATA_PATH):
    """The checked release data, read once per file version."""
    _need_libraries()
    return read_checked(path, lambda data: check(data) or data, ReleaseDataError, "SGLang release data")


def parse_requirement(text):
    """``name[extra]==version`` -> {name, version, extras, requirement}; only exact pins are allowed."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise ReleaseDataError("package pin %r: %s" % (text, exc))
    specifiers = list(requirement.specifier)
    if len(specifiers) != 1 or specifiers[0].operator != "==":
        raise ReleaseDataError("package pin %r must be an exact pin, name==version" % text)
    name = canonicalize_name(requirement.name)
    extras = sorted(requirement.extras)
    version = specifiers[0].version
    return {"name": name, "version": version, "extras": extras,
            "requirement": "%s%s==%s" % (name, "[%s]" % ",".join(extras) if extras else "", version)}


def _version(text, where):
    try:
        return Version(str(text))
    except InvalidVersion:
        raise ReleaseDataError("%s: %r is not a release number" % (where, text))


def _specifier(text, where):
    return version_range(text, where, ReleaseDataError)


def _check_release(version, release, drivers):
    where = "release %s" % version
    _version(version, where)
    for key in ("date", "glm5", "requires_python", "torch_cuda", "packages"):
        if key not in release:
            raise ReleaseDataError("%s has no %s" % (where, key))
    if str(release["torch_cuda"]) not in drivers:
        raise ReleaseDataError("%s: torch_cuda %s has no entry in cuda_min_driver_branch" % (where, release["torch_cuda"]))
    _specifier(release["requires_python"], where)
    names = [parse_requirement(text)["name"] for text in release["packages"]]
    if len(set(names)) != len(names):
        raise ReleaseDataError("%s pins a package twice" % where)
    pinned = dict(zip(names, (parse_requirement(text)["version"] for text in release["packages"])))
    if pinned.get("sglang") != version or "torch" not in pinned:
        raise ReleaseDataError("%s must pin sglang==%s and torch" % (where, version))


def _check_entry(gate_id, entry):
    where = "gate %s, versions %r" % (gate_id, entry.get("versions"))
    _specifier(entry.get("versions"), where)
    kind = entry.get("kind")
    if kind not in KINDS:
        raise ReleaseDataError("%s: kind must be one of %s, got %r" % (where, ", ".join(KINDS), kind))
    needs = {"source": ("files",), "option": (), "upstream": ("since", "decisions"), "unsupported": ("reason",)}[kind]
    for key in needs:
        if not entry.get(key):
            raise ReleaseDataError("%s: %s %s entry needs %s" % (where, "an" if kind[0] in "aeiou" else "a", kind, key))
    if kind == "option" and not (entry.get("env") or entry.get("flags")):
        raise ReleaseDataError("%s: an option entry needs env or flags" % where)
    if kind in ("source", "option") and entry.get("env") and not all(
            re.match(r"^[A-Z_][A-Z0-9_]*$", name) for name in entry["env"]):
        raise ReleaseDataError("%s: env names must be upper-case environment variable names" % where)
    for flag in entry.get("flags") or {}:
        if not str(flag).startswith("--"):
            raise ReleaseDataError("%s: flag %r must start with --" % (where, flag))
    for file_entry in entry.get("files") or []:
        ids = [edit.get("id") for edit in file_entry.get("edits") or []]
        if not file_entry.get("path") or not ids or not all(ids) or len(set(ids)) != len(ids):
            raise ReleaseDataError("%s: every file needs a path and edits with unique ids" % where)
        for edit in file_entry["edits"]:
            if not edit.get("old") or not edit.get("new") or edit["old"] == edit["new"]:
                raise ReleaseDataError("%s: edit %s needs different old and new texts" % (where, edit.get("id")))
    for decision in entry.get("decisions") or []:
        for key in ("id", "file", "function", "condition", "means"):
            if not decision.get(key):
                raise ReleaseDataError("%s: decision %s has no %s" % (where, decision.get("id"), key))
        if not isinstance(decision.get("sm120"), bool):
            raise ReleaseDataError("%s: decision %s needs sm120: true or false" % (where, decision["id"]))
    for precondition in entry.get("preconditions") or []:
        if not (("package" in precondition and "min" in precondition) or "tp_size_in" in precondition):
            raise ReleaseDataError("%s: a precondition is {package, min} or {tp_size_in}, got %r" % (where, precondition))
        if not precondition.get("why"):
            raise ReleaseDataError("%s: every precondition says why" % where)


def check(data):
    """Refuse release data the roles cannot rely on, naming the entry and what is wrong."""
    if not isinstance(data, dict) or not data.get("releases") or not data.get("gates"):
        raise ReleaseDataError("the release data needs releases and gates")
    drivers = {str(cuda): branch for cuda, branch in (data.get("cuda_min_driver_branch") or {}).items()}
    if str(data.get("sm120_min_cuda")) not in drivers:
        raise ReleaseDataError("sm120_min_cuda %s has no entry in cuda_min_driver_branch" % data.get("sm120_min_cuda"))
    for flag, rename in (data.get("flag_renames") or {}).items():
        if not str(flag).startswith("--") or not isinstance(rename, dict) or not rename.get("becomes"):
            raise ReleaseDataError("flag_renames: %r needs since and becomes (flag -> value)" % (flag,))
        _version(rename.get("since"), "flag_renames %s" % flag)
    for version, release in data["releases"].items():
        _check_release(str(version), release, drivers)
    for gate_id, gate in data["gates"].items():
        for key in ("description", "risk", "entries"):
            if not gate.get(key):
                raise ReleaseDataError("gate %s has no %s" % (gate_id, key))
        if not isinstance(gate.get("default_enabled"), bool):
            raise ReleaseDataError("gate %s needs default_enabled: true or false" % gate_id)
        for entry in gate["entries"]:
            _check_entry(gate_id, entry)
        for version in data["releases"]:
            matches = [entry for entry in gate["entries"]
                       if SpecifierSet(str(entry["versions"])).contains(str(version), prereleases=True)]
            if len(matches) != 1:
                raise ReleaseDataError("gate %s has %d entries for SGLang %s; every release needs exactly one"
                                       % (gate_id, len(matches), version))


def versions(data):
    """Every release the data describes, oldest first."""
    return sorted((str(version) for version in data["releases"]), key=Version)


def default_version(data):
    """The newest release that serves GLM-5: the collection's default."""
    serving = [version for version in versions(data) if data["releases"][version]["glm5"]]
    if not serving:
        raise ReleaseDataError("no release in the data serves GLM-5")
    return serving[-1]


def resolve_version(data, wanted):
    """``newest`` -> the default release; a release number -> itself, if the data describes it."""
    wanted = str(wanted)
    if wanted in ("newest", "default", ""):
        return default_version(data)
    if wanted not in data["releases"]:
        raise ReleaseDataError(
            "SGLang %s is not in the release data (releases: %s). Pick one of those, or describe the release "
            "in data/sglang_releases.yml (python scripts/upstream-watch.py drafts the entry from its wheel)."
            % (wanted, ", ".join(versions(data))))
    return wanted


def install_set(data, wanted):
    """The install set of a release: packages (parsed pins), torch's CUDA build and the driver branch it needs."""
    version = resolve_version(data, wanted)
    release = data["releases"][version]
    drivers = {str(cuda): branch for cuda, branch in data["cuda_min_driver_branch"].items()}
    packages = [parse_requirement(text) for text in release["packages"]]
    return {
        "version": version,
        "date": str(release["date"]),
        "glm5": bool(release["glm5"]),
        "requires_python": str(release["requires_python"]),
        "torch_cuda": str(release["torch_cuda"]),
        "min_driver_branch": int(drivers[str(release["torch_cuda"])]),
        # Whatever the release: no older branch drives SM120 GPUs at all.
        "sm120_min_driver_branch": sm120_min_driver_branch(data),
        "packages": packages,
        "versions": {package["name"]: package["version"] for package in packages},
        "requirements": [package["requirement"] for package in packages],
    }


def gate_entry(data, gate_id, version):
    """The one entry of a gate that covers this release."""
    for entry in data["gates"][gate_id]["entries"]:
        if SpecifierSet(str(entry["versions"])).contains(str(version), prereleases=True):
            return entry
    raise ReleaseDataError("gate %s has no entry for SGLang %s" % (gate_id, version))


def sm120_min_driver_branch(data):
    """The oldest driver branch that drives SM120 GPUs at all: that of the first CUDA release that builds for them."""
    return int(data["cuda_min_driver_branch"][str(data["sm120_min_cuda"])])


def driver_problem(data, wanted, branch):
    """A message when a driver branch is too old for the release's CUDA build, else None."""
    wanted_set = install_set(data, wanted)
    if branch is None or int(branch) >= wanted_set["min_driver_branch"]:
        return None
    return ("SGLang %s runs on torch built for CUDA %s, which needs NVIDIA driver branch %d or newer; the driver "
            "branch is %s. Install driver %d or newer (gpu_driver_branch), or pick an SGLang release built for an "
            "older CUDA (sglang_install_version)."
            % (wanted_set["version"], wanted_set["torch_cuda"], wanted_set["min_driver_branch"], branch,
               wanted_set["min_driver_branch"]))


def _entry_summary(data, version, entry):
    """One table cell: the entry's kind, what it sets, its preconditions and whether the pinned set meets them."""
    kind = entry["kind"]
    if kind == "unsupported":
        return "unsupported"
    if kind == "upstream":
        return "native since %s" % entry["since"]
    parts = []
    if entry.get("files"):
        parts.append("edits %d file%s" % (len(entry["files"]), "" if len(entry["files"]) == 1 else "s"))
    parts += ["`%s=%s`" % item for item in sorted((entry.get("env") or {}).items())]
    parts += ["`%s`" % (flag if value is True else "%s %s" % (flag, value)) for flag, value in (entry.get("flags") or {}).items()]
    text = "%s: %s" % (kind, " + ".join(parts))
    pinned = install_set(data, version)["versions"]
    for precondition in entry.get("preconditions") or []:
        if "tp_size_in" in precondition:
            text += "; TP %s" % "/".join(str(size) for size in precondition["tp_size_in"])
            continue
        name = canonicalize_name(precondition["package"])
        have = pinned.get(name)
        met = have is not None and Version(have) >= Version(str(precondition["min"]))
        text += "; %s >= %s%s" % (name, precondition["min"], "" if met else " (pinned %s: refused)" % have)
    return text


def release_table(data):
    """The two release tables of docs/releases.md, as Markdown lines, from the data alone: install sets, then gates."""
    default = default_version(data)
    lines = ["| release | built | GLM-5 | pins (Requires-Dist) | torch CUDA | driver | Python |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for version in versions(data):
        wanted = install_set(data, version)
        lines.append("| %s%s | %s | %s | %s | %s | >= %d | %s |" % (
            version, " (default)" if version == default else "", wanted["date"], "yes" if wanted["glm5"] else "no",
            ", ".join(requirement for requirement in wanted["requirements"] if not requirement.startswith("sglang==")),
            wanted["torch_cuda"], wanted["min_driver_branch"], wanted["requires_python"]))
    gate_ids = list(data["gates"])
    lines += ["", "| release | %s |" % " | ".join("`%s`" % gate for gate in gate_ids),
              "| --- | %s |" % " | ".join(["---"] * len(gate_ids))]
    for version in versions(data):
        cells = [_entry_summary(data, version, gate_entry(data, gate_id, version)) for gate_id in gate_ids]
        lines.append("| %s | %s |" % (version, " | ".join(cells)))
    return lines

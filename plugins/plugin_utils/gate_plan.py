# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sm120_patches role does on one host, decided from the release data and the host's facts.

Pure: release data, the installed release and packages, the served TP size and
the user's choice in; the plan (files to edit, options for the service, native
gates, refusals), the ledger and the undo edits out; and which gates are live on
a host (live()), for every role that asks. The role only wires facts to
these functions (filters in plugins/filter/gate_plan.py) and runs source_patch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible_collections.sm120.sglang.plugins.plugin_utils.sglang_releases import (
    ReleaseDataError,
    gate_entry,
)

try:
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:  # ansible-core requires packaging
    Version = None


def release_inputs(data):
    """What a host must report about its SGLang, from the release data alone.

    ``paths``: every file any gate entry edits (for its RECORD hash); ``packages``:
    every distribution a precondition names or an install set pins (for its
    installed version), so that every role reads and records the same set.
    """
    entries = [entry for gate in data["gates"].values() for entry in gate["entries"]]
    pinned = {requirement.split("[")[0].split("==")[0] for release in data["releases"].values()
              for requirement in release["packages"]}
    needed = {precondition["package"] for entry in entries for precondition in entry.get("preconditions") or []
              if "package" in precondition}
    return {
        "paths": sorted({file_entry["path"] for entry in entries for file_entry in entry.get("files") or []}),
        "packages": sorted({canonicalize_name(name) for name in pinned | needed}),
    }


def _precondition_problem(gate_id, precondition, installed, tp_size):
    if "tp_size_in" in precondition:
        sizes = [int(size) for size in precondition["tp_size_in"]]
        if tp_size is None or int(tp_size) not in sizes:
            return ("gate %r needs a tensor-parallel size of %s (%s), and the server runs TP %s. Serve at one of "
                    "those sizes (sglang_service_tp_size; sm120_patches_tp_size), or turn the gate off with "
                    "sm120_patches_enabled: {%s: false}."
                    % (gate_id, " or ".join(str(size) for size in sizes), precondition["why"], tp_size, gate_id))
        return None
    name = canonicalize_name(precondition["package"])
    have = installed.get(name)
    try:
        ok = have is not None and Version(have.split("+", 1)[0]) >= Version(str(precondition["min"]))
    except InvalidVersion:
        ok = False
    if ok:
        return None
    return ("gate %r needs %s %s or newer (%s); %s. Install an SGLang release whose set pins it (sglang_install_version), "
            "or turn the gate off with sm120_patches_enabled: {%s: false}."
            % (gate_id, name, precondition["min"], precondition["why"],
               "%s %s is installed" % (name, have) if have else "%s is not installed" % name, gate_id))


def enabled_map(data, asked=None, turned_off=None):
    """Is each gate asked on? Every gate of the release data mapped to true or false: the user's choice
    (sm120_patches_enabled) over the gate's default_enabled, and false whatever that says for the gates in ``turned_off``
    (rejected on record or now, held back for the smoke test to add). An id the data does not know is kept as given,
    for plan() to refuse; one in ``turned_off`` alone is left out, since nothing could turn it on.
    """
    if asked is not None and not isinstance(asked, Mapping):
        raise ReleaseDataError("sm120_patches_enabled maps gate ids to true or false, got %r" % (asked,))
    wrong = sorted(str(gate_id) for gate_id, value in (asked or {}).items() if not isinstance(value, bool))
    if wrong:
        raise ReleaseDataError("sm120_patches_enabled: %s must be true or false (a string such as \"false\" would "
                               "read as on). Fix: write the value without quotes." % ", ".join(wrong))
    result = {gate_id: bool(gate["default_enabled"]) for gate_id, gate in data["gates"].items()}
    result.update(asked or {})
    for gate_id in turned_off or []:
        if gate_id in result:
            result[gate_id] = False
    return result


def plan(data, version, enabled=None, installed=None, tp_size=None, turned_off=None):
    """The gates for one host: source edits, options, native gates, and what is refused.

    ``enabled`` maps gate ids to booleans over each gate's default_enabled, ``turned_off`` lists the gates planned off
    whatever it says (enabled_map() decides both);
    ``installed`` maps distribution names to installed versions (for the
    preconditions); ``tp_size`` is the served tensor-parallel size. A disabled gate
    whose entry has edits is planned ``absent``, so turning it off reverts it. Every
    refusal names the release, the gate, what is installed and the fix, and all of
    them are returned at once so that the role stops before anything changes.
    """
    version = str(version)
    if version not in {str(release) for release in data["releases"]}:
        raise ReleaseDataError("SGLang %s is installed, and the release data does not describe it; describe it in "
                               "data/sglang_releases.yml (python scripts/upstream-watch.py drafts it), or install one "
                               "of the releases it holds." % version)
    asked = enabled_map(data, enabled, turned_off)
    installed = {canonicalize_name(name): value for name, value in (installed or {}).items() if value}
    result = {"sglang_version": version, "enabled": [], "disabled": [], "files": [], "live": [],
              "options": {"gates": [], "env": {}, "flags": {}}, "native": [], "refused": []}
    unknown = sorted(set(asked) - set(data["gates"]))
    if unknown:
        result["refused"].append("unknown gate(s) %s in sm120_patches_enabled; the release data has: %s."
                                 % (", ".join(unknown), ", ".join(sorted(data["gates"]))))
    files = {}
    for gate_id, gate in data["gates"].items():
        wanted = asked[gate_id]
        result["enabled" if wanted else "disabled"].append(gate_id)
        entry = gate_entry(data, gate_id, version)
        kind = entry["kind"]
        if kind == "unsupported":
            if wanted:
                result["refused"].append(
                    "gate %r does not support SGLang %s: %s. Install another release, or turn the gate off with "
                    "sm120_patches_enabled: {%s: false}." % (gate_id, version, entry["reason"].strip(), gate_id))
            continue
        if kind == "upstream":
            result["native"].append({"gate": gate_id, "since": str(entry["since"]),
                                     "means": [decision["means"] for decision in entry["decisions"]]})
            continue
        problems = [_precondition_problem(gate_id, precondition, installed, tp_size)
                    for precondition in entry.get("preconditions") or []] if wanted else []
        problems = [problem for problem in problems if problem]
        result["refused"].extend("SGLang %s: %s" % (version, problem) for problem in problems)
        live = wanted and not problems
        for file_entry in entry.get("files") or []:
            planned = files.setdefault(file_entry["path"], {"path": file_entry["path"], "gates": [], "edits": []})
            if live:
                planned["gates"].append(gate_id)
            for edit in file_entry["edits"]:
                planned["edits"].append({"id": "%s.%s" % (gate_id, edit["id"]), "old": edit["old"], "new": edit["new"],
                                         "state": "present" if live else "absent"})
        if live:
            result["live"].append(gate_id)
            if entry.get("env") or entry.get("flags"):
                result["options"]["gates"].append(gate_id)
                result["options"]["env"].update({name: str(value) for name, value in (entry.get("env") or {}).items()})
                result["options"]["flags"].update(entry.get("flags") or {})
    result["files"] = [files[path] for path in sorted(files)]
    result["live"].sort()
    return result


def live(ledger, gates=None, options=None):
    """Is a gate on on this host? The gates live and their options ({gates, options}): where this run's patch phase
    ran, what it published (``gates``, ``options``: the facts sm120_patches_live and sm120_patches_options), else
    what the host's ledger records (--tags service or smoke, or the patch role itself before its plan).

    The one answer the patch role (what was live before), the service (what the server runs) and the experiments
    (what a switch changes) read, so that none of them falls back differently. The order is kept: the service
    records it in the unit's environment, and a new order would restart the server.
    """
    if ledger is not None and not isinstance(ledger, Mapping):
        raise ReleaseDataError("the patch ledger is a JSON object with gates and options, got %r" % (ledger,))
    if gates is None:
        gates, options = (ledger or {}).get("gates"), (ledger or {}).get("options")
        where = "the patch ledger's gates"
    else:
        where = "sm120_patches_live"
    if gates is not None and (isinstance(gates, (str, Mapping)) or not isinstance(gates, Sequence)):
        raise ReleaseDataError("%s is a list of gate ids, got %r" % (where, gates))
    if options is not None and not isinstance(options, Mapping):
        raise ReleaseDataError("the options of the live gates are {gates, env, flags}, got %r" % (options,))
    return {"gates": list(gates or []), "options": dict(options or {})}


def undo_edits(results):
    """For the rescue: each file this run changed, with the edits that put it back as it was before the run."""
    undo = []
    for result in results or []:
        if not result.get("changed") or "invocation" not in result:
            continue
        edits = result["item"]["edits"]
        applied, reverted = set(result.get("applied") or []), set(result.get("reverted") or [])
        back = [dict(edit, state="absent") for edit in edits if edit["id"] in applied]
        back += [dict(edit, state="present") for edit in edits if edit["id"] in reverted]
        if back:
            undo.append({"path": result["invocation"]["module_args"]["path"], "edits": back})
    return undo


def restored_files(previous, results):
    """Files the ledger had patched that this run found back at their shipped bytes (SGLang reinstalled)."""
    recorded = {entry["path"]: entry.get("sha256") for entry in (previous or {}).get("files") or []}
    found = []
    for result in results or []:
        args = result.get("invocation", {}).get("module_args", {})
        path = args.get("path")
        if (path in recorded and result.get("sha256_before") == args.get("original_sha256")
                and recorded[path] != result.get("sha256_before")):
            found.append(path)
    return found


def ledger(previous, planned, results, facts, python, now):
    """The host's record of the live gates after this run; {} when nothing is live.

    A file keeps its ``patched_at`` while its bytes stay what the previous ledger
    says, so an unchanged rerun writes the same ledger. Rollback reads the edits
    and the options from here, never from the release data.
    """
    previous = previous or {}
    before = {entry["path"]: entry for entry in previous.get("files") or []}
    entries = []
    for result in results or []:
        if not result["item"]["gates"]:
            continue
        path = result["invocation"]["module_args"]["path"]
        unchanged = path in before and before[path].get("sha256") == result["sha256_after"]
        entries.append({
            "path": path,
            "relative_path": result["item"]["path"],
            "gates": result["item"]["gates"],
            "record_sha256": result["invocation"]["module_args"]["original_sha256"],
            "sha256": result["sha256_after"],
            "patched_at": before[path]["patched_at"] if unchanged and before[path].get("patched_at") else now,
            "edits": [edit for edit in result["item"]["edits"] if edit["state"] == "present"],
        })
    if not planned["live"]:
        return {}
    return {
        "sglang_version": planned["sglang_version"],
        "package_dir": facts["location"],
        "python": python,
        "gates": planned["live"],
        "options": planned["options"],
        "files": entries,
    }

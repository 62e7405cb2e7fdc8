# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A model directory against the Hugging Face Hub's listing of the repository's files.

The hub lists each file of a revision with its size and its git blob id, and for a file kept in LFS (the weights)
the sha256 of its content. ``hf download`` checks only sizes: a file changed in transit (same size, other bytes)
goes into the directory as if it were the hub's, so the role checks every file here, against the hashes of the
listing it downloaded by (the same commit). The listing travels with the model as its manifest, and a host that
received the model from another host checks it again against it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor

_BLOCK = 8 << 20
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ListingError(ValueError):
    """A hub answer or a manifest that is not a listing of files."""


def next_link(header):
    """The URL of rel="next" in an HTTP Link header, or None (the hub pages long listings as GitHub does)."""
    for part in (header or "").split(","):
        match = re.match(r'\s*<([^>]+)>\s*;(.*)', part)
        if match and re.search(r'rel="?next"?', match.group(2)):
            return match.group(1)
    return None


def commit_of(repo, info):
    """The commit a revision is at, from the hub's answer of /api/models/REPO/revision/REV."""
    if not isinstance(info, dict) or not _COMMIT.match(str(info.get("sha", ""))):
        raise ListingError("the hub's answer for %s names no commit (sha): %r" % (repo, info))
    return info["sha"]


def listing_from_hub(repo, info, tree_pages):
    """The listing of a revision: the answer of /api/models/REPO/revision/REV and the pages of its recursive tree."""
    commit = commit_of(repo, info)
    files = []
    for page in tree_pages:
        if not isinstance(page, list):
            raise ListingError("the hub's tree of %s is not a list of files: %r" % (repo, page))
        for entry in page:
            if not isinstance(entry, dict) or entry.get("type") != "file":
                continue
            item = {"path": str(entry["path"]), "size": int(entry["size"]), "git_oid": str(entry["oid"])}
            lfs = entry.get("lfs")
            if isinstance(lfs, dict) and lfs.get("oid"):
                item["sha256"] = str(lfs["oid"])
                item["size"] = int(lfs.get("size", item["size"]))
            files.append(item)
    if not files:
        raise ListingError("the hub lists no files for %s at %s" % (repo, commit))
    files.sort(key=lambda item: item["path"])
    return check_listing({"repo": repo, "commit": commit, "files": files,
                          "total_bytes": sum(f["size"] for f in files)})


def _entry_problem(item, seen):
    """What is wrong with one entry of a listing, or None. A value of the wrong form would make a valid file
    "differ" (a size written "1024", a sha256 written "sha256:..."), and the role removes files that differ."""
    if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not item["path"] or "size" not in item:
        return "an entry has no path or size: %r" % (item,)
    path, size = item["path"], item["size"]
    if path.startswith("/") or ".." in path.split("/"):
        return "%s leaves the model directory" % path
    if path in seen:
        return "%s is listed twice" % path
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        return "%s has size %r, not a whole number of bytes: write it as an integer (1024, not \"1024\")" % (
            path, size)
    if not (item.get("sha256") or item.get("git_oid")):
        return "%s has no hash" % path
    for key, pattern, what in (("sha256", _SHA256, "64"), ("git_oid", _COMMIT, "40")):
        value = item.get(key)
        if value is not None and not (isinstance(value, str) and pattern.match(value)):
            prefix = (" without the algorithm's prefix" if isinstance(value, str) and ":" in value else "")
            return ("%s has %s %r, not %s lowercase hex digits: write the digest alone%s, as the hub gives it"
                    % (path, key, value, what, prefix))
    return None


def check_listing(listing):
    """The listing itself, as read back from a manifest or given: refuse one that is not, before it decides anything.

    Every entry is checked for form (size an integer, sha256 64 hex digits, git blob id 40), so that no file is
    called different, and removed, on the strength of a value written another way.
    """
    problem = None
    if not isinstance(listing, dict) or not isinstance(listing.get("files"), list) or not listing["files"]:
        problem = "it has no list of files"
    else:
        seen = set()
        for item in listing["files"]:
            problem = _entry_problem(item, seen)
            if problem:
                break
            seen.add(item["path"])
    if problem:
        raise ListingError("not a model listing: %s. Nothing was checked or removed; correct the entry or take the "
                           "listing from the hub again." % problem)
    return listing


# What SGLang's default model loader reads from a local model directory (load_format auto), as 0.5.16's wheel
# writes it (sglang/srt/model_loader/loader.py, DefaultModelLoader._prepare_weights, and weight_utils.py): the
# first of these patterns that matches a file at the top of the directory (glob, so no hidden files); for
# safetensors, only the files the index's weight_map names where the index is there; else all but the trainer's.
_LOADER_PATTERNS = ("*.safetensors", "*.bin", "*.pt")
SAFETENSORS_INDEX = "model.safetensors.index.json"
_NOT_FOR_INFERENCE = ("training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt")


def weights_sglang_loads(names, index_files):
    """The names among ``names`` (the files at the top of a model directory) that SGLang's loader reads.

    ``index_files`` is the set of files the safetensors index's weight_map names, or None without an index.
    """
    names = sorted(name for name in names if not name.startswith("."))
    for pattern in _LOADER_PATTERNS:
        found = [name for name in names if fnmatch.fnmatchcase(name, pattern)]
        if found:
            break
    else:
        return []
    if pattern != "*.safetensors":
        return [name for name in found if not name.endswith(_NOT_FOR_INFERENCE)]
    if index_files is not None:
        # SGLang adds an mtp.safetensors the index leaves out for GLM-4 MoE checkpoints with an MTP layer
        # (weight_utils.maybe_add_mtp_safetensors, a packaging bug it works around); counted whatever the model,
        # since the architecture is not known here and the file is a weight either way.
        return [name for name in found if name in index_files or name == "mtp.safetensors"]
    if len(found) == 2 and found[0].endswith("consolidated.safetensors") and found[1].endswith("model.safetensors"):
        return [found[1]]
    return found


def _index_files(directory):
    try:
        with open(os.path.join(directory, SAFETENSORS_INDEX)) as handle:
            weight_map = json.load(handle).get("weight_map", {})
        return {str(value) for value in weight_map.values()}
    except (IOError, OSError):
        return None
    except (ValueError, AttributeError):
        # Not an index SGLang can read: it would fail to load; no shard counts as named by it.
        return set()


def unlisted_weights(directory, listing):
    """Files SGLang would read from the directory that the listing does not name: weights, and the index that picks
    them. A shard and its index left from another revision would be served in place of the listed ones."""
    if not os.path.isdir(directory):
        return []
    names = [name for name in os.listdir(directory) if os.path.isfile(os.path.join(directory, name))]
    listed = {item["path"] for item in listing["files"]}
    index = _index_files(directory) if SAFETENSORS_INDEX in names else None
    loaded = weights_sglang_loads(names, index)
    deciding = [SAFETENSORS_INDEX] if index is not None and any(n.endswith(".safetensors") for n in loaded) else []
    return sorted(name for name in set(loaded + deciding) if name not in listed)


def file_digest(path, item):
    """The hash the listing gives for this file, of the file on disk: sha256 for LFS, else the git blob id."""
    if item.get("sha256"):
        digest = hashlib.sha256()
    else:
        digest = hashlib.sha1()
        digest.update(b"blob %d\0" % os.path.getsize(path))
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_one(directory, item):
    path = os.path.join(directory, item["path"])
    expected = item.get("sha256") or item["git_oid"]
    kind = "sha256" if item.get("sha256") else "git blob id"
    if not os.path.isfile(path):
        return "missing", {"path": item["path"], "size": item["size"]}
    size = os.path.getsize(path)
    if size != item["size"]:
        return "mismatched", {"path": item["path"], "kind": "size", "expected": item["size"], "actual": size}
    actual = file_digest(path, item)
    if actual != expected:
        return "mismatched", {"path": item["path"], "kind": kind, "expected": expected, "actual": actual}
    return "verified", item["path"]


def check_directory(directory, listing, workers=None):
    """Each file of the listing in the directory: verified, missing or mismatched (size or hash, both given).

    Files are hashed in parallel (hashlib lets go of the GIL on large blocks): 400 GB take minutes, not an hour.
    Files the listing does not name are left out of the verdict (the CLI's .cache, the manifest, a README), except
    those SGLang's loader would read (``unlisted_weights``): with any, the directory is not complete.
    """
    check_listing(listing)
    result = {"verified": [], "missing": [], "mismatched": []}
    if not os.path.isdir(directory):
        result.update(missing=[{"path": i["path"], "size": i["size"]} for i in listing["files"]], present_bytes=0,
                      unlisted_weights=[], complete=False)
        return result
    workers = workers or min(16, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for verdict, detail in pool.map(lambda item: _check_one(directory, item), listing["files"]):
            result[verdict].append(detail)
    present = {item["path"] for item in listing["files"]} - {m["path"] for m in result["missing"]}
    result["present_bytes"] = sum(os.path.getsize(os.path.join(directory, p)) for p in present)
    result["unlisted_weights"] = unlisted_weights(directory, listing)
    result["complete"] = not result["missing"] and not result["mismatched"] and not result["unlisted_weights"]
    return result


def mismatch_problem(directory, listing, result, host):
    """Each file that differs from the listing, with both sizes or hashes, and each unlisted file SGLang would load;
    None when there is none."""
    unlisted = result.get("unlisted_weights") or []
    if not result["mismatched"] and not unlisted:
        return None
    where = "%s (%s at %s) on %s" % (directory, listing.get("repo", "?"), str(listing.get("commit", "?"))[:12], host)
    lines = []
    if result["mismatched"]:
        lines.append("%s: %d of %d files differ from the hub's listing:"
                     % (where, len(result["mismatched"]), len(listing["files"])))
        for item in result["mismatched"]:
            lines.append("  %s: %s %s expected, %s on disk" % (item["path"], item["kind"], item["expected"],
                                                               item["actual"]))
    if unlisted:
        lines.append("%s holds %d file(s) the listing does not name that SGLang's loader would read in place of the "
                     "listed weights: %s. They are left from another revision or copy: remove them (nothing was "
                     "removed), or give the model an empty directory." % (where, len(unlisted), ", ".join(unlisted)))
    return "\n".join(lines)

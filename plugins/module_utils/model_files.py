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

import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor

_BLOCK = 8 << 20
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


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
    return {"repo": repo, "commit": commit, "files": files, "total_bytes": sum(f["size"] for f in files)}


def check_listing(listing):
    """The listing itself, as read back from a manifest: refuse one that is not, before it decides anything."""
    problem = None
    if not isinstance(listing, dict) or not isinstance(listing.get("files"), list) or not listing["files"]:
        problem = "it has no list of files"
    else:
        for item in listing["files"]:
            if not isinstance(item, dict) or not isinstance(item.get("path"), str) or "size" not in item:
                problem = "an entry has no path or size: %r" % (item,)
            elif not (item.get("sha256") or item.get("git_oid")):
                problem = "%s has no hash" % item["path"]
            elif item["path"].startswith("/") or ".." in item["path"].split("/"):
                problem = "%s leaves the model directory" % item["path"]
            if problem:
                break
    if problem:
        raise ListingError("not a model listing: %s" % problem)
    return listing


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
    Files the listing does not name (the CLI's .cache, the manifest) are left out of the verdict.
    """
    check_listing(listing)
    result = {"verified": [], "missing": [], "mismatched": []}
    if not os.path.isdir(directory):
        result.update(missing=[{"path": i["path"], "size": i["size"]} for i in listing["files"]], present_bytes=0,
                      complete=False)
        return result
    workers = workers or min(16, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for verdict, detail in pool.map(lambda item: _check_one(directory, item), listing["files"]):
            result[verdict].append(detail)
    present = {item["path"] for item in listing["files"]} - {m["path"] for m in result["missing"]}
    result["present_bytes"] = sum(os.path.getsize(os.path.join(directory, p)) for p in present)
    result["complete"] = not result["missing"] and not result["mismatched"]
    return result


def mismatch_problem(directory, listing, result, host):
    """Each file that differs from the listing, with both sizes or hashes; None when none does."""
    if not result["mismatched"]:
        return None
    lines = ["%s (%s at %s) on %s: %d of %d files differ from the hub's listing:" % (
        directory, listing.get("repo", "?"), str(listing.get("commit", "?"))[:12], host, len(result["mismatched"]),
        len(listing["files"]))]
    for item in result["mismatched"]:
        lines.append("  %s: %s %s expected, %s on disk" % (item["path"], item["kind"], item["expected"],
                                                           item["actual"]))
    return "\n".join(lines)

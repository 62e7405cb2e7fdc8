# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy lock on a host: a directory made atomically (mkdir), its owner in owner.json inside it.

Only these filesystem steps run on the host (module deploy_lock); whether a held lock is stale is decided on the
controller (plugin_utils/deploy_lock.py), which alone can tell whether the holder's ansible-playbook still runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil

OWNER_FILE = "owner.json"
# The holder's run_id when the directory has no readable owner.json: a run killed between mkdir and the write.
MALFORMED = "malformed"


def read_owner(path):
    """None where there is no lock; else its owner, or {"run_id": MALFORMED, ...} where owner.json is unreadable."""
    if not os.path.isdir(path):
        if os.path.lexists(path):
            return {"run_id": MALFORMED, "problem": "%s is not a directory" % path, "since": os.lstat(path).st_mtime}
        return None
    try:
        with open(os.path.join(path, OWNER_FILE)) as handle:
            owner = json.load(handle)
        if not isinstance(owner, dict) or not isinstance(owner.get("run_id"), str) or owner["run_id"] == MALFORMED:
            raise ValueError("no run_id")
        return owner
    except (OSError, ValueError) as exc:
        try:
            since = os.stat(path).st_mtime
        except OSError:  # removed meanwhile
            return None
        return {"run_id": MALFORMED, "problem": "%s has no readable %s (%s)" % (path, OWNER_FILE, exc),
                "since": since}


def _write_owner(path, owner):
    temporary = os.path.join(path, OWNER_FILE + ".tmp")
    with open(temporary, "w") as handle:
        json.dump(owner, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, os.path.join(path, OWNER_FILE))


def _make(path, owner):
    """mkdir, the atomic step: True where this call made the lock (and wrote its owner), False where one exists."""
    parent = os.path.dirname(path.rstrip("/")) or "/"
    os.makedirs(parent, mode=0o755, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return False
    _write_owner(path, owner)
    return True


def take(path, owner, replace=None, check_mode=False):
    """Take the lock for ``owner`` (a dict with run_id). ``replace``: the run_id of a holder found stale, whose lock
    is moved aside (one atomic rename: of two runs replacing the same holder, one wins) and taken.

    Returns {"taken": bool, "changed": bool, "holder": the owner found or None, "replaced": the holder replaced}.
    """
    holder = read_owner(path)
    if holder is None:
        if check_mode:
            return {"taken": True, "changed": True, "holder": None, "replaced": None}
        if _make(path, owner):
            return {"taken": True, "changed": True, "holder": None, "replaced": None}
        holder = read_owner(path)
    if holder is not None and holder.get("run_id") == owner["run_id"]:
        return {"taken": True, "changed": False, "holder": holder, "replaced": None}
    if holder is None or not replace or holder.get("run_id") != replace:
        return {"taken": False, "changed": False, "holder": holder, "replaced": None}
    if check_mode:
        return {"taken": True, "changed": True, "holder": holder, "replaced": holder}
    aside = "%s.stale.%s" % (path.rstrip("/"), re.sub(r"[^A-Za-z0-9_.-]", "_", owner["run_id"]))
    try:
        os.rename(path, aside)
    except OSError:  # another run moved it first
        return {"taken": False, "changed": False, "holder": read_owner(path), "replaced": None}
    moved = read_owner(aside)
    if moved is None or moved.get("run_id") != replace:  # it was replaced meanwhile: put it back, take nothing
        try:
            os.rename(aside, path)
        except OSError:
            pass
        return {"taken": False, "changed": False, "holder": read_owner(path), "replaced": None}
    made = _make(path, owner)
    if os.path.isdir(aside):
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.remove(aside)
    if not made:
        return {"taken": False, "changed": True, "holder": read_owner(path), "replaced": holder}
    return {"taken": True, "changed": True, "holder": holder, "replaced": holder}


def release(path, run_id, check_mode=False):
    """Give the lock back where ``run_id`` holds it; another run's lock is left alone and returned."""
    holder = read_owner(path)
    if holder is None or holder.get("run_id") != run_id:
        return {"released": False, "changed": False, "holder": holder}
    if not check_mode:
        shutil.rmtree(path)
    return {"released": True, "changed": True, "holder": holder}

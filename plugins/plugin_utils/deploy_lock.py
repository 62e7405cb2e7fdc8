# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a deploy may take a host's lock from the run that holds it (role deploy_lock; the lock itself:
module deploy_lock).

Two deploys against one fleet at once would restart the same servers and rewrite the same routers: the second is
refused, naming the first. A lock is stale, and taken over, only where its run is known to be gone: its
ansible-playbook no longer runs on this same controller (a killed or failed run, rerun from where it ran), it is
older than the age limit, its owner is unreadable after a minute (a run killed between mkdir and the write), or
the operator breaks it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

# The holder's run_id where the lock has no readable owner, as the host-side steps report it.
from ansible_collections.sm120.sglang.plugins.module_utils.deploy_lock import MALFORMED

# A run writes owner.json a moment after its mkdir; an unreadable owner younger than this is a run taking it now.
MALFORMED_GRACE_S = 60


class DeployLockError(Exception):
    pass


def run_of(controller, user, pid, started, playbook=""):
    """This run's owner record: who, from where, which ansible-playbook process, since when."""
    if not controller or not str(pid).strip().isdigit():
        raise DeployLockError("cannot name this run for the deploy lock: controller %r, ansible-playbook pid %r"
                              % (controller, pid))
    pid = int(str(pid).strip())
    started = int(float(started))
    return {"run_id": "%s-%d-%d" % (controller, pid, started), "controller": str(controller), "user": str(user or "?"),
            "pid": pid, "started": started, "playbook": str(playbook or "")}


def holder_is_running(process_args):
    """Whether the holder's process, as ``ps -o args=`` on this controller shows it, is an ansible-playbook."""
    return "ansible-playbook" in str(process_args or "")


def _when(epoch):
    try:
        return datetime.datetime.fromtimestamp(float(epoch), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return "an unknown time"


def decide(result, me, host, path, holder_process="", now=0, max_age_h=24, break_lock=False):
    """What this run does about a host's lock, from the module's ``result``: {"action": "proceed" | "take_over" |
    "refuse", "reason": ..., "replace": the holder's run_id to take over}.

    ``holder_process``: ``ps -o args=`` of the holder's pid where the holder ran on this controller ("" where it
    did not, or where no such process runs)."""
    if not isinstance(result, Mapping) or not isinstance(me, Mapping):
        raise DeployLockError("the deploy lock of %s: no result to decide on (%r)" % (host, result))
    if result.get("taken"):
        return {"action": "proceed", "reason": "", "replace": None}
    holder = result.get("holder")
    if not isinstance(holder, Mapping):
        raise DeployLockError("the deploy lock of %s was neither taken nor held: %r" % (host, result))
    run_id = str(holder.get("run_id"))
    age_s = float(now) - float(holder.get("started", holder.get("since", now)) or now)

    def take_over(reason):
        return {"action": "take_over", "reason": reason, "replace": run_id}

    if break_lock:
        return take_over("broken on request (deploy_lock_break)")
    if run_id == MALFORMED:
        if age_s > MALFORMED_GRACE_S:
            return take_over("its owner is unreadable (%s) since %s" % (holder.get("problem"), _when(holder.get("since"))))
        return {"action": "refuse", "replace": None, "reason": (
            "%s: another run is taking the deploy lock %s right now (%s); run again in a minute" % (
                host, path, holder.get("problem")))}
    if holder.get("controller") == me.get("controller") and not holder_is_running(holder_process):
        return take_over("its ansible-playbook (pid %s on %s) no longer runs" % (holder.get("pid"), holder.get("controller")))
    if age_s > float(max_age_h) * 3600:
        return take_over("it is older than deploy_lock_max_age_h (%s h): taken %s" % (max_age_h, _when(holder.get("started"))))
    return {"action": "refuse", "replace": None, "reason": (
        "%s is being deployed by another run: %s@%s (ansible-playbook pid %s, %s), since %s; its lock is %s (run %s). "
        "Wait for that run to end. If it is gone (its controller lost, say), run again from %s, where a dead run's "
        "lock is taken over, or break the lock with -e deploy_lock_break=true" % (
            host, holder.get("user"), holder.get("controller"), holder.get("pid"), holder.get("playbook") or "a playbook",
            _when(holder.get("started")), path, run_id, holder.get("controller")))}

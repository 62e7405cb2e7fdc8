# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model once per fleet: which host fetches it from the hub, and which take it from that host. Pure.

GLM-5-NVFP4 is about 410 GB: every host downloading it costs the fleet's uplink hours and the hub's rate limits. One
host, the source, fetches it (``sglang_service_model_source``, else the first host of the play, which the rollout's
first batch holds); the others take it from the source over the cluster network, batch by batch, while the source
shares it. A host that has the model keeps it. Each host is reached at ``sglang_service_model_share_address`` when
its inventory sets one, else at its ``ansible_host``, else at its inventory name.
"""

from __future__ import annotations

from collections.abc import Mapping


class SpreadError(ValueError):
    """The source cannot be used; the message names the setting and the fix."""


def share_address(host, hostvars):
    own = hostvars.get(host) if isinstance(hostvars, Mapping) else None
    for key in ("sglang_service_model_share_address", "ansible_host"):
        value = own.get(key) if isinstance(own, Mapping) else None
        if value is not None and str(value).strip():
            return str(value).strip()
    return str(host)


def spread_plan(host, batch, play_hosts, present, source=None, hostvars=None):
    """This host's part in putting the model on the batch's hosts.

    ``batch``: the hosts of this batch (``ansible_play_batch``); ``play_hosts``: every host of the play, all batches
    (``ansible_play_hosts_all``); ``present``: host -> whether the model is in place there, for the batch's hosts.
    Returns ``source``, this host's ``action`` (``keep``, ``fetch`` or ``pull``), the ``pullers`` of this batch (in
    batch order) with their addresses (``allow``), and the source's ``address``.
    """
    batch = list(batch or [])
    play_hosts = list(play_hosts or [])
    if host not in batch:
        raise SpreadError("%s is not in this batch (%s)." % (host, ", ".join(batch) or "none"))
    if source in (None, ""):
        if not play_hosts:
            raise SpreadError("The play has no hosts to take the model's source from: set sglang_service_model_source.")
        source = play_hosts[0]
    elif not isinstance(hostvars, Mapping) or source not in hostvars:
        raise SpreadError("sglang_service_model_source is %r, which is not a host of the inventory: name the host "
                          "that fetches the model and shares it, or leave it empty for the play's first host."
                          % (source,))
    present = dict(present or {})
    pullers = [name for name in batch if name != source and not present.get(name, False)]
    if present.get(host, False):
        action = "keep"
    elif host == source:
        action = "fetch"
    else:
        action = "pull"
    return {"source": source, "action": action, "pullers": pullers,
            "allow": [share_address(name, hostvars) for name in pullers],
            "address": share_address(source, hostvars)}


def disk_problem(free_bytes, total_bytes, present_bytes=0, needed_gb=None, path="", host=""):
    """Why the model does not fit where it goes, or None: the listing's total less what is already there (a
    download cut short keeps its finished files), unless ``needed_gb`` (sglang_service_model_disk_gb) says more."""
    try:
        free = int(str(free_bytes).strip())
        need = max(int(total_bytes) - int(present_bytes or 0), 0)
    except (TypeError, ValueError):
        raise SpreadError("The free space (%r) or the model's size (%r) is not a number of bytes."
                          % (free_bytes, total_bytes)) from None
    if needed_gb not in (None, ""):
        need = max(need, int(float(needed_gb) * 1e9))
    if free >= need:
        return None
    return ("The model needs %.1f GB more on the filesystem of %s on %s, which has %.1f GB free. Free space there, "
            "or set sglang_service_model_path to a larger filesystem." % (need / 1e9, path, host, free / 1e9))


def take_problem(results, host="", source="", url="", partial=""):
    """Why a host could not take every file from the source, or None when it took them all.

    ``results``: the registered loop of the role's transfer (one result per file: ``item.path``, ``rc``, ``stderr``).
    The message says how many files came and which did not, rsync's own words for the first, where the taken ones
    are kept, and the two ways on: run again once the source answers (only the rest is taken), or another source.
    """
    if not isinstance(results, (list, tuple)):
        raise SpreadError("the transfer's results are %r, not the list of its loop" % (results,))
    failed = [result for result in results if result.get("failed") or result.get("rc", 0) != 0]
    if not failed:
        return None
    names = [str((result.get("item") or {}).get("path", "?")) for result in failed]
    words = " ".join(str(failed[0].get("stderr") or failed[0].get("msg") or "").split())
    return ("%s took %d of %d files from %s (%s) and could not take %s: %s. The files it took are kept in %s and checked "
            "on the next run, which takes only the rest: run the play again once %s answers, or set "
            "sglang_service_model_source to another host that has the model."
            % (host, len(results) - len(failed), len(results), source, url, ", ".join(names), words or "no reason given",
               partial, source))

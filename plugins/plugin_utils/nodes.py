# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model across several hosts: each host's node rank, its flags, and who starts, serves and is measured. Pure.

SGLang serves one model from several hosts with ``--nnodes N --node-rank R --dist-init-addr HOST:PORT`` on each
of them (the same N and address everywhere, R from 0). The node of rank 0 hosts the rendezvous at that address
and is the only one that serves the API; the others wait for it and answer ``/health`` alone (SGLang 0.5.23,
``Engine._launch_subprocesses``: ``launch_dummy_health_check_server`` for ``node_rank >= 1``), and a node of
rank 1 or more cannot stop on its own: rank 0's shutdown stops every rank. So the nodes of one model are
restarted together, rank 0 first, measured and routed through rank 0 alone, and deployed in one batch.

The nodes of a model are the hosts of an inventory group (``sglang_service_nnodes_group``), in the group's
order: the first is rank 0. Its address for the rendezvous is ``sglang_service_dist_init_addr`` when given
(HOST:PORT), else its ``ansible_host`` (else its inventory name) and ``sglang_service_dist_init_port``.
``NCCL_SOCKET_IFNAME`` and ``GLOO_SOCKET_IFNAME`` name the interface of the cluster network the nodes talk over.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_IFNAME = re.compile(r"^[A-Za-z0-9_.:^=,-]+$")


class NodesError(ValueError):
    """The multi-node settings cannot be used; the message names the setting and the fix."""


def _port(value, name):
    try:
        number = None if isinstance(value, bool) else int(str(value).strip())
    except (TypeError, ValueError):
        number = None
    if number is None or not 1 <= number <= 65535:
        raise NodesError("%s is %r: give a TCP port, 1 to 65535, free on the first node." % (name, value))
    return number


def _address(explicit, first, hostvars, port):
    if explicit:
        text = str(explicit).strip()
        host, sep, tail = text.rpartition(":")
        if not sep or not host.strip("[]") or not tail.isdigit() or not 1 <= int(tail) <= 65535:
            raise NodesError("sglang_service_dist_init_addr is %r: give HOST:PORT of the first node, e.g. "
                             "10.0.0.1:25000, or leave it empty to take the first node's ansible_host and "
                             "sglang_service_dist_init_port." % (explicit,))
        return text
    own = hostvars.get(first) if isinstance(hostvars, Mapping) else None
    address = own.get("ansible_host") if isinstance(own, Mapping) else None
    address = str(address).strip() if address is not None and str(address).strip() else str(first)
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "%s:%d" % (address, _port(port, "sglang_service_dist_init_port"))


def node_plan(groups, group, host, hostvars=None, dist_init_addr="", dist_init_port=25000, socket_ifname=""):
    """This host's part in serving one model.

    ``group``: the inventory group of the model's nodes ('' for a model on this host alone). Returns ``nodes``
    (the group's hosts, rank order; [] alone), ``rank``, ``first`` (the host of rank 0, which serves the API and
    is measured and routed), ``options`` (the flags, flag -> value) and ``env`` (the NCCL and Gloo interface).
    """
    env = {}
    if socket_ifname:
        ifname = str(socket_ifname).strip()
        if not _IFNAME.match(ifname):
            raise NodesError("sglang_service_nccl_socket_ifname is %r: give the network interface the nodes reach "
                             "each other over, e.g. eth1 (or a prefix list NCCL takes, e.g. ^docker,lo)."
                             % (socket_ifname,))
        env = {"NCCL_SOCKET_IFNAME": ifname, "GLOO_SOCKET_IFNAME": ifname}
    if not group:
        return {"nodes": [], "rank": 0, "first": host, "options": {}, "env": env}
    members = (groups or {}).get(group) if isinstance(groups, Mapping) else None
    if not members:
        raise NodesError("sglang_service_nnodes_group is %r, but the inventory has no such group or it has no hosts. "
                         "Put every host that serves the model in that group, rank 0 first." % (group,))
    nodes = list(members)
    if host not in nodes:
        raise NodesError("sglang_service_nnodes_group is %r, but %s is not in that inventory group, so it has no "
                         "node rank. Put every host that serves the model in the group, rank 0 first, or set the "
                         "variable only for the hosts of the group." % (group, host))
    options = {}
    if len(nodes) > 1:
        options = {"--nnodes": len(nodes), "--node-rank": nodes.index(host),
                   "--dist-init-addr": _address(dist_init_addr, nodes[0], hostvars, dist_init_port)}
    return {"nodes": nodes if len(nodes) > 1 else [], "rank": nodes.index(host), "first": nodes[0],
            "options": options, "env": env}


def batch_problem(plan, batch, host):
    """A sentence when the model's nodes are not all in this batch of the rollout (they restart together), else ''."""
    missing = [node for node in plan.get("nodes") or [] if node not in (batch or [])]
    if not missing:
        return ""
    return ("%s serves one model with %s (sglang_service_nnodes_group), which restart together, but this batch "
            "of the rollout does not hold %s. Give the nodes of one model one batch: list them together at the "
            "head of gpu_hosts and make the first batch that size, e.g. -e '{\"sm120_rollout_serial\": [%d, "
            "\"25%%\"]}', or deploy them alone with --limit and -e sm120_rollout_serial=100%%."
            % (host, ", ".join(node for node in plan["nodes"] if node != host), ", ".join(missing),
               len(plan["nodes"])))


def serves_api(host, groups, hostvars):
    """False for a node of rank 1 or more of a model across hosts: it answers /health alone, never requests."""
    own = hostvars.get(host) if isinstance(hostvars, Mapping) else None
    group = own.get("sglang_service_nnodes_group") if isinstance(own, Mapping) else None
    if not group:
        return True
    members = (groups or {}).get(str(group)) if isinstance(groups, Mapping) else None
    return not members or list(members)[0] == host

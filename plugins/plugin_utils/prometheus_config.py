# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Prometheus scrapes, from the inventory: prometheus.yml's content for the fleet. Pure.

Three jobs, whose names the alert rules read (alert_rules.alert_rules' server_job, gpu_job, router_job):
- the SGLang server of every serving host (a node of rank 1 or more of a model across hosts serves no API and no
  /metrics, nodes.serves_api), at the address and port the router reaches it at (router.host_worker_url);
- the GPU exporter (the gpu_exporter role's, or dcgm-exporter) of every GPU host, the model's other nodes included:
  their GPUs spin too; at the address the gpu_exporter role listens on by default;
- the router's exporter on every router host.
Every target carries ``host``, its inventory name, so that a GPU's series and its server's meet in one label; each
server carries ``worker``, the URL the router lists it under, so that smg_worker_health{worker} meets it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import nodes, router
from ansible_collections.sm120.sglang.plugins.plugin_utils.alert_rules import AlertRulesError, duration, job_name


# sglang-router's own --prometheus-port default, which the sglang_router role keeps (docs/evidence/sglang-router.md).
ROUTER_METRICS_PORT = 29000


class ScrapeConfigError(ValueError):
    """The inventory gives no target Prometheus could scrape; the message names the host or variable and the fix."""


def _hosts(groups, group, variable, required):
    hosts = groups.get(group) if isinstance(groups, Mapping) else None
    if hosts is None or (required and not hosts):
        if not required:
            return []
        raise ScrapeConfigError("The inventory group %r (%s) has no hosts to watch: put the GPU hosts in it or set %s "
                                "to the group they are in." % (group, variable, variable))
    return list(hosts)


def _target(url):
    """host:port of a worker URL (http://host:port)."""
    return url.split("://", 1)[1].rstrip("/")


def scrape_config(groups, hostvars, gpu_group="gpu_hosts", router_group="router_hosts", server_port=None,
                  exporter_port=9400, router_metrics_port=None, scrape_interval="15s", evaluation_interval="15s",
                  rules_file="/etc/prometheus/sm120-sglang.rules.yml", server_job="sglang", gpu_job="dcgm",
                  router_job="sglang-router"):
    """prometheus.yml's content (a mapping for to_nice_yaml): global intervals, the rules file, the three jobs.

    ``server_port`` None takes each host's own sglang_service_port (else the service's default), as the router does;
    ``router_metrics_port`` None each router host's own sglang_router_prometheus_port (else sglang-router's 29000).
    A router group the inventory lacks, or an empty one, gives a router job without targets.
    """
    try:
        intervals = {"scrape_interval": duration("scrape_interval", scrape_interval),
                     "evaluation_interval": duration("evaluation_interval", evaluation_interval)}
        jobs = [job_name("server_job", server_job), job_name("gpu_job", gpu_job), job_name("router_job", router_job)]
    except AlertRulesError as exc:
        raise ScrapeConfigError(str(exc)) from None
    if len(set(jobs)) != 3:
        raise ScrapeConfigError("The server, GPU exporter and router jobs need three different names; got %s"
                                % ", ".join(jobs))
    try:
        exporter = router.port(exporter_port, "prometheus_gpu_exporter_port")
        gpu_hosts = _hosts(groups, gpu_group, "prometheus_gpu_hosts_group", True)
        servers, exporters = [], []
        for host in gpu_hosts:
            url = router.host_worker_url(host, hostvars, server_port)
            address = _target(url).rsplit(":", 1)[0]
            exporters.append({"targets": ["%s:%d" % (address, exporter)], "labels": {"host": str(host)}})
            if nodes.serves_api(host, groups, hostvars):
                servers.append({"targets": [_target(url)], "labels": {"host": str(host), "worker": url}})
        routers = []
        for host in _hosts(groups, router_group, "prometheus_router_hosts_group", False):
            if router_metrics_port is None:
                own = hostvars.get(host) if isinstance(hostvars, Mapping) else None
                own = own.get("sglang_router_prometheus_port") if isinstance(own, Mapping) else None
                port = router.port(ROUTER_METRICS_PORT if own is None else own,
                                   "sglang_router_prometheus_port of %s" % host)
            else:
                port = router.port(router_metrics_port, "prometheus_router_metrics_port")
            routers.append({"targets": [_target(router.host_worker_url(host, hostvars, port))],
                            "labels": {"host": str(host)}})
    except router.RouterError as exc:
        raise ScrapeConfigError(str(exc)) from None
    return {
        "global": intervals,
        "rule_files": [str(rules_file)],
        "scrape_configs": [
            {"job_name": server_job, "static_configs": servers},
            {"job_name": gpu_job, "static_configs": exporters},
            {"job_name": router_job, "static_configs": routers},
        ],
    }


def published_loads(groups, hostvars, gpu_group="gpu_hosts"):
    """The loads every serving host's sglang_service published in this run (its profile's), as one mapping keyed
    ``host/load``: the rules take the largest objective and concurrency of them all, so hosts that serve different
    profiles are each held to a bound their own profile accepts. Empty where no host published any (monitoring run
    apart from a deploy: set prometheus_loads)."""
    loads = {}
    hosts = groups.get(gpu_group) if isinstance(groups, Mapping) else None
    for host in hosts or []:
        own = hostvars.get(host) if isinstance(hostvars, Mapping) else None
        published = own.get("sglang_service_loads") if isinstance(own, Mapping) else None
        if isinstance(published, Mapping):
            loads.update({"%s/%s" % (host, name): load for name, load in published.items()})
    return loads

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_router role decides: which serving hosts are the router's workers, its flags, its API calls.

Pure: the inventory (groups, hostvars), the smoke test's verdicts and the router's own
answers in; worker URLs, command-line words and the requests to make out. Every name,
flag and endpoint here is the one sglang-router 0.3.2 has, verified on its wheel and a
running router (docs/evidence/sglang-router.md): ``--policy`` takes the choices below;
``GET /workers`` lists the workers as ``{"workers": [{"id", "url", "is_healthy", ...}]}``;
``POST /workers`` with ``{"url": ...}`` queues an addition (202); ``DELETE /workers/{id}``
queues a removal by the worker's id (202), the URL is refused there (400). There is no
``/add_worker``, ``/remove_worker`` or ``/list_workers`` in 0.3.2 (404).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import launch_profile, nodes, run_verdict

# The choices of --policy in sglang-router 0.3.2 (router_args.py; `bucket` is a --prefill-policy only).
POLICIES = ("random", "round_robin", "cache_aware", "power_of_two", "manual")

# The smoke test's verdict on a host, the fact it sets once every measurement of its run is done (a host whose
# benchmark broke off has none): its status, one of run_verdict.STATUSES. The states that serve are
# run_verdict.SERVES: `pass`, and `regression-rolled-back` (the rejected experiment was switched off and what runs
# met the thresholds).
VERDICT_FACT = "smoke_test_verdict"
HEALTHY_VERDICTS = run_verdict.SERVES

# The sglang_service role's default port, for a host that sets no sglang_service_port of its own.
SERVICE_PORT = launch_profile.SERVICE_PORT

# Flags the role writes itself, refused in sglang_router_extra_args, each with where it is set instead.
MANAGED_FLAGS = {
    "--worker-urls": "sglang_router_workers or sglang_router_worker_group",
    "--api-key": "sglang_router_api_key, which reaches the router from its root-only environment file",
    "--host": "sglang_router_host",
    "--port": "sglang_router_port",
    "--policy": "sglang_router_policy",
    "--health-check-interval-secs": "sglang_router_health_check_interval_secs",
    "--health-check-timeout-secs": "sglang_router_health_check_timeout_secs",
    "--health-failure-threshold": "sglang_router_health_failure_threshold",
    "--health-success-threshold": "sglang_router_health_success_threshold",
    "--health-check-endpoint": "sglang_router_health_check_endpoint",
    "--prometheus-host": "sglang_router_prometheus_host",
    "--prometheus-port": "sglang_router_prometheus_port",
}

# A host name, an IPv4 address or an IPv6 address (bare or in brackets): nothing that would change the URL's meaning.
_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.%a-zA-Z0-9]+\]|[0-9A-Fa-f:.%]+|[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?)$")
_URL = re.compile(r"^(?P<scheme>(?i:https?))://(?P<address>\[[^\]/]+\]|[^:/\[\]]+):(?P<port>[0-9]+)/?$")


class RouterError(Exception):
    """The input cannot make a router; the message names what is wrong and the fix."""


def port(value, name):
    """An integer port 1-65535 from an int or a string of digits; RouterError naming ``name`` otherwise."""
    if isinstance(value, bool) or value is None:
        raise RouterError("%s is %r, not a port: set it to a number from 1 to 65535." % (name, value))
    try:
        number = int(str(value).strip())
    except ValueError:
        raise RouterError("%s is %r, not a port: set it to a number from 1 to 65535." % (name, value)) from None
    if not 1 <= number <= 65535:
        raise RouterError("%s is %d, outside 1-65535: set it to the port the server listens on." % (name, number))
    return number


def policy(value):
    """The routing policy, when sglang-router 0.3.2's --policy takes it."""
    if value not in POLICIES:
        raise RouterError("sglang_router_policy is %r, which sglang-router 0.3.2 does not take: use one of %s."
                          % (value, ", ".join(POLICIES)))
    return value


def worker_url(address, number):
    """``http://address:port``, an IPv6 address in brackets."""
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "http://%s:%d" % (address, number)


def _vars_of(hostvars, host):
    try:
        found = hostvars[host]
    except KeyError:
        found = None
    return found if isinstance(found, Mapping) else {}


def host_worker_url(host, hostvars, worker_port=None):
    """The URL the router reaches ``host``'s server at: its ansible_host (else its name) and the port.

    ``worker_port`` None takes the host's own sglang_service_port, else the service role's default.
    """
    own = _vars_of(hostvars, host)
    if "ansible_host" in own and own["ansible_host"] is not None:
        address = str(own["ansible_host"]).strip()
        where = "its ansible_host"
    else:
        address, where = str(host), "its inventory name"
    if not address or not _ADDRESS.match(address):
        raise RouterError("%s has no address the router can reach it at: %s is %r. Set ansible_host to its IP "
                          "address or DNS name." % (host, where, address))
    if worker_port is None:
        number = port(own.get("sglang_service_port", SERVICE_PORT), "sglang_service_port of %s" % host)
    else:
        number = port(worker_port, "sglang_router_worker_port")
    return normalize_url(worker_url(address.strip("[]"), number))


def smoke_verdict(host, hostvars):
    """The smoke test's verdict on ``host`` in this run (``pass``, ``fail``, ...), None when it measured none."""
    verdict = _vars_of(hostvars, host).get(VERDICT_FACT)
    if not isinstance(verdict, Mapping):
        return None
    status = verdict.get("status")
    return str(status) if status is not None else None


def explicit_workers(urls):
    """sglang_router_workers, each checked to be ``http(s)://address:port``, without repeats."""
    if isinstance(urls, (str, bytes)) or not isinstance(urls, (list, tuple)):
        raise RouterError("sglang_router_workers is %r: give a list of URLs such as http://10.0.0.11:30000." % (urls,))
    chosen = []
    for url in urls:
        match = _URL.match(str(url).strip())
        if not match:
            raise RouterError("sglang_router_workers has %r, not a worker URL: write it as http://ADDRESS:PORT, "
                              "e.g. http://10.0.0.11:30000." % (url,))
        port(match.group("port"), "the port of %s in sglang_router_workers" % url)
        normal = normalize_url(match.group(0))
        if normal not in chosen:
            chosen.append(normal)
    return chosen


def worker_urls(groups, group, hostvars, worker_port=None, explicit=None, include_unmeasured=False,
                check_mode=False):
    """The URLs of the healthy serving hosts of inventory group ``group``, in inventory order.

    A host is healthy when the smoke test's verdict on it in this run is one of HEALTHY_VERDICTS;
    a host it did not measure (``--tags router`` alone) counts only with ``include_unmeasured``.
    In check mode the smoke test measures nothing, so a host it did not measure counts: the
    answer is what the router would get were each such host to pass (a host that failed is still
    left out). A non-empty ``explicit`` list of URLs replaces the group.
    """
    include_unmeasured = include_unmeasured or bool(check_mode)
    if explicit:
        return explicit_workers(explicit)
    hosts = (groups or {}).get(group) if isinstance(groups, Mapping) else None
    if hosts is None:
        raise RouterError("There is no inventory group %r to take the router's workers from: put the serving hosts "
                          "in it, set sglang_router_worker_group to the group they are in, or list them in "
                          "sglang_router_workers." % (group,))
    if not hosts:
        raise RouterError("The inventory group %r has no hosts, so the router would have no workers: put the serving "
                          "hosts in it, or list them in sglang_router_workers." % (group,))
    healthy, left_out = [], []
    for host in hosts:
        # A node of rank 1 or more of a model across hosts answers /health alone: its model is routed through rank 0.
        if not nodes.serves_api(host, groups, hostvars):
            continue
        url = host_worker_url(host, hostvars, worker_port)
        verdict = smoke_verdict(host, hostvars)
        if verdict in HEALTHY_VERDICTS or (verdict is None and include_unmeasured):
            if url not in healthy:
                healthy.append(url)
        else:
            left_out.append("%s (%s)" % (host, "smoke test %s" % verdict if verdict else "not measured in this run"))
    if not healthy:
        raise RouterError("No host of %r is healthy, so the router would have no workers: %s. A worker is a host whose "
                          "smoke test passed in this run; run the smoke test (playbooks/deploy.yml) first, or set "
                          "sglang_router_include_unmeasured: true to take hosts not measured in this run, or list "
                          "the workers in sglang_router_workers." % (group, ", ".join(left_out)))
    return healthy


def _positive(value, name):
    if isinstance(value, bool):
        raise RouterError("%s is %r: set it to a whole number of 1 or more." % (name, value))
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise RouterError("%s is %r: set it to a whole number of 1 or more." % (name, value)) from None
    if number < 1:
        raise RouterError("%s is %d: set it to a whole number of 1 or more." % (name, number))
    return number


def launch_words(settings, extra_args=None):
    """The router's flags as command-line words (its workers and API key reach it apart from these).

    ``settings``: host, port, policy, health_check_interval_secs, health_check_timeout_secs,
    health_failure_threshold, health_success_threshold, health_check_endpoint,
    prometheus_host, prometheus_port. ``extra_args``: more flags, flag -> value, True a
    switch, a list several values, None or False left out.
    """
    endpoint = str(settings.get("health_check_endpoint") or "")
    if not endpoint.startswith("/"):
        raise RouterError("sglang_router_health_check_endpoint is %r: give the path of the workers' health "
                          "endpoint, such as /health." % (endpoint,))
    for name in ("host", "prometheus_host"):
        if not str(settings.get(name) or "").strip():
            raise RouterError("sglang_router_%s is empty: give the address to listen on, e.g. 0.0.0.0." % name)
    flags = [
        ("--host", str(settings["host"]).strip()),
        ("--port", port(settings.get("port"), "sglang_router_port")),
        ("--policy", policy(settings.get("policy"))),
        ("--health-check-interval-secs", _positive(settings.get("health_check_interval_secs"),
                                                   "sglang_router_health_check_interval_secs")),
        ("--health-check-timeout-secs", _positive(settings.get("health_check_timeout_secs"),
                                                  "sglang_router_health_check_timeout_secs")),
        ("--health-failure-threshold", _positive(settings.get("health_failure_threshold"),
                                                 "sglang_router_health_failure_threshold")),
        ("--health-success-threshold", _positive(settings.get("health_success_threshold"),
                                                 "sglang_router_health_success_threshold")),
        ("--health-check-endpoint", endpoint),
        ("--prometheus-host", str(settings["prometheus_host"]).strip()),
        ("--prometheus-port", port(settings.get("prometheus_port"), "sglang_router_prometheus_port")),
    ]
    # Verified: a second listener on the port makes the router panic at start ("failed to install Prometheus
    # metrics exporter: ... Address already in use").
    if flags[1][1] == flags[-1][1]:
        raise RouterError("sglang_router_port and sglang_router_prometheus_port are both %d: the router would fail to "
                          "start its metrics exporter (address already in use). Give them different ports."
                          % flags[1][1])
    for flag, value in (extra_args or {}).items():
        if not str(flag).startswith("--"):
            raise RouterError("%r in sglang_router_extra_args is not a flag of sglang_router.launch_router: flags "
                              "start with --." % (flag,))
        if flag in MANAGED_FLAGS:
            raise RouterError("%s in sglang_router_extra_args is the role's to write: set %s instead."
                              % (flag, MANAGED_FLAGS[flag]))
        if value is not None and value is not False:
            flags.append((flag, value))
    words = []
    for flag, value in flags:
        words.append(flag)
        if value is True:
            continue
        if isinstance(value, (list, tuple)):
            words.extend(str(item) for item in value)
        else:
            words.append(str(value))
    return words


def local_url(host, number):
    """Where a play on the router's own host asks it: over the address it listens on, loopback for any address."""
    host = str(host or "").strip()
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return worker_url(host.strip("[]") if host.startswith("[") else host, port(number, "sglang_router_port"))


def normalize_url(url):
    """A worker URL as compared here: scheme and address lower-case, no trailing slash."""
    text = str(url).strip().rstrip("/")
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text
    address, slash, path = rest.partition("/")
    return "%s://%s%s%s" % (scheme.lower(), address.lower(), slash, path)


def listed_workers(answer, router="the router"):
    """Worker URL -> the router's id for it, from the JSON of ``GET /workers``."""
    workers = answer.get("workers") if isinstance(answer, Mapping) else None
    if not isinstance(workers, list):
        raise RouterError("%s answered GET /workers with %r, not {\"workers\": [...]} as sglang-router 0.3.2 does: "
                          "is something else listening on its port, or another version running (check "
                          "sglang_router_version)?" % (router, answer if not isinstance(answer, str) else answer[:200]))
    listed = {}
    for worker in workers:
        if isinstance(worker, Mapping) and worker.get("url") and worker.get("id"):
            listed[normalize_url(worker["url"])] = {"id": str(worker["id"]), "healthy": bool(worker.get("is_healthy"))}
    return listed


def _router_base(router_url):
    return str(router_url).strip().rstrip("/")


def add_call(listed, router_url, url, api_key=""):
    """The request that makes ``url`` a worker of the router; None when it is one already.

    The key goes in the body: the router's README says a worker added at run time does not get the
    router's own key ("dynamic workers must supply keys explicitly"). 0.3.2 was seen to pass it on
    all the same (docs/evidence/sglang-router.md); sending it does not depend on that.
    """
    if normalize_url(url) in (listed or {}):
        return None
    body = {"url": normalize_url(url)}
    if api_key:
        body["api_key"] = api_key
    return {"url": _router_base(router_url) + "/workers", "method": "POST", "body": body, "status_code": [202]}


def remove_call(listed, router_url, url):
    """The request that takes ``url`` out of the router's workers; None when it is not one."""
    worker = (listed or {}).get(normalize_url(url))
    if worker is None:
        return None
    return {"url": "%s/workers/%s" % (_router_base(router_url), worker["id"]), "method": "DELETE",
            # 404: the router removed it meanwhile (its own job, or another run), which is what was asked.
            "status_code": [202, 404]}


def worker_changes(listed, wanted):
    """What makes the running router's workers ``wanted``: URLs to add and URLs to remove, in order."""
    normal = [normalize_url(url) for url in wanted or []]
    return {"add": [url for url in normal if url not in (listed or {})],
            "remove": [url for url in (listed or {}) if url not in normal]}


def smoke_summary(result, router_url, workers):
    """The measurement through the router, as clients reach the model: its numbers in one line, and the problem
    that fails the play (a request that failed, was never sent, or none answered), naming the router and its
    workers, or None."""
    if not isinstance(result, Mapping):
        raise RouterError("The measurement through the router is not a serving_benchmark result: %r" % (result,))
    completed = int(result.get("completed_requests") or 0)
    failed = int(result.get("failed_requests") or 0)
    not_started = int(result.get("not_started_requests") or 0)
    total = completed + failed + not_started
    ttft = result.get("ttft_ms") or {}
    summary = ("Through the router at %s to %s: %.1f output tok/s, %d of %d requests answered, TTFT p50 %s ms, "
               "p99 %s ms" % (router_url, ", ".join(workers or []) or "no worker",
                              float(result.get("output_tokens_per_s") or 0), completed, total, ttft.get("p50"),
                              ttft.get("p99")))
    problem = None
    if failed or not_started or not completed:
        problem = ("%s. %d failed and %d never sent (%s). Clients see these failures: look at the router's journal "
                   "and at each worker's /health." % (
                       summary, failed, not_started, "; ".join(result.get("errors") or []) or "no error recorded"))
    return {"summary": summary, "problem": problem}

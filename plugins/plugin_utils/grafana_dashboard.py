# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Grafana dashboard of the served fleet, on the series the alert rules record. Pure.

One row a question the seed's regression asked: how fast is each host (output tokens a second), is it fed
(requests running and queued), do users wait (p99 time to first token and between tokens), and what do its GPUs do
(power as a share of the limit, utilisation, SM clock as a share of its top), and which cause alerts fire. The GPU
and latency panels read the recording rules of alert_rules.py by the names those rules give them, taken from the
rules themselves (recorded), so a renamed record cannot leave a panel querying nothing; the throughput panel reads
SGLang's own counter.
"""

from __future__ import annotations

from ansible_collections.sm120.sglang.plugins.plugin_utils import alert_rules

# SGLang's counter of generated tokens (docs/evidence/real-sglang-h200/2026-12-03-8b/metrics.txt).
GENERATED_TOKENS = "sglang:generation_tokens_total"
UID = "sm120-sglang-fleet"


def recorded(rules, name):
    """The record of ``rules`` (alert_rules.alert_rules's output) whose name starts with ``name``: the windowed
    records carry the window in their names."""
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("record", "").startswith(name):
                return rule["record"]
    raise alert_rules.AlertRulesError("the alert rules record no %s: the dashboard has nothing to show for it" % name)


def _panel(number, title, targets, unit, x, y, kind="timeseries", width=12):
    return {"id": number, "type": kind, "title": title, "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 8, "w": width, "x": x, "y": y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": chr(ord("A") + index), "expr": expr, "legendFormat": legend}
                        for index, (expr, legend) in enumerate(targets)]}


def dashboard(window="10m"):
    """The dashboard's JSON model (Grafana's schema 39), every query one the alert rules of this window make true."""
    rules = alert_rules.alert_rules(window=window)
    power = recorded(rules, "sm120:gpu_power_fraction")
    clock = recorded(rules, "sm120:gpu_clock_fraction")
    running = recorded(rules, "sm120:host_running_requests")
    queued = recorded(rules, "sm120:host_queued_requests")
    ttft = recorded(rules, "sm120:host_ttft_seconds")
    itl = recorded(rules, "sm120:host_itl_seconds")
    panels = [
        _panel(1, "Output tokens a second, by host",
               [("sum by (host) (rate(%s[1m]))" % GENERATED_TOKENS, "{{host}}")], "short", 0, 0),
        _panel(2, "Requests running and queued, by host",
               [(running, "{{host}} running"), (queued, "{{host}} queued")], "short", 12, 0),
        _panel(3, "p99 time to first token and between tokens over %s, by host" % window,
               [(ttft, "{{host}} TTFT"), (itl, "{{host}} ITL")], "s", 0, 8),
        _panel(4, "GPU power, share of the limit", [(power, "{{host}} GPU {{gpu}}")], "percentunit", 12, 8),
        _panel(5, "GPU utilisation", [("DCGM_FI_DEV_GPU_UTIL", "{{host}} GPU {{gpu}}")], "percent", 0, 16),
        _panel(6, "SM clock, share of its top", [(clock, "{{host}} GPU {{gpu}}")], "percentunit", 12, 16),
        _panel(7, "Cause alerts firing (the smoke test's verdict, standing)",
               [('ALERTS{alertstate="firing", cause!=""}', "{{host}} GPU {{gpu}}: {{alertname}} ({{cause}})")],
               "short", 0, 24, kind="table", width=24),
    ]
    return {"uid": UID, "title": "SGLang fleet (sm120.sglang)", "schemaVersion": 39, "version": 1,
            "time": {"from": "now-6h", "to": "now"}, "refresh": "30s", "tags": ["sglang", "sm120"],
            "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                     "label": "Prometheus"}]},
            "panels": panels}


def provisioning(path):
    """Grafana's dashboard provisioning file that loads the dashboards of the folder ``path``."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise alert_rules.AlertRulesError("the dashboards' folder must be an absolute path; got %r" % (path,))
    return {"apiVersion": 1, "providers": [{"name": "sm120-sglang", "type": "file", "disableDeletion": False,
                                            "updateIntervalSeconds": 60, "options": {"path": path}}]}


def queries(model):
    """Every PromQL query of a dashboard model, in panel order."""
    return [target["expr"] for panel in model["panels"] for target in panel["targets"]]

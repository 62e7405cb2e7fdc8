# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils/grafana_dashboard.py: the dashboard queries only what the rules record, the real SGLang server serves
and the GPU exporter serves; and the SGLang stand-in serves every SGLang name the rules and the dashboard read, each
one the real 0.5.16 server served (its /metrics captured on the H200 harness)."""

from __future__ import annotations

import pathlib
import re
import urllib.request

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import alert_rules, grafana_dashboard

ROOT = pathlib.Path(__file__).resolve().parents[4]
REAL_METRICS = ROOT / "docs" / "evidence" / "real-sglang-h200" / "2026-12-03-8b" / "metrics.txt"
SERIES = re.compile(r"\b((?:sglang|sm120|DCGM_FI_DEV)[:A-Za-z0-9_]*[A-Za-z0-9])\b")


def _rules_text(window="10m"):
    return " ".join(rule.get("expr", "") for group in alert_rules.alert_rules(window=window)["groups"]
                    for rule in group["rules"])


def _recorded(window="10m"):
    return {rule["record"] for group in alert_rules.alert_rules(window=window)["groups"] for rule in group["rules"]
            if "record" in rule}


def _sglang_names(text):
    """SGLang's metric names in PromQL text, a histogram's _bucket read as its name."""
    return {re.sub(r"_bucket$", "", name) for name in SERIES.findall(text) if name.startswith("sglang:")}


def test_every_panel_reads_a_record_of_the_rules_or_a_series_the_server_or_the_exporter_serves():
    model = grafana_dashboard.dashboard("10m")
    assert model["uid"] == "sm120-sglang-fleet" and len(model["panels"]) == 7
    served = {name for name, _kind, _help in alert_rules.COUNTERS} | {grafana_dashboard.GENERATED_TOKENS}
    for query in grafana_dashboard.queries(model):
        for name in SERIES.findall(query):
            assert name in _recorded("10m") | served, (name, query)
    # The windowed records carry the window in their names: another window, other names, still recorded.
    assert "sm120:gpu_power_fraction" in grafana_dashboard.queries(grafana_dashboard.dashboard("30s"))
    assert any(":p99_30s" in query for query in grafana_dashboard.queries(grafana_dashboard.dashboard("30s")))


def test_the_provisioning_file_loads_the_folder_and_refuses_a_relative_one():
    assert grafana_dashboard.provisioning("/var/lib/grafana/dashboards/sm120")["providers"][0]["options"] == {
        "path": "/var/lib/grafana/dashboards/sm120"}
    with pytest.raises(alert_rules.AlertRulesError, match="absolute path"):
        grafana_dashboard.provisioning("dashboards")


def test_the_sglang_names_the_rules_and_dashboard_read_are_the_real_servers_and_the_standins(start_standin):
    wanted = _sglang_names(_rules_text()) | _sglang_names(" ".join(grafana_dashboard.queries(
        grafana_dashboard.dashboard())))
    assert wanted == {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:time_to_first_token_seconds",
                      "sglang:inter_token_latency_seconds", "sglang:generation_tokens_total"}
    real = _sglang_names(REAL_METRICS.read_text())
    assert wanted <= real, wanted - real
    # The stand-in, as molecule and the role tests run it, with --enable-metrics, after one request.
    url = start_standin("--enable-metrics")
    body = b'{"model": "m", "prompt": "a b c", "max_tokens": 4, "ignore_eos": true}'
    request = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).close()
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    assert wanted <= _sglang_names(text), wanted - _sglang_names(text)
    # The gaps between the request's 4 tokens: 3 observations of the time between tokens.
    assert re.search(r'^sglang:inter_token_latency_seconds_count\{[^}]*\} 3\.0$', text, re.M), text

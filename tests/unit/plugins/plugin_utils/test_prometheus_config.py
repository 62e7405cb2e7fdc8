# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""prometheus_config: what Prometheus scrapes, from the inventory, and the loads the serving hosts published."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import prometheus_config as pc

HOSTVARS = {"gpu1": {"ansible_host": "10.0.0.11"}, "gpu2": {"ansible_host": "fd00::12", "sglang_service_port": 30001},
            "router1": {"ansible_host": "10.0.0.2", "sglang_router_prometheus_port": 29100}}
GROUPS = {"gpu_hosts": ["gpu1", "gpu2"], "router_hosts": ["router1"]}


def jobs(config):
    return {job["job_name"]: job["static_configs"] for job in config["scrape_configs"]}


def test_targets_carry_the_host_and_each_server_the_url_the_router_lists_it_under():
    scraped = jobs(pc.scrape_config(GROUPS, HOSTVARS))
    assert scraped["sglang"] == [
        {"targets": ["10.0.0.11:30000"], "labels": {"host": "gpu1", "worker": "http://10.0.0.11:30000"}},
        {"targets": ["[fd00::12]:30001"], "labels": {"host": "gpu2", "worker": "http://[fd00::12]:30001"}}]
    assert scraped["dcgm"] == [{"targets": ["10.0.0.11:9400"], "labels": {"host": "gpu1"}},
                               {"targets": ["[fd00::12]:9400"], "labels": {"host": "gpu2"}}]
    # The router host's own metrics port, where its inventory sets one.
    assert scraped["sglang-router"] == [{"targets": ["10.0.0.2:29100"], "labels": {"host": "router1"}}]


def test_ports_given_replace_every_hosts_own():
    scraped = jobs(pc.scrape_config(GROUPS, HOSTVARS, server_port=31000, exporter_port=9500, router_metrics_port=29001))
    assert [entry["targets"] for entry in scraped["sglang"]] == [["10.0.0.11:31000"], ["[fd00::12]:31000"]]
    assert [entry["targets"] for entry in scraped["dcgm"]] == [["10.0.0.11:9500"], ["[fd00::12]:9500"]]
    assert scraped["sglang-router"][0]["targets"] == ["10.0.0.2:29001"]


def test_the_second_node_of_a_model_across_hosts_is_watched_for_its_gpus_alone():
    hostvars = dict(HOSTVARS, gpu1=dict(HOSTVARS["gpu1"], sglang_service_nnodes_group="pair"),
                    gpu2=dict(HOSTVARS["gpu2"], sglang_service_nnodes_group="pair"))
    scraped = jobs(pc.scrape_config(dict(GROUPS, pair=["gpu1", "gpu2"]), hostvars))
    assert [entry["labels"]["host"] for entry in scraped["sglang"]] == ["gpu1"]
    assert [entry["labels"]["host"] for entry in scraped["dcgm"]] == ["gpu1", "gpu2"]


def test_without_a_router_group_the_router_job_has_no_targets():
    assert jobs(pc.scrape_config({"gpu_hosts": ["gpu1"]}, HOSTVARS))["sglang-router"] == []


def test_the_configuration_names_the_rules_file_and_the_intervals():
    config = pc.scrape_config(GROUPS, HOSTVARS, scrape_interval="30s", evaluation_interval="1m", rules_file="/r.yml")
    assert config["global"] == {"scrape_interval": "30s", "evaluation_interval": "1m"}
    assert config["rule_files"] == ["/r.yml"]


@pytest.mark.parametrize("groups, hostvars, kwargs, named", [
    ({"gpu_hosts": []}, HOSTVARS, {}, "The inventory group 'gpu_hosts' (prometheus_gpu_hosts_group) has no hosts"),
    ({}, HOSTVARS, {}, "The inventory group 'gpu_hosts' (prometheus_gpu_hosts_group) has no hosts"),
    ({"gpu_hosts": ["bad host"]}, {}, {}, "bad host has no address the router can reach it at"),
    (GROUPS, HOSTVARS, {"exporter_port": 70000}, "prometheus_gpu_exporter_port is 70000, outside 1-65535"),
    (GROUPS, dict(HOSTVARS, router1={"sglang_router_prometheus_port": "x"}), {},
     "sglang_router_prometheus_port of router1 is 'x', not a port"),
    (GROUPS, HOSTVARS, {"scrape_interval": "often"}, "scrape_interval must be a Prometheus duration"),
    (GROUPS, HOSTVARS, {"gpu_job": "sglang"}, "three different names; got sglang, sglang, sglang-router"),
])
def test_an_inventory_prometheus_cannot_scrape_is_refused_naming_the_fix(groups, hostvars, kwargs, named):
    with pytest.raises(pc.ScrapeConfigError) as refused:
        pc.scrape_config(groups, hostvars, **kwargs)
    assert named in str(refused.value)


def test_the_published_loads_of_every_serving_host_are_kept_apart_by_host():
    hostvars = {"gpu1": {"sglang_service_loads": {"low": {"concurrency": 4}}},
                "gpu2": {"sglang_service_loads": {"low": {"concurrency": 8}, "high": {"concurrency": 64}}},
                "gpu3": {}}
    assert pc.published_loads({"gpu_hosts": ["gpu1", "gpu2", "gpu3"]}, hostvars) == {
        "gpu1/low": {"concurrency": 4}, "gpu2/low": {"concurrency": 8}, "gpu2/high": {"concurrency": 64}}
    assert pc.published_loads({}, hostvars) == {}

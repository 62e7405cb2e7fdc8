# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prometheus role's two files, rendered as the role renders them and read by promtool as its validate does.

The templates are rendered by Ansible's own Templar with the role's defaults, vars/main.yml and vars/Debian.yml over
an inventory of two GPU hosts (the second a rank-1 node of a model across hosts), one of which published its
profile's loads in this run, and a router host. promtool check config then reads the configuration and the rules
file it names, which is what the role's validate runs before either file is written.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "prometheus"
LOADS = {"low": {"concurrency": 4, "slo": {"ttft_p99_ms": 3000, "itl_p99_ms": 150}},
         "high": {"concurrency": 64, "slo": {"ttft_p99_ms": 15000, "itl_p99_ms": 1000}}}


def _templar(rules_file, inventory=None):
    loader = DataLoader()
    hostvars = {"gpu1": {"ansible_host": "10.0.0.11", "sglang_service_loads": LOADS},
                "gpu2": {"ansible_host": "10.0.0.12", "sglang_service_nnodes_group": "pair"},
                "gpu0": {"ansible_host": "10.0.0.10", "sglang_service_nnodes_group": "pair",
                         "sglang_service_port": 30001},
                "router1": {"ansible_host": "10.0.0.2"},
                "mon1": {"ansible_host": "10.0.0.3"}}
    variables = {"inventory_hostname": "mon1", "hostvars": hostvars, "ansible_check_mode": False,
                 "groups": {"all": list(hostvars), "gpu_hosts": ["gpu1", "gpu0", "gpu2"], "pair": ["gpu0", "gpu2"],
                            "router_hosts": ["router1"], "monitoring_hosts": ["mon1"]}}
    variables.update(loader.load_from_file(str(ROLE / "defaults" / "main.yml"), trusted_as_template=True))
    variables.update({"prometheus_rules_file": str(rules_file)}, **(inventory or {}))
    variables.update(loader.load_from_file(str(ROLE / "vars" / "main.yml"), trusted_as_template=True))
    variables.update(loader.load_from_file(str(ROLE / "vars" / "Debian.yml"), trusted_as_template=True))
    return Templar(loader=loader, variables=variables)


def _render(templar, name):
    return templar.template(trust_as_template((ROLE / "templates" / name).read_text()), escape_backslashes=False)


def _write_both(tmp_path, inventory=None):
    templar = _templar(tmp_path / "sm120-sglang.rules.yml", inventory)
    (tmp_path / "sm120-sglang.rules.yml").write_text(_render(templar, "sm120-sglang.rules.yml.j2"))
    (tmp_path / "prometheus.yml").write_text(_render(templar, "prometheus.yml.j2"))
    return yaml.safe_load((tmp_path / "prometheus.yml").read_text()), yaml.safe_load(
        (tmp_path / "sm120-sglang.rules.yml").read_text())


def _promtool(*args):
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed, so the role's files cannot be checked as its validate checks them: "
                    "run `bash scripts/setup.sh --tests` (it installs Debian's prometheus package, which has promtool)")
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=120, check=False)


def test_promtool_reads_the_configuration_and_the_rules_it_names_as_the_roles_validate_does(tmp_path):
    _write_both(tmp_path)
    checked = _promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 27 rules found" in checked.stdout


def test_each_server_is_scraped_where_the_router_reaches_it_and_each_gpu_host_for_its_gpus(tmp_path):
    config, _rules = _write_both(tmp_path)
    jobs = {job["job_name"]: job["static_configs"] for job in config["scrape_configs"]}
    # gpu2 is the pair's rank 1: its GPUs are watched, it serves no API.
    assert jobs["sglang"] == [
        {"targets": ["10.0.0.11:30000"], "labels": {"host": "gpu1", "worker": "http://10.0.0.11:30000"}},
        {"targets": ["10.0.0.10:30001"], "labels": {"host": "gpu0", "worker": "http://10.0.0.10:30001"}}]
    assert jobs["dcgm"] == [{"targets": ["10.0.0.11:9400"], "labels": {"host": "gpu1"}},
                            {"targets": ["10.0.0.10:9400"], "labels": {"host": "gpu0"}},
                            {"targets": ["10.0.0.12:9400"], "labels": {"host": "gpu2"}}]
    assert jobs["sglang-router"] == [{"targets": ["10.0.0.2:29000"], "labels": {"host": "router1"}}]
    assert config["rule_files"] == [str(tmp_path / "sm120-sglang.rules.yml")]
    assert config["global"] == {"scrape_interval": "15s", "evaluation_interval": "15s"}


def test_the_rules_take_the_objectives_of_the_loads_the_serving_hosts_published(tmp_path):
    _config, rules = _write_both(tmp_path)
    alerts = {rule["alert"]: rule["expr"] for rule in rules["groups"][1]["rules"]}
    assert alerts["SglangTtftOverObjective"] == "sm120:host_ttft_seconds:p99_10m > 15"
    assert alerts["SglangItlOverObjective"] == "sm120:host_itl_seconds:p99_10m > 1"
    assert alerts["SglangRequestsQueueing"] == "sm120:host_queued_requests:median10m > 64"


def test_loads_given_replace_the_published_ones_and_thresholds_reach_the_rules(tmp_path):
    _config, rules = _write_both(tmp_path, {
        "prometheus_loads": {"chat": {"concurrency": 16, "slo": {"ttft_p99_ms": 2500}}},
        "prometheus_cause_thresholds": {"spin_max_power_fraction": 0.25},
        "prometheus_alert_window": "5m"})
    alerts = {rule["alert"]: rule["expr"] for rule in rules["groups"][1]["rules"]}
    assert alerts["SglangTtftOverObjective"] == "sm120:host_ttft_seconds:p99_5m > 2.5"
    assert "SglangItlOverObjective" not in alerts
    assert alerts["SglangRequestsQueueing"] == "sm120:host_queued_requests:median5m > 16"
    assert alerts["SglangGpuSpinWait"].startswith("sm120:gpu_power_fraction:median5m < 0.25 and")


def test_without_published_loads_ttft_is_held_to_the_smoke_tests_bound_where_the_inventory_sets_it(tmp_path):
    inventory = {"hostvars": {"gpu1": {"ansible_host": "10.0.0.11"}}, "groups": {"gpu_hosts": ["gpu1"]},
                 "smoke_test_max_ttft_p99_ms": 20000}
    _config, rules = _write_both(tmp_path, inventory)
    alerts = {rule["alert"]: rule["expr"] for rule in rules["groups"][1]["rules"]}
    assert alerts["SglangTtftOverObjective"] == "sm120:host_ttft_seconds:p99_10m > 20"
    assert "SglangItlOverObjective" not in alerts and "SglangRequestsQueueing" not in alerts


def _tasks(node):
    for task in node:
        yield task
        yield from _tasks(task.get("block") or [])


def _rules_loaded(answer, rules_file, alerts):
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    until = next(task for task in _tasks(tasks) if task.get("name") == "Wait until Prometheus has loaded the alert rules")
    templar = Templar(loader=DataLoader(), variables={
        "__prometheus_rules_api": {"status": 200, "json": answer}, "prometheus_rules_file": rules_file,
        "__prometheus_rules_now": {"groups": [{"rules": []}, {"rules": [{"alert": name} for name in alerts]}]}})
    return templar.template(trust_as_template("{{ %s }}" % until["until"].strip()))


def test_the_check_knows_its_rules_in_a_real_prometheus_answer_and_nothing_less():
    # GET /api/v1/rules?type=alert of Debian's Prometheus 2.42 with the role's files in /tmp/mon38 (the evidence run).
    answer = json.loads((ROOT / "tests" / "unit" / "roles" / "fixtures" / "prometheus-2.42-rules-api.json").read_text())
    loaded = [rule["name"] for group in answer["data"]["groups"] for rule in group["rules"]]
    assert len(loaded) == 10
    assert _rules_loaded(answer, "/tmp/mon38/rules.yml", loaded) is True
    assert _rules_loaded(answer, "/etc/prometheus/other.rules.yml", loaded) is False
    assert _rules_loaded(answer, "/tmp/mon38/rules.yml", loaded + ["SglangNewAlert"]) is False


def test_the_dashboard_and_its_provisioning_file_as_the_role_writes_them(tmp_path):
    templar = _templar(tmp_path / "sm120-sglang.rules.yml", {"prometheus_grafana_dashboards_dir": "/srv/dashboards",
                                                             "prometheus_alert_window": "5m"})
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    block = next(task for task in tasks if task["name"] == "Write the Grafana dashboard and its provisioning file")
    written = {task["ansible.builtin.copy"]["dest"]: task["ansible.builtin.copy"]["content"] for task in block["block"]
               if "ansible.builtin.copy" in task}
    dashboard = json.loads(templar.template(trust_as_template(
        written["{{ prometheus_grafana_dashboards_dir }}/sm120-sglang-fleet.json"])))
    assert dashboard["uid"] == "sm120-sglang-fleet"
    # The windowed records of the rules at the role's window.
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert "sm120:host_ttft_seconds:p99_5m" in exprs
    provisioning = yaml.safe_load(templar.template(trust_as_template(
        written["{{ prometheus_grafana_provisioning_dir }}/sm120-sglang.yml"])))
    assert provisioning["providers"][0]["options"]["path"] == "/srv/dashboards"

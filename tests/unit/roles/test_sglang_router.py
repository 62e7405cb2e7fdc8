# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_router role's unit, environment file and launcher, as systemd and the launcher read them.

The templates are rendered by Ansible's own Templar with the role's defaults and
vars/main.yml over an inventory of serving hosts with smoke verdicts; the unit's
ExecStart is split the way systemd splits it, and the environment file read the
way systemd reads an EnvironmentFile= (the readers of test_sglang_service).
"""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.sm120.sglang.tests.unit.roles.test_sglang_service import _env_file, _exec_argv, _unit_directives

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "sglang_router"
API_KEY = 'k3y with spaces, "quotes", $HOME, 100% and \\ backslash'


def _verdict(status):
    return {"smoke_test_verdict": {"status": status}}


def _templar(inventory=None):
    loader = DataLoader()
    hostvars = {"gpu1": dict(_verdict("pass"), ansible_host="10.0.0.11"),
                "gpu2": dict(_verdict("fail"), ansible_host="10.0.0.12"),
                "gpu3": dict(_verdict("pass"), ansible_host="10.0.0.13", sglang_service_port=30001),
                "router1": {"ansible_host": "10.0.0.2"}}
    # Ansible defines ansible_check_mode in every play; here a real run's.
    variables = {"inventory_hostname": "router1", "hostvars": hostvars, "ansible_check_mode": False,
                 "groups": {"all": list(hostvars), "gpu_hosts": ["gpu1", "gpu2", "gpu3"], "router_hosts": ["router1"]}}
    variables.update(loader.load_from_file(str(ROLE / "defaults" / "main.yml"), trusted_as_template=True))
    variables.update(inventory or {})
    variables.update(loader.load_from_file(str(ROLE / "vars" / "main.yml"), trusted_as_template=True))
    return Templar(loader=loader, variables=variables)


def _render(templar, name):
    source = trust_as_template((ROLE / "templates" / name).read_text())
    return templar.template(source, escape_backslashes=False, overrides=dict(trim_blocks=True, lstrip_blocks=False))


def _service(templar):
    return dict(_unit_directives(_render(templar, "sglang-router.service.j2"))["Service"])


def _launcher():
    spec = importlib.util.spec_from_file_location("sglang_router_launch", ROLE / "files" / "sglang-router-launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_unit_runs_the_launcher_with_the_routers_flags_and_restarts_on_failure():
    service = _service(_templar())
    assert _exec_argv(service["ExecStart"], {}) == [
        "/opt/sglang-router/bin/python", "/usr/local/libexec/sglang-router-launch", "/etc/sglang-router/workers.json",
        "--host", "0.0.0.0", "--port", "30000", "--policy", "cache_aware",
        "--health-check-interval-secs", "10", "--health-check-timeout-secs", "10",
        "--health-failure-threshold", "3", "--health-success-threshold", "2", "--health-check-endpoint", "/health",
        "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000"]
    assert service["Restart"] == "on-failure"
    assert (service["User"], service["Group"]) == ("sglang-router", "sglang-router")
    assert service["EnvironmentFile"] == "/etc/sglang-router/router.env"
    assert "AmbientCapabilities" not in service


def test_the_workers_are_the_hosts_that_passed_each_at_its_own_port():
    assert _templar().template(trust_as_template("{{ __sglang_router_worker_urls }}")) == [
        "http://10.0.0.11:30000", "http://10.0.0.13:30001"]


def test_check_mode_takes_the_hosts_not_measured_and_leaves_out_the_failed_one():
    unmeasured = {"gpu1": {"ansible_host": "10.0.0.11"}, "gpu2": dict(_verdict("fail"), ansible_host="10.0.0.12"),
                  "gpu3": {"ansible_host": "10.0.0.13"}, "router1": {"ansible_host": "10.0.0.2"}}
    templar = _templar({"ansible_check_mode": True})
    templar.available_variables = dict(templar.available_variables, hostvars=unmeasured)
    assert templar.template(trust_as_template("{{ __sglang_router_worker_urls }}")) == [
        "http://10.0.0.11:30000", "http://10.0.0.13:30000"]


def test_the_api_key_is_in_the_root_only_environment_file_never_in_the_unit():
    templar = _templar({"sglang_router_api_key": API_KEY})
    unit = _render(templar, "sglang-router.service.j2")
    assert "k3y" not in unit
    assert _env_file(_render(templar, "sglang-router.env.j2")) == {"SGLANG_ROUTER_API_KEY": API_KEY}
    assert _env_file(_render(_templar(), "sglang-router.env.j2")) == {}


def test_a_port_below_1024_gets_the_capability_instead_of_root():
    service = _service(_templar({"sglang_router_port": 80}))
    assert service["AmbientCapabilities"] == "CAP_NET_BIND_SERVICE"
    assert service["User"] == "sglang-router"


def test_extra_flags_follow_as_the_router_reads_them():
    argv = _exec_argv(_service(_templar({"sglang_router_extra_args": {
        "--log-level": "warn", "--cors-allowed-origins": ["https://a b", "https://c"], "--disable-retries": True}}))
        ["ExecStart"], {})
    assert argv[-6:] == ["--log-level", "warn", "--cors-allowed-origins", "https://a b", "https://c", "--disable-retries"]


def test_the_launcher_adds_the_workers_of_the_file_and_the_key_of_the_environment(tmp_path):
    workers = tmp_path / "workers.json"
    workers.write_text(json.dumps(["http://10.0.0.11:30000", "http://10.0.0.13:30001"]))
    args = _launcher().router_args([str(workers), "--port", "30000"], {"SGLANG_ROUTER_API_KEY": API_KEY})
    assert args == ["--port", "30000", "--worker-urls", "http://10.0.0.11:30000", "http://10.0.0.13:30001",
                    "--api-key", API_KEY]
    workers.write_text("[]")
    assert _launcher().router_args([str(workers), "--port", "30000"], {}) == ["--port", "30000"]


@pytest.mark.parametrize("content", ['{"workers": []}', '["http://a:1", 2]'])
def test_the_launcher_refuses_a_workers_file_that_is_not_a_list_of_urls(tmp_path, content):
    workers = tmp_path / "workers.json"
    workers.write_text(content)
    with pytest.raises(SystemExit, match="must hold a JSON list of worker URLs"):
        _launcher().router_args([str(workers)], {})

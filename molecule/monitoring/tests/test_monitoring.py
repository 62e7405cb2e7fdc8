"""The watch after side_effect, read on the hosts: the exporters and Prometheus running and enabled, every target of
the inventory scraped and up, the collection's rules loaded at the scenario's window, and Prometheus's own record of
the spin-wait alert (its ALERTS series): fired for the spinning host's eight GPUs, for no GPU of the other host, and
not firing now."""

import json
import shlex
import urllib.parse

import pytest

GPU_HOSTS = ["sm120-watch-gpu-1", "sm120-watch-gpu-2"]
ROUTER = "sm120-watch-monitor"
PROMETHEUS = "http://127.0.0.1:9090"


@pytest.fixture
def name(host):
    return host.backend.get_hostname()


def monitoring_host(name):
    if name != ROUTER:
        pytest.skip("the monitoring host's")


def get_json(host, url):
    script = "import urllib.request, sys; sys.stdout.write(urllib.request.urlopen(%r, timeout=10).read().decode())" % url
    return json.loads(host.check_output("python3 -c %s" % shlex.quote(script)))


def query(host, expr):
    answer = get_json(host, PROMETHEUS + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def test_the_gpu_exporter_runs_enabled_as_its_own_user_and_serves_every_gpu(host, name):
    if name not in GPU_HOSTS:
        pytest.skip("a GPU host's")
    # As root: the image has no D-Bus, and systemctl reaches systemd's private socket only as root.
    with host.sudo():
        service = host.service("sm120-gpu-exporter")
        assert service.is_running and service.is_enabled
    # The exporter, and at times the nvidia-smi it runs for a scrape (CI caught one mid-read), as its own user.
    processes = [process.args for process in host.process.filter(user="sm120-gpu-exporter")]
    reads = [args for args in processes if "nvidia-smi --query-gpu=" in args]
    assert [args for args in processes if args not in reads] == [
        "/opt/sglang/bin/python -m ansible_collections.sm120.sglang.plugins.module_utils.gpu_exporter --listen-address "
        "%s --port 9400 --nvidia-smi nvidia-smi" % name]
    metrics = host.check_output("python3 -c %s" % shlex.quote(
        "import urllib.request; print(urllib.request.urlopen('http://%s:9400/metrics').read().decode())" % name))
    powers = [line for line in metrics.splitlines() if line.startswith("DCGM_FI_DEV_POWER_USAGE{")]
    assert len(powers) == 8, metrics


def test_prometheus_runs_enabled_and_ready(host, name):
    monitoring_host(name)
    with host.sudo():
        service = host.service("prometheus")
        assert service.is_running and service.is_enabled
    assert host.package("prometheus").is_installed
    assert get_json(host, PROMETHEUS + "/api/v1/status/buildinfo")["data"]["version"].startswith("2.")


def test_every_target_of_the_inventory_is_scraped_and_up(host, name):
    monitoring_host(name)
    targets = get_json(host, PROMETHEUS + "/api/v1/targets")["data"]["activeTargets"]
    found = {(target["labels"]["job"], target["labels"]["host"]): target["health"] for target in targets}
    expected = {("sglang", gpu) for gpu in GPU_HOSTS} | {("dcgm", gpu) for gpu in GPU_HOSTS} | {
        ("sglang-router", ROUTER)}
    assert set(found) == expected
    assert {key: health for key, health in found.items() if health != "up"} == {}, targets


def test_the_collections_alert_rules_are_loaded_at_the_scenarios_window(host, name):
    monitoring_host(name)
    groups = get_json(host, PROMETHEUS + "/api/v1/rules?type=alert")["data"]["groups"]
    rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
    assert "SglangGpuSpinWait" in rules
    assert "median15s" in rules["SglangGpuSpinWait"]["query"] and rules["SglangGpuSpinWait"]["duration"] == 3


def test_prometheus_recorded_the_spin_wait_alert_for_the_spinning_hosts_gpus_alone_and_it_cleared(host, name):
    monitoring_host(name)
    fired = query(host, 'max_over_time(ALERTS{alertname="SglangGpuSpinWait", alertstate="firing"}[30m])')
    assert {result["metric"]["host"] for result in fired} == {"sm120-watch-gpu-1"}
    assert sorted(int(result["metric"]["gpu"]) for result in fired) == list(range(8))
    assert {result["metric"]["cause"] for result in fired} == {"spin-wait"}
    alerts = get_json(host, PROMETHEUS + "/api/v1/alerts")["data"]["alerts"]
    assert [alert for alert in alerts if alert["labels"]["alertname"] == "SglangGpuSpinWait"] == []

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters of more than four arguments in prometheus.py, router.py and install_plan.py, called as a template
calls them: their input and one mapping by name. Each answers what its pure function answers for the same values,
and a mapping that is not one, names a key the filter does not take or lacks one it needs fails the task naming it."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.filter import install_plan as install_filters
from ansible_collections.sm120.sglang.plugins.filter import prometheus as prometheus_filters
from ansible_collections.sm120.sglang.plugins.filter import router as router_filters
from ansible_collections.sm120.sglang.plugins.plugin_utils import (
    alert_rules,
    install_plan,
    prometheus_config,
    router,
    sglang_releases,
)

PROMETHEUS = prometheus_filters.FilterModule().filters()
ROUTER = router_filters.FilterModule().filters()
INSTALL = install_filters.FilterModule().filters()

VERDICT = {"smoke_test_verdict": {"status": "pass", "messages": [], "rolled_back": [], "serves": None}}
HOSTVARS = {"gpu1": dict(VERDICT, ansible_host="10.0.0.11"),
            "gpu2": dict(VERDICT, ansible_host="fd00::12", sglang_service_port=30001),
            "gpu3": {"ansible_host": "10.0.0.13"},
            "router1": {"ansible_host": "10.0.0.2"}}
GROUPS = {"gpu_hosts": ["gpu1", "gpu2", "gpu3"], "fleet": ["gpu1", "gpu2", "gpu3"], "routers": ["router1"],
          "all": list(HOSTVARS)}
LOADS = {"low": {"concurrency": 4, "slo": {"ttft_p99_ms": 3000, "itl_p99_ms": 150}},
         "high": {"concurrency": 64, "slo": {"ttft_p99_ms": 15000, "itl_p99_ms": 1000}}}
INSTALL_SET = sglang_releases.install_set(sglang_releases.load(), "newest")

# Every key of each filter set away from its default, so that a key the wrapper dropped or misrouted shows.
SCRAPE = {"hostvars": HOSTVARS, "gpu_group": "fleet", "router_group": "routers", "server_port": 31000,
          "exporter_port": 9500, "router_metrics_port": 29100, "scrape_interval": "30s", "evaluation_interval": "1m",
          "rules_file": "/srv/rules.yml", "server_job": "srv", "gpu_job": "gpu", "router_job": "rtr"}
RULES = {"max_ttft_p99_ms": 2500, "thresholds": {"busy_util_pct": 80}, "window": "5m", "hold": "1m",
         "max_queued_requests": 12, "server_job": "srv", "gpu_job": "gpu", "router_job": "rtr"}
WORKERS = {"group": "fleet", "hostvars": HOSTVARS, "worker_port": 31000, "explicit": [], "include_unmeasured": True,
           "check_mode": False}
PIP = {"python": "/opt/sglang/bin/python", "dependencies": False, "source": "index", "wheel_dir": "",
       "index_url": "https://pypi.example/simple", "extra_index_url": "https://wheels.example/cu130",
       "extra_args": ["--prefer-binary"], "git": None}

# name: (filter, its input, the mapping, the pure function's answer for the same values, a required key or None)
CASES = {
    "prometheus_scrape_config": (PROMETHEUS, GROUPS, SCRAPE, lambda: prometheus_config.scrape_config(GROUPS, **SCRAPE),
                                 "hostvars"),
    "prometheus_alert_rules": (PROMETHEUS, LOADS, RULES, lambda: alert_rules.alert_rules(LOADS, **RULES), None),
    "sglang_router_worker_urls": (ROUTER, GROUPS, WORKERS, lambda: router.worker_urls(GROUPS, **WORKERS), "group"),
    "sglang_install_pip_argv": (INSTALL, INSTALL_SET, PIP,
                                lambda: install_plan.pip_install_argv(install_set=INSTALL_SET, **PIP), "python"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_filter_answers_what_its_function_answers_for_the_same_values(name):
    filters, value, settings, expected, _required = CASES[name]
    assert filters[name](value, dict(settings)) == expected()


def test_the_values_reach_the_function_under_their_own_names():
    # Each value changes the answer where it should, not only the answer as a whole.
    config = PROMETHEUS["prometheus_scrape_config"](GROUPS, SCRAPE)
    assert config["global"] == {"scrape_interval": "30s", "evaluation_interval": "1m"}
    assert config["rule_files"] == ["/srv/rules.yml"]
    assert [(job["job_name"], job["static_configs"][0]["targets"]) for job in config["scrape_configs"]] == [
        ("srv", ["10.0.0.11:31000"]), ("gpu", ["10.0.0.11:9500"]), ("rtr", ["10.0.0.2:29100"])]
    assert ROUTER["sglang_router_worker_urls"](GROUPS, WORKERS) == [
        "http://10.0.0.11:31000", "http://[fd00::12]:31000", "http://10.0.0.13:31000"]
    argv = INSTALL["sglang_install_pip_argv"](INSTALL_SET, PIP)
    assert argv[:9] == ["/opt/sglang/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                        "--no-deps", "--index-url", "https://pypi.example/simple"]
    assert argv[9:12] == ["--extra-index-url", "https://wheels.example/cu130", "--prefer-binary"]


def test_keys_left_out_keep_their_defaults():
    assert PROMETHEUS["prometheus_scrape_config"](GROUPS, {"hostvars": HOSTVARS}) == prometheus_config.scrape_config(
        GROUPS, HOSTVARS)
    assert ROUTER["sglang_router_worker_urls"](GROUPS, {"group": "gpu_hosts", "hostvars": HOSTVARS}) == (
        router.worker_urls(GROUPS, "gpu_hosts", HOSTVARS))
    assert INSTALL["sglang_install_pip_argv"](INSTALL_SET, {"python": "/venv/bin/python"}) == (
        install_plan.pip_install_argv("/venv/bin/python", INSTALL_SET))
    # Every key of the rules has a default: the mapping empty, or left out, is the function's defaults.
    assert PROMETHEUS["prometheus_alert_rules"](LOADS, {}) == alert_rules.alert_rules(LOADS)
    assert PROMETHEUS["prometheus_alert_rules"](LOADS) == alert_rules.alert_rules(LOADS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_unknown_key_fails_naming_the_filter_and_the_key(name):
    filters, value, settings, _expected, _required = CASES[name]
    with pytest.raises(AnsibleFilterError) as refused:
        filters[name](value, dict(settings, port=30000))
    message = str(refused.value)
    assert message.startswith("%s: " % name)
    assert "unknown port" in message
    # The fix: the names it does take.
    assert all(key in message for key in settings)


@pytest.mark.parametrize("name", sorted(name for name, case in CASES.items() if case[4]))
def test_a_missing_required_key_fails_naming_the_filter_and_the_key(name):
    filters, value, settings, _expected, required = CASES[name]
    given = {key: setting for key, setting in settings.items() if key != required}
    with pytest.raises(AnsibleFilterError) as refused:
        filters[name](value, given)
    message = str(refused.value)
    assert message.startswith("%s: " % name)
    assert "missing %s" % required in message


@pytest.mark.parametrize("name", sorted(CASES))
def test_arguments_that_are_not_one_mapping_fail_naming_the_filter(name):
    filters, value, settings, _expected, _required = CASES[name]
    first = next(iter(settings.values()))
    with pytest.raises(AnsibleFilterError, match="^%s takes one mapping of " % name):
        filters[name](value, [first])


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_old_call_by_place_fails_naming_the_filter_and_the_call_by_name(name):
    filters, value, settings, _expected, _required = CASES[name]
    first, second = list(settings)[:2]
    with pytest.raises(AnsibleFilterError) as refused:
        filters[name](value, settings[first], settings[second])
    assert str(refused.value).startswith("%s takes its input and one mapping of %s, %s" % (name, first, second))
    assert "(x | %s({'%s': ...})); got 2 arguments after its input" % (name, first) in str(refused.value)


def test_a_filter_without_a_required_key_names_every_key_as_optional():
    with pytest.raises(AnsibleFilterError) as refused:
        PROMETHEUS["prometheus_alert_rules"](LOADS, {"windw": "5m"})
    assert str(refused.value) == ("prometheus_alert_rules: unknown windw; it takes any of max_ttft_p99_ms, thresholds, "
                                  "window, hold, max_queued_requests, server_job, gpu_job, router_job, each where "
                                  "wanted")
    # Where a key is required, the mapping left out fails naming it.
    with pytest.raises(AnsibleFilterError, match="^prometheus_scrape_config: missing hostvars; it takes hostvars "):
        PROMETHEUS["prometheus_scrape_config"](GROUPS)


def test_the_functions_own_errors_still_fail_the_task_with_their_message():
    with pytest.raises(AnsibleFilterError, match="window must be a Prometheus duration"):
        PROMETHEUS["prometheus_alert_rules"](LOADS, {"window": "soon"})
    with pytest.raises(AnsibleFilterError, match="three different names"):
        PROMETHEUS["prometheus_scrape_config"](GROUPS, {"hostvars": HOSTVARS, "gpu_job": "sglang"})
    with pytest.raises(AnsibleFilterError, match="There is no inventory group 'nowhere'"):
        ROUTER["sglang_router_worker_urls"](GROUPS, {"group": "nowhere", "hostvars": HOSTVARS})

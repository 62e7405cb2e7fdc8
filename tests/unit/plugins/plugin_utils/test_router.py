# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.filter.router import FilterModule
from ansible_collections.sm120.sglang.plugins.plugin_utils.router import (
    HEALTHY_VERDICTS,
    POLICIES,
    SERVICE_PORT,
    RouterError,
    add_call,
    explicit_workers,
    host_worker_url,
    launch_words,
    listed_workers,
    local_url,
    remove_call,
    smoke_summary,
    worker_changes,
    worker_urls,
)

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "sglang_router"


def verdict(status):
    """The smoke test's verdict on a host, as it sets it (run_verdict)."""
    return {"smoke_test_verdict": {"status": status, "messages": [], "rolled_back": [], "serves": None}}


def inventory(**hosts):
    return {"gpu_hosts": list(hosts), "all": list(hosts)}, dict(hosts)


# What sglang-router 0.3.2 answered GET /workers with, on a router with two workers (docs/evidence/sglang-router.md).
LISTED_0_3_2 = {
    "workers": [
        {"id": "fd00b2b1-1cc2-48e2-a1c5-596f5aa2bbc0", "url": "http://127.0.0.1:31001", "model_id": "unknown",
         "priority": 50, "cost": 1.0, "worker_type": "regular", "is_healthy": True, "load": 0,
         "connection_mode": "HTTP", "disable_health_check": False},
        {"id": "8ed920df-7ea2-4abb-a7d0-74cf62db07c7", "url": "http://127.0.0.1:31002", "model_id": "unknown",
         "priority": 50, "cost": 1.0, "worker_type": "regular", "is_healthy": False, "load": 0,
         "connection_mode": "HTTP", "disable_health_check": False},
    ],
    "total": 2, "stats": {"prefill_count": 0, "decode_count": 0, "regular_count": 2},
}

SETTINGS = {"host": "0.0.0.0", "port": 30000, "policy": "cache_aware", "health_check_interval_secs": 10,
            "health_check_timeout_secs": 10, "health_failure_threshold": 3, "health_success_threshold": 2,
            "health_check_endpoint": "/health", "prometheus_host": "0.0.0.0", "prometheus_port": 29000}


# ---------------------------------------------------------------- the worker list

def test_only_hosts_whose_smoke_test_passed_are_workers_in_inventory_order():
    groups, hostvars = inventory(
        gpu3=dict(verdict("pass"), ansible_host="10.0.0.13"),
        gpu1=dict(verdict("fail"), ansible_host="10.0.0.11"),
        gpu2=dict(verdict("regression-rolled-back"), ansible_host="10.0.0.12"),
    )
    assert worker_urls(groups, "gpu_hosts", hostvars) == ["http://10.0.0.13:30000", "http://10.0.0.12:30000"]


def test_check_mode_counts_the_hosts_it_did_not_measure_and_still_leaves_out_a_failed_one():
    # --check --diff after a deploy: the smoke test measures nothing, so no host has a verdict of this run.
    groups, hostvars = inventory(gpu1=dict(ansible_host="10.0.0.11"), gpu2=dict(ansible_host="10.0.0.12"),
                                 gpu3=dict(verdict("fail"), ansible_host="10.0.0.13"))
    assert worker_urls(groups, "gpu_hosts", hostvars, check_mode=True) == [
        "http://10.0.0.11:30000", "http://10.0.0.12:30000"]
    with pytest.raises(RouterError, match=r"No host of 'gpu_hosts' is healthy.*gpu1 \(not measured in this run\)"):
        worker_urls(groups, "gpu_hosts", hostvars)


def test_a_model_across_hosts_is_routed_through_its_first_node_alone():
    pair = {"sglang_service_nnodes_group": "pair"}
    groups, hostvars = inventory(gpu1=dict(verdict("pass"), ansible_host="10.0.0.11"),
                                 gpu2=dict(verdict("pass"), ansible_host="10.0.0.12", **pair),
                                 gpu3=dict(ansible_host="10.0.0.13", **pair))
    groups["pair"] = ["gpu2", "gpu3"]
    # gpu3 answers /health alone: never a worker, even where unmeasured hosts count.
    assert worker_urls(groups, "gpu_hosts", hostvars, include_unmeasured=True) == [
        "http://10.0.0.11:30000", "http://10.0.0.12:30000"]


def test_a_host_without_ansible_host_is_reached_by_its_name_and_its_own_service_port():
    groups, hostvars = inventory(**{"gpu-a.example.net": dict(verdict("pass"), sglang_service_port=31000),
                                    "gpu-b": verdict("pass")})
    assert worker_urls(groups, "gpu_hosts", hostvars) == ["http://gpu-a.example.net:31000",
                                                          "http://gpu-b:%d" % SERVICE_PORT]


def test_a_worker_port_given_to_the_router_overrides_every_hosts_own():
    groups, hostvars = inventory(gpu1=dict(verdict("pass"), ansible_host="10.0.0.11", sglang_service_port=31000))
    assert worker_urls(groups, "gpu_hosts", hostvars, worker_port="30500") == ["http://10.0.0.11:30500"]


def test_an_ipv6_address_goes_in_brackets_once():
    groups, hostvars = inventory(a=dict(verdict("pass"), ansible_host="fd00::11"),
                                 b=dict(verdict("pass"), ansible_host="[fd00::12]"))
    assert worker_urls(groups, "gpu_hosts", hostvars) == ["http://[fd00::11]:30000", "http://[fd00::12]:30000"]


def test_hosts_not_measured_in_this_run_count_only_when_asked():
    groups, hostvars = inventory(gpu1={"ansible_host": "10.0.0.11"},
                                 gpu2=dict(verdict("pass"), ansible_host="10.0.0.12"))
    assert worker_urls(groups, "gpu_hosts", hostvars) == ["http://10.0.0.12:30000"]
    assert worker_urls(groups, "gpu_hosts", hostvars, include_unmeasured=True) == [
        "http://10.0.0.11:30000", "http://10.0.0.12:30000"]


def test_a_failed_host_stays_out_even_when_unmeasured_hosts_are_taken():
    groups, hostvars = inventory(gpu1=dict(verdict("fail"), ansible_host="10.0.0.11"),
                                 gpu2={"ansible_host": "10.0.0.12"})
    assert worker_urls(groups, "gpu_hosts", hostvars, include_unmeasured=True) == ["http://10.0.0.12:30000"]


def test_a_smoke_run_without_a_verdict_is_not_measured():
    groups, hostvars = inventory(gpu1={"smoke_test_verdict": {"messages": []}}, gpu2={"smoke_test_verdict": "broken"})
    with pytest.raises(RouterError, match=r"gpu1 \(not measured in this run\), gpu2 \(not measured in this run\)"):
        worker_urls(groups, "gpu_hosts", hostvars)


def test_the_pass_verdicts_are_those_the_smoke_test_writes():
    # smoke_test sets smoke_test_verdict from the one function of the run's states, whose serving ones these are.
    assert HEALTHY_VERDICTS == ("pass", "regression-rolled-back")
    tasks = (ROOT / "roles" / "smoke_test" / "tasks" / "report.yml").read_text()
    assert "    smoke_test_verdict: >-\n      {{ smoke_test_report_experiments.verdicts | default([])\n" \
        "         | sm120.sglang.smoke_run_verdict(" in tasks


def test_a_dns_name_is_written_lower_case_as_the_router_lists_it_compared():
    groups, hostvars = inventory(gpu1=dict(verdict("pass"), ansible_host="GPU1.Example.NET"))
    assert worker_urls(groups, "gpu_hosts", hostvars) == ["http://gpu1.example.net:30000"]


def test_two_hosts_on_one_address_and_port_make_one_worker():
    groups, hostvars = inventory(a=dict(verdict("pass"), ansible_host="10.0.0.11"),
                                 b=dict(verdict("pass"), ansible_host="10.0.0.11"))
    assert worker_urls(groups, "gpu_hosts", hostvars) == ["http://10.0.0.11:30000"]


def test_no_healthy_host_is_refused_naming_each_hosts_verdict_and_the_fix():
    groups, hostvars = inventory(gpu1=dict(verdict("fail"), ansible_host="10.0.0.11"),
                                 gpu2={"ansible_host": "10.0.0.12"})
    with pytest.raises(RouterError) as caught:
        worker_urls(groups, "gpu_hosts", hostvars)
    message = str(caught.value)
    assert "No host of 'gpu_hosts' is healthy" in message
    assert "gpu1 (smoke test fail), gpu2 (not measured in this run)" in message
    assert "sglang_router_include_unmeasured: true" in message and "sglang_router_workers" in message


def test_an_empty_group_is_refused_with_the_fix():
    with pytest.raises(RouterError, match=r"The inventory group 'gpu_hosts' has no hosts.*sglang_router_workers"):
        worker_urls({"gpu_hosts": []}, "gpu_hosts", {})


def test_a_group_the_inventory_lacks_is_refused_naming_the_variable():
    with pytest.raises(RouterError, match=r"no inventory group 'gpu_hostz'.*sglang_router_worker_group"):
        worker_urls({"gpu_hosts": ["gpu1"]}, "gpu_hostz", {"gpu1": verdict("pass")})


@pytest.mark.parametrize("address", ["", "   ", "10.0.0.11/24", "user@10.0.0.11", "gpu 1"])
def test_a_host_without_a_usable_address_is_refused_naming_it_and_ansible_host(address):
    groups, hostvars = inventory(gpu1=dict(verdict("pass"), ansible_host=address))
    with pytest.raises(RouterError, match=r"^gpu1 has no address the router can reach it at: its ansible_host is "
                                          r".*Set ansible_host to its IP address or DNS name\.$"):
        worker_urls(groups, "gpu_hosts", hostvars)


@pytest.mark.parametrize("bad, shown", [(0, "0, outside 1-65535"), (70000, "70000, outside 1-65535"),
                                        ("30k", "'30k', not a port"), (True, "True, not a port")])
def test_a_bad_worker_port_is_refused_naming_the_variable(bad, shown):
    groups, hostvars = inventory(gpu1=dict(verdict("pass"), ansible_host="10.0.0.11"))
    with pytest.raises(RouterError, match="sglang_router_worker_port is %s" % shown):
        worker_urls(groups, "gpu_hosts", hostvars, worker_port=bad)


def test_a_bad_service_port_on_one_host_is_refused_naming_that_host():
    groups, hostvars = inventory(gpu1=dict(verdict("pass"), ansible_host="10.0.0.11", sglang_service_port=0))
    with pytest.raises(RouterError, match="sglang_service_port of gpu1 is 0"):
        worker_urls(groups, "gpu_hosts", hostvars)


def test_an_explicit_list_replaces_the_group_checked_and_without_repeats():
    assert worker_urls({}, "gpu_hosts", {}, explicit=["http://10.0.0.21:30000/", "HTTP://10.0.0.21:30000",
                                                      "https://[fd00::1]:8443"]) == [
        "http://10.0.0.21:30000", "https://[fd00::1]:8443"]


@pytest.mark.parametrize("bad", ["10.0.0.21:30000", "http://10.0.0.21", "http://10.0.0.21:0", "grpc://10.0.0.21:1",
                                 "http://10.0.0.21:30000/v1"])
def test_an_explicit_entry_that_is_not_a_worker_url_is_refused_with_an_example(bad):
    with pytest.raises(RouterError, match=r"sglang_router_workers has .*http://ADDRESS:PORT|the port of"):
        explicit_workers([bad])


def test_an_explicit_string_instead_of_a_list_is_refused():
    with pytest.raises(RouterError, match="give a list of URLs"):
        explicit_workers("http://10.0.0.21:30000")


def test_one_hosts_url_for_drain_and_restore_is_the_one_in_the_list():
    groups, hostvars = inventory(gpu1=dict(verdict("pass"), ansible_host="10.0.0.11", sglang_service_port=30001))
    assert host_worker_url("gpu1", hostvars) == "http://10.0.0.11:30001"
    assert worker_urls(groups, "gpu_hosts", hostvars) == ["http://10.0.0.11:30001"]


# ---------------------------------------------------------------- the router's flags

def test_the_flags_carry_each_setting_under_the_routers_own_name():
    assert launch_words(SETTINGS, {"--log-level": "warn", "--disable-retries": True, "--cors-allowed-origins":
                                   ["https://a", "https://b"], "--dp-aware": False, "--log-dir": None}) == [
        "--host", "0.0.0.0", "--port", "30000", "--policy", "cache_aware",
        "--health-check-interval-secs", "10", "--health-check-timeout-secs", "10",
        "--health-failure-threshold", "3", "--health-success-threshold", "2",
        "--health-check-endpoint", "/health", "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000",
        "--log-level", "warn", "--disable-retries", "--cors-allowed-origins", "https://a", "https://b"]


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_of_the_pinned_router_is_taken(name):
    assert launch_words(dict(SETTINGS, policy=name))[4:6] == ["--policy", name]


@pytest.mark.parametrize("name", ["bucket", "least_load", "Cache_Aware", ""])
def test_a_policy_the_router_does_not_take_is_refused_naming_the_choices(name):
    with pytest.raises(RouterError, match="sglang_router_policy is .* use one of random, round_robin, cache_aware, "
                                          "power_of_two, manual"):
        launch_words(dict(SETTINGS, policy=name))


def test_the_router_and_its_metrics_on_one_port_are_refused():
    with pytest.raises(RouterError, match="both 29000.*address already in use"):
        launch_words(dict(SETTINGS, port=29000))


@pytest.mark.parametrize("name, value", [("health_check_interval_secs", 0), ("health_failure_threshold", -1),
                                         ("health_check_timeout_secs", "soon"), ("health_success_threshold", True)])
def test_a_health_setting_below_one_is_refused_naming_its_variable(name, value):
    with pytest.raises(RouterError, match="sglang_router_%s is" % name):
        launch_words(dict(SETTINGS, **{name: value}))


def test_a_health_endpoint_that_is_not_a_path_is_refused():
    with pytest.raises(RouterError, match="sglang_router_health_check_endpoint is 'health'"):
        launch_words(dict(SETTINGS, health_check_endpoint="health"))


@pytest.mark.parametrize("flag, variable", [("--api-key", "sglang_router_api_key"),
                                            ("--worker-urls", "sglang_router_workers"),
                                            ("--policy", "sglang_router_policy")])
def test_an_extra_flag_the_role_writes_itself_is_refused_naming_the_variable(flag, variable):
    with pytest.raises(RouterError, match="%s in sglang_router_extra_args is the role's to write: set %s"
                                          % (flag, variable)):
        launch_words(SETTINGS, {flag: "x"})


def test_an_extra_argument_that_is_not_a_flag_is_refused():
    with pytest.raises(RouterError, match="'log-level' in sglang_router_extra_args is not a flag"):
        launch_words(SETTINGS, {"log-level": "warn"})


# ---------------------------------------------------------------- the router's API

def test_the_listed_workers_are_keyed_by_their_url_with_id_and_health():
    assert listed_workers(LISTED_0_3_2) == {
        "http://127.0.0.1:31001": {"id": "fd00b2b1-1cc2-48e2-a1c5-596f5aa2bbc0", "healthy": True},
        "http://127.0.0.1:31002": {"id": "8ed920df-7ea2-4abb-a7d0-74cf62db07c7", "healthy": False},
    }


@pytest.mark.parametrize("answer", [{"detail": "Not Found"}, "OK", None, {"workers": "none"}])
def test_an_answer_that_is_not_a_worker_list_is_refused_naming_the_version(answer):
    with pytest.raises(RouterError, match="router-01 answered GET /workers with .*sglang_router_version"):
        listed_workers(answer, "router-01")


def test_removing_a_worker_deletes_it_by_the_routers_id_for_its_url():
    listed = listed_workers(LISTED_0_3_2)
    assert remove_call(listed, "http://127.0.0.1:30000/", "http://127.0.0.1:31002/") == {
        "url": "http://127.0.0.1:30000/workers/8ed920df-7ea2-4abb-a7d0-74cf62db07c7", "method": "DELETE",
        "status_code": [202, 404]}


def test_removing_a_url_that_is_not_a_worker_is_nothing_to_do():
    assert remove_call(listed_workers(LISTED_0_3_2), "http://127.0.0.1:30000", "http://127.0.0.1:31003") is None
    assert remove_call({}, "http://127.0.0.1:30000", "http://127.0.0.1:31001") is None


def test_adding_a_worker_posts_its_url_and_the_key_as_the_routers_readme_asks():
    listed = listed_workers(LISTED_0_3_2)
    assert add_call(listed, "http://127.0.0.1:30000", "http://127.0.0.1:31003") == {
        "url": "http://127.0.0.1:30000/workers", "method": "POST", "body": {"url": "http://127.0.0.1:31003"},
        "status_code": [202]}
    assert add_call(listed, "http://127.0.0.1:30000", "http://127.0.0.1:31003", "k")["body"] == {
        "url": "http://127.0.0.1:31003", "api_key": "k"}


def test_adding_a_worker_already_listed_is_nothing_to_do_whatever_its_health():
    # 0.3.2 answers 202 to a second POST of a listed URL, then fails the job ("already exists"): not asked at all.
    listed = listed_workers(LISTED_0_3_2)
    assert add_call(listed, "http://127.0.0.1:30000", "http://127.0.0.1:31001") is None
    assert add_call(listed, "http://127.0.0.1:30000", "HTTP://127.0.0.1:31002/") is None


def test_the_changes_make_the_running_router_have_exactly_the_wanted_workers():
    listed = listed_workers(LISTED_0_3_2)
    assert worker_changes(listed, ["http://127.0.0.1:31003", "http://127.0.0.1:31001"]) == {
        "add": ["http://127.0.0.1:31003"], "remove": ["http://127.0.0.1:31002"]}
    assert worker_changes(listed, ["http://127.0.0.1:31001/", "http://127.0.0.1:31002"]) == {"add": [], "remove": []}


# ---------------------------------------------------------------- the filters and the role

def test_the_filters_fail_the_task_with_the_functions_message():
    filters = FilterModule().filters()
    with pytest.raises(AnsibleFilterError, match="The inventory group 'gpu_hosts' has no hosts"):
        filters["sglang_router_worker_urls"]({"gpu_hosts": []}, {"group": "gpu_hosts", "hostvars": {}})
    groups, hostvars = inventory(gpu1=dict(verdict("pass"), ansible_host="10.0.0.11"))
    assert filters["sglang_router_worker_urls"](groups, {"group": "gpu_hosts", "hostvars": hostvars, "worker_port": None,
                                                         "explicit": [], "include_unmeasured": False}) == [
        "http://10.0.0.11:30000"]
    # Its arguments by name: a name it does not take fails, naming it.
    with pytest.raises(AnsibleFilterError, match="sglang_router_worker_urls: unknown port"):
        filters["sglang_router_worker_urls"](groups, {"group": "gpu_hosts", "hostvars": hostvars, "port": 30000})


def test_every_filter_has_its_documentation_beside_it():
    for name in FilterModule().filters():
        doc = yaml.safe_load((ROOT / "plugins" / "filter" / ("%s.yml" % name)).read_text())
        assert doc["DOCUMENTATION"]["name"] == name


def test_the_roles_policy_choices_and_defaults_are_the_routers():
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert tuple(specs["main"]["options"]["sglang_router_policy"]["choices"]) == POLICIES
    assert defaults["sglang_router_policy"] in POLICIES
    # Every input of every entry point has a default, and the same one in both files.
    for entry in specs.values():
        for name, spec in entry["options"].items():
            assert name in defaults, name
            assert spec.get("default") == defaults[name], name
    # The defaults render flags the router takes.
    launch_words({key: defaults["sglang_router_" + key] for key in SETTINGS}, defaults["sglang_router_extra_args"])


def test_the_service_port_the_router_assumes_is_the_service_roles_default():
    service = yaml.safe_load((ROOT / "roles" / "sglang_service" / "defaults" / "main.yml").read_text())
    assert service["sglang_service_port"] == SERVICE_PORT


@pytest.mark.parametrize("host, url", [("0.0.0.0", "http://127.0.0.1:30000"), ("", "http://127.0.0.1:30000"),
                                       ("::", "http://[::1]:30000"), ("10.0.0.5", "http://10.0.0.5:30000"),
                                       ("fd00::5", "http://[fd00::5]:30000"), ("[fd00::5]", "http://[fd00::5]:30000")])
def test_the_router_is_asked_on_its_own_host_over_the_address_it_listens_on(host, url):
    assert local_url(host, 30000) == url


# ------------------------------------------------------------------ the measurement through the router

WORKERS = ["http://172.28.7.11:30000", "http://172.28.7.12:30000"]


def _measured(completed=16, failed=0, not_started=0, errors=None):
    return {"completed_requests": completed, "failed_requests": failed, "not_started_requests": not_started,
            "errors": errors or [], "output_tokens_per_s": 201.26, "ttft_ms": {"p50": 12.5, "p99": 40.1}}


def test_a_router_that_answers_every_request_passes_with_its_numbers():
    verdict = smoke_summary(_measured(), "http://127.0.0.1:30000", WORKERS)
    assert verdict == {"summary": "Through the router at http://127.0.0.1:30000 to http://172.28.7.11:30000, "
                                  "http://172.28.7.12:30000: 201.3 output tok/s, 16 of 16 requests answered, "
                                  "TTFT p50 12.5 ms, p99 40.1 ms", "problem": None}


@pytest.mark.parametrize("measured, words", [
    (_measured(15, 1, errors=["request 3: HTTP 502 Bad Gateway"]), "1 failed and 0 never sent (request 3: HTTP 502"),
    (_measured(12, 0, 4), "0 failed and 4 never sent (no error recorded)"),
    (_measured(0, 0, 0), "0 of 0 requests answered"),
])
def test_a_failed_or_unsent_request_or_none_answered_fails_naming_the_workers(measured, words):
    problem = smoke_summary(measured, "http://127.0.0.1:30000", WORKERS)["problem"]
    assert words in problem
    assert "to http://172.28.7.11:30000, http://172.28.7.12:30000:" in problem


def test_what_is_no_measurement_is_refused():
    with pytest.raises(RouterError, match="not a serving_benchmark result"):
        smoke_summary(None, "http://127.0.0.1:30000", WORKERS)

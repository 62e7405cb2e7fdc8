"""The fleet after its rollouts, read over SSH as ops: who the hosts were reached as, the releases, each rank's
flags and rendezvous, the router's workers, and which hosts each run measured."""

import glob
import json
import os
import re
import shlex

import pytest

REPORTS = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "reports")
# A run's directory: its id (reports/baselines beside them holds the upgrade canary's baselines).
RUN = re.compile(r"^\d{8}T\d{6}Z$")
UNIT = "/etc/systemd/system/sglang-glm-5-nvfp4.service"
ENV = "/etc/sglang/glm-5-nvfp4.env"


@pytest.fixture
def name(host):
    return host.backend.get_hostname()


def gpu_host(name):
    if name == "sm120-fleet-router":
        pytest.skip("a GPU host's")


def exec_start(host):
    """The unit's ExecStart words (systemd's continuation lines joined)."""
    text = host.run("sudo -n cat %s" % UNIT).stdout.replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    return shlex.split(line[len("ExecStart="):])


def flag(words, name):
    return words[words.index(name) + 1] if name in words else None


def http(host, url, post=False, body=False):
    """The status (or, with body, the text) of a request on the host, with the fleet's API key."""
    script = ("import urllib.request, urllib.error\n"
              "r = urllib.request.Request(%r, data=b'{}' if %r else None, headers={'Authorization': 'Bearer fleet-key'})\n"
              "try:\n    a = urllib.request.urlopen(r, timeout=10); print(a.read().decode() if %r else a.status)\n"
              "except urllib.error.HTTPError as e:\n    print(e.code)\n" % (url, post, body))
    return host.check_output("python3 -c %s" % shlex.quote(script)).strip()


def test_reached_over_ssh_as_a_user_with_sudo(host):
    assert host.user().name == "ops"
    assert host.run("sudo -n id -u").stdout.strip() == "0"
    # No password for root, and ops is no member of root's group: root only through sudo.
    assert "root" not in host.user().groups


def test_the_canary_is_back_on_its_release_and_the_others_never_left_it(host, name):
    gpu_host(name)
    version = host.check_output("/opt/sglang/bin/python -c 'from importlib.metadata import version; "
                                "print(version(\"sglang\"))'")
    assert version.strip() == "0.5.23"


def test_each_node_of_the_pair_has_its_rank_and_the_rendezvous_of_rank_0(host, name):
    gpu_host(name)
    words = exec_start(host)
    if name == "sm120-fleet-1":
        assert "--nnodes" not in words and "--node-rank" not in words
        return
    rank = {"sm120-fleet-2": "0", "sm120-fleet-3": "1"}[name]
    assert (flag(words, "--nnodes"), flag(words, "--node-rank"), flag(words, "--dist-init-addr")) == (
        "2", rank, "172.28.7.12:25000")
    assert flag(words, "--tp-size") == "16"
    assert "NCCL_SOCKET_IFNAME=eth0" in host.run("sudo -n cat %s" % ENV).stdout.split()


def test_rank_1_waited_for_rank_0_and_joined_it(host, name):
    gpu_host(name)
    journal = host.run("sudo -n journalctl -u sglang-glm-5-nvfp4 --no-pager -o cat").stdout
    if name == "sm120-fleet-2":
        assert "rank 1 joined from 172.28.7.13" in journal
    elif name == "sm120-fleet-3":
        assert "joined rank 0 at 172.28.7.12:25000" in journal
        # SGLang's dummy health server: no API on a node of rank 1.
        assert http(host, "http://127.0.0.1:30000/v1/completions", post=True) == "404"


def test_the_router_serves_through_the_first_node_of_the_pair_alone(host, name):
    if name != "sm120-fleet-router":
        pytest.skip("the router's")
    listed = json.loads(http(host, "http://127.0.0.1:30000/workers", body=True))
    assert [worker["url"] for worker in listed["workers"]] == ["http://172.28.7.12:30000"]


def test_each_run_measured_the_hosts_it_deployed_and_never_a_node_of_rank_1():
    measured = {}
    for path in glob.glob(os.path.join(REPORTS, "*", "sm120-fleet-*.json")):
        if not RUN.match(os.path.basename(os.path.dirname(path))):
            continue
        measured.setdefault(os.path.basename(path)[:-5], []).append(path)
    # The rollout, the upgrade (the canary alone), the pair (its rank 0 alone); converge measures nothing.
    assert {host: len(paths) for host, paths in measured.items()} == {
        "sm120-fleet-1": 2, "sm120-fleet-2": 2, "sm120-fleet-3": 1}


def runs_of(name):
    found = []
    for path in sorted(glob.glob(os.path.join(REPORTS, "*", name + ".json"))):
        if RUN.match(os.path.basename(os.path.dirname(path))):
            with open(path) as handle:
                found.append(json.load(handle))
    return found


def test_the_slower_release_was_measured_against_the_canarys_baseline_and_the_host_put_back(host, name):
    if name != "sm120-fleet-1":
        pytest.skip("the canary's release changed")
    # The rollout (its baseline on 0.5.23), the release change.
    before, changed = runs_of(name)
    upgrade = changed["upgrade"]
    assert (upgrade["previous_release"], upgrade["release"], upgrade["decision"]) == ("0.5.23", "0.5.22", "lost"), upgrade
    assert changed["config"]["sglang_version"] == "0.5.22" and changed["verdict"]["status"] == "upgrade-rolled-back"
    assert upgrade["previous"]["run_id"] == before["run_id"]
    figures = upgrade["loads"]["high"]
    # Played 40 % slower; a contended machine measures the slower one slower still (-51.7 % seen in CI).
    assert figures["verdict"] == "regression" and -0.7 < figures["change"] < -0.3, figures
    assert figures["baseline"]["runs"] == [round(r["output_tokens_per_s"], 1) for r in upgrade["previous"]["loads"]["high"]]
    assert upgrade["message"] in changed["verdict"]["messages"]
    with open(os.path.join(REPORTS, changed["run_id"], name + ".md")) as handle:
        report = handle.read()
    assert "## Upgrade canary: SGLang `0.5.22` against `0.5.23` — lost" in report
    # Back on 0.5.23, and the server restarted on it.
    env = host.run("sudo -n cat %s" % ENV).stdout
    assert "sglang==0.5.23" in env and "sglang==0.5.22" not in env
    # As root: the image has no D-Bus, and systemctl reaches systemd's private socket only as root.
    with host.sudo():
        assert host.service("sglang-glm-5-nvfp4").is_running

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a deploy may take a host's lock from the run that holds it."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import deploy_lock as dl

NOW = 1796290000
ME = dl.run_of("ctl-a", "ops", "4242", NOW, "Take the deploy lock on every host of this run")
OTHER = {"run_id": "ctl-b-777-1796289000", "controller": "ctl-b", "user": "alice", "pid": 777, "started": NOW - 1000,
         "playbook": "Take the deploy lock on every host of this run"}
PATH = "/var/lib/sm120-sglang/deploy.lock"


def held(holder):
    return {"taken": False, "holder": holder}


def test_a_run_is_named_by_its_controller_its_ansible_playbook_and_its_start():
    assert ME == {"run_id": "ctl-a-4242-1796290000", "controller": "ctl-a", "user": "ops", "pid": 4242,
                  "started": 1796290000, "playbook": "Take the deploy lock on every host of this run"}
    with pytest.raises(dl.DeployLockError, match="cannot name this run for the deploy lock"):
        dl.run_of("ctl-a", "ops", "", NOW)


def test_a_lock_taken_proceeds():
    assert dl.decide({"taken": True, "holder": None}, ME, "gpu1", PATH, now=NOW)["action"] == "proceed"


def test_a_running_deploy_from_another_controller_is_refused_by_name():
    decision = dl.decide(held(OTHER), ME, "gpu1", PATH, holder_process="", now=NOW)
    assert decision == {"action": "refuse", "replace": None, "reason": (
        "gpu1 is being deployed by another run: alice@ctl-b (ansible-playbook pid 777, Take the deploy lock on every "
        "host of this run), since 2026-12-03 09:10:00 UTC; its lock is /var/lib/sm120-sglang/deploy.lock (run "
        "ctl-b-777-1796289000). Wait for that run to end. If it is gone (its controller lost, say), run again from "
        "ctl-b, where a dead run's lock is taken over, or break the lock with -e deploy_lock_break=true")}


def test_a_running_deploy_on_this_controller_is_refused_and_a_dead_one_taken_over():
    mine_before = dict(OTHER, controller="ctl-a", run_id="ctl-a-555-1796289000", pid=555)
    running = "/usr/bin/python3 /usr/bin/ansible-playbook -i inv playbooks/deploy.yml"
    assert dl.decide(held(mine_before), ME, "gpu1", PATH, holder_process=running, now=NOW)["action"] == "refuse"
    for gone in ("", "/usr/bin/vim notes.txt"):
        decision = dl.decide(held(mine_before), ME, "gpu1", PATH, holder_process=gone, now=NOW)
        assert decision == {"action": "take_over", "replace": "ctl-a-555-1796289000",
                            "reason": "its ansible-playbook (pid 555 on ctl-a) no longer runs"}


def test_an_old_lock_or_one_broken_on_request_is_taken_over():
    old = dict(OTHER, started=NOW - 25 * 3600)
    assert dl.decide(held(old), ME, "gpu1", PATH, now=NOW)["reason"] == (
        "it is older than deploy_lock_max_age_h (24 h): taken 2026-12-02 08:26:40 UTC")
    assert dl.decide(held(OTHER), ME, "gpu1", PATH, now=NOW, max_age_h=0.1)["action"] == "take_over"
    assert dl.decide(held(OTHER), ME, "gpu1", PATH, now=NOW, break_lock=True) == {
        "action": "take_over", "replace": "ctl-b-777-1796289000", "reason": "broken on request (deploy_lock_break)"}


def test_an_unreadable_owner_is_a_run_taking_the_lock_for_a_minute_then_stale():
    young = {"run_id": "malformed", "problem": "no owner.json", "since": NOW - 5}
    assert dl.decide(held(young), ME, "gpu1", PATH, now=NOW) == {"action": "refuse", "replace": None, "reason": (
        "gpu1: another run is taking the deploy lock /var/lib/sm120-sglang/deploy.lock right now (no owner.json); "
        "run again in a minute")}
    old = dict(young, since=NOW - 120)
    assert dl.decide(held(old), ME, "gpu1", PATH, now=NOW)["action"] == "take_over"


def test_a_result_without_a_holder_is_an_error_not_a_pass():
    with pytest.raises(dl.DeployLockError, match="neither taken nor held"):
        dl.decide({"taken": False}, ME, "gpu1", PATH, now=NOW)

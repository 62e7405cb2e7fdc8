# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Five filters of more than four arguments, called as a task calls them (issue 39, item 4): the piped input and one
mapping by name. Through each FilterModule, the mapping gives what the pure function gives with the same values; a
name unknown or a required one missing fails naming it; and each sidecar documents the keys the filter takes."""

from __future__ import annotations

import inspect
import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.filter import deploy_lock as deploy_lock_filters
from ansible_collections.sm120.sglang.plugins.filter import fleet as fleet_filters
from ansible_collections.sm120.sglang.plugins.filter import run_verdict as run_verdict_filters
from ansible_collections.sm120.sglang.plugins.filter import upgrade as upgrade_filters
from ansible_collections.sm120.sglang.plugins.plugin_utils import deploy_lock, fleet, run_verdict, upgrade
from ansible_collections.sm120.sglang.tests.unit.plugins.plugin_utils.test_upgrade import SETTINGS, measurement

ROOT = pathlib.Path(__file__).resolve().parents[4]
NOW = 1796290000
PLAY = "Take the deploy lock on every host of this run"
ME = deploy_lock.run_of("ctl-a", "ops", "4242", NOW, PLAY)
HOLDER = {"run_id": "ctl-a-777-1796289000", "controller": "ctl-a", "user": "alice", "pid": 777, "started": NOW - 1000,
          "playbook": PLAY}
LOCK = {"taken": False, "holder": HOLDER}
PATH = "/var/lib/sm120-sglang/deploy.lock"
KEY = "sglang 0.5.23 | TP 8 | pcie | NVIDIA RTX PRO 6000 Blackwell Server Edition | high c64"
REJECTED = {"experiment": "flashinfer_allreduce_fusion", "decision": "rejected", "message": "fusion rejected."}
LOST = {"decision": "lost", "previous_release": "0.5.22", "release": "0.5.23", "message": "0.5.23 slower than 0.5.22."}

# name: (its FilterModule, the pure function, the piped input, a mapping of every key the filter takes)
FILTERS = {
    "deploy_lock_run": (deploy_lock_filters, deploy_lock.run_of, "ctl-a",
                        {"user": "ops", "pid": "4242", "started": NOW, "playbook": PLAY}),
    "deploy_lock_decision": (deploy_lock_filters, deploy_lock.decide, LOCK,
                             {"me": ME, "host": "gpu1", "path": PATH, "holder_process": "", "now": NOW,
                              "max_age_h": 24, "break_lock": False}),
    "fleet_entry": (fleet_filters, fleet.fleet_entry, "gpu1",
                    {"run_id": "r1", "memory_key": KEY, "live": ["nccl_min_nchannels_8"], "load": "high",
                     "output_tokens_per_s": 2741.5}),
    "smoke_run_verdict": (run_verdict_filters, run_verdict.run_verdict, [REJECTED],
                          {"upgrade": None, "power": [{"message": "350 W kept."}], "misses": ["ttft p99 missed"],
                           "band": {"status": "ok", "message": ""}, "on_rejection": "warn"}),
    "upgrade_verdict": (upgrade_filters, upgrade.upgrade_verdict, measurement(400, 2700),
                        {"current": measurement(405, 1900), "settings": SETTINGS, "previous_release": "0.5.22",
                         "release": "0.5.23"}),
}


def _filter(name):
    return FILTERS[name][0].FilterModule().filters()[name]


def _keys(name):
    """The keys the pure function's signature makes required and optional, after the piped input."""
    parameters = list(inspect.signature(FILTERS[name][1]).parameters.values())[1:]
    return ([p.name for p in parameters if p.default is inspect.Parameter.empty],
            [p.name for p in parameters if p.default is not inspect.Parameter.empty])


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_the_mapping_gives_what_the_pure_function_gives_with_the_same_values(name):
    _module, function, value, arguments = FILTERS[name]
    assert _filter(name)(value, dict(arguments)) == function(value, **arguments)
    required, _optional = _keys(name)
    # The optional keys left out take the pure function's own defaults.
    assert _filter(name)(value, {key: arguments[key] for key in required}) == function(
        value, **{key: arguments[key] for key in required})


def test_the_mapping_reaches_each_decision_under_its_own_name():
    # Values that change the result, so that a key passed on under another name would show.
    decide = _filter("deploy_lock_decision")
    asked = FILTERS["deploy_lock_decision"][3]
    assert decide(LOCK, asked)["action"] == "take_over"  # same controller, its ansible-playbook gone
    assert decide(LOCK, dict(asked, holder_process="/usr/bin/python3 ansible-playbook deploy.yml"))["action"] == "refuse"
    assert decide(LOCK, dict(asked, holder_process="ansible-playbook", break_lock=True))["action"] == "take_over"
    assert decide(LOCK, dict(asked, holder_process="ansible-playbook", max_age_h=0.1))["action"] == "take_over"
    verdict = _filter("smoke_run_verdict")
    assert verdict([REJECTED], {"on_rejection": "warn"})["stop"] is False
    assert verdict([REJECTED], {})["stop"] is True
    assert verdict([], {"upgrade": LOST})["put_back_release"] == "0.5.22"
    assert verdict([], {"band": {"status": "fail", "message": "gpu2 below the band."}})["status"] == "fail"
    judged = _filter("upgrade_verdict")(measurement(400, 2700), FILTERS["upgrade_verdict"][3])
    assert (judged["decision"], judged["previous_release"], judged["release"]) == ("lost", "0.5.22", "0.5.23")
    assert _filter("deploy_lock_run")("ctl-a", {"user": "", "pid": " 4242 ", "started": NOW})["playbook"] == ""


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_an_unknown_key_fails_naming_the_filter_the_key_and_what_it_takes(name):
    _module, _function, value, arguments = FILTERS[name]
    required, optional = _keys(name)
    with pytest.raises(AnsibleFilterError) as raised:
        _filter(name)(value, dict(arguments, colour="red"))
    assert str(raised.value).startswith("%s: unknown colour; it takes " % name)
    assert all(key in str(raised.value) for key in required + optional)


@pytest.mark.parametrize("name, key", [(name, key) for name in sorted(FILTERS) for key in _keys(name)[0]])
def test_a_missing_required_key_fails_naming_the_filter_and_the_key(name, key):
    _module, _function, value, arguments = FILTERS[name]
    with pytest.raises(AnsibleFilterError) as raised:
        _filter(name)(value, {other: given for other, given in arguments.items() if other != key})
    assert str(raised.value).startswith("%s: missing %s; it takes " % (name, key))


def test_smoke_run_verdict_requires_no_key():
    # Every key of smoke_run_verdict has a default: an empty mapping is the verdict of the experiments alone.
    assert _keys("smoke_run_verdict")[0] == []
    assert _filter("smoke_run_verdict")([REJECTED], {}) == run_verdict.run_verdict([REJECTED])


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_the_old_positional_call_fails_saying_the_filter_takes_one_mapping(name):
    _module, _function, value, arguments = FILTERS[name]
    first = list(arguments.values())[0]
    if isinstance(first, dict):  # a mapping as the first value would be read as the whole mapping
        first = [first]
    with pytest.raises(AnsibleFilterError, match=r"^%s takes one mapping of " % name):
        _filter(name)(value, first)


def test_the_pure_functions_own_errors_still_fail_the_task_with_their_message():
    with pytest.raises(AnsibleFilterError, match="cannot name this run for the deploy lock"):
        _filter("deploy_lock_run")("ctl-a", {"user": "ops", "pid": "", "started": NOW})
    with pytest.raises(AnsibleFilterError, match="no result to decide on"):
        _filter("deploy_lock_decision")(None, {"me": ME, "host": "gpu1", "path": PATH})
    with pytest.raises(AnsibleFilterError, match="gpu1"):
        _filter("fleet_entry")("gpu1", dict(FILTERS["fleet_entry"][3], output_tokens_per_s=None))
    with pytest.raises(AnsibleFilterError, match="smoke_test_on_rejection must be one of"):
        _filter("smoke_run_verdict")([], {"on_rejection": "shrug"})
    with pytest.raises(AnsibleFilterError, match="the upgrade canary compares two releases"):
        _filter("upgrade_verdict")({}, dict(FILTERS["upgrade_verdict"][3], previous_release="0.5.23"))


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_the_sidecar_documents_the_input_and_one_mapping_of_the_keys_the_filter_takes(name):
    doc = yaml.safe_load((ROOT / "plugins" / "filter" / ("%s.yml" % name)).read_text())
    options = doc["DOCUMENTATION"]["options"]
    assert doc["DOCUMENTATION"]["positional"] == "_input, arguments"
    assert sorted(options) == ["_input", "arguments"]
    assert options["arguments"]["type"] == "dict" and options["arguments"]["required"] is True
    suboptions = options["arguments"]["suboptions"]
    required, optional = _keys(name)
    assert sorted(suboptions) == sorted(required + optional)
    assert sorted(key for key, option in suboptions.items() if option.get("required")) == sorted(required)
    defaults = dict(zip(optional, [p.default for p in list(inspect.signature(FILTERS[name][1]).parameters.values())[
        1 + len(required):]]))
    for key in optional:
        assert "default" in suboptions[key] and suboptions[key]["default"] == defaults[key], (name, key)
    assert "sm120.sglang.%s({" % name in doc["EXAMPLES"]

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The upgrade canary is the deploy play's judgment (issue 39): it compares the smoke test's result with the baseline
the smoke test publishes for the release the play replaced, and hands its verdict to the smoke test's report and the
power search's condition; the smoke test reads no other role's variable for it. Templated here by Ansible's Templar
from the deploy play's own smoke phase (playbooks/tasks/smoke.yml), with the function's own tests in tests/unit/plugins/plugin_utils/test_upgrade.py."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.sm120.sglang.tests.unit.plugins.plugin_utils.test_upgrade import measurement

ROOT = pathlib.Path(__file__).resolve().parents[3]
SETTINGS = {"tolerance": 0.03, "noise_multiple": 2.0, "loads": {
    "low": {"concurrency": 1, "num_requests": 4, "input_tokens": 16, "output_tokens": 16},
    "high": {"concurrency": 8, "num_requests": 16, "input_tokens": 16, "output_tokens": 16}}}


def _smoke_block():
    """The smoke phase's steps, the task file playbooks/deploy.yml includes for it."""
    return yaml.safe_load((ROOT / "playbooks" / "tasks" / "smoke.yml").read_text())


def _task(name):
    return [task for task in _smoke_block() if task["name"] == name][0]


def _state(previous_release, previous_baseline, release="0.5.23"):
    return {"smoke_test_state": {"release": release, "previous_release": previous_release,
                                 "previous_baseline": previous_baseline, "result": measurement(405, 1900),
                                 "settings": SETTINGS, "reused": False},
            "experiments_settings": {"power_limit_steps_w": [500, 450]}}


def _judge(variables):
    """The deploy play's upgrade task on these facts: its fact, or None where it is skipped."""
    task = _task("Compare a new release with this host's baseline on the one it replaced")
    templar = Templar(loader=DataLoader(), variables=variables)
    if not all(templar.evaluate_conditional(trust_as_template(condition)) for condition in task["when"]):
        return None
    return templar.template(trust_as_template(task["ansible.builtin.set_fact"]["sm120_deploy_upgrade"].strip()))


def _power_runs(variables):
    task = _task("Search the GPU power limit on the running server")
    templar = Templar(loader=DataLoader(), variables=variables)
    return all(templar.evaluate_conditional(trust_as_template(condition)) for condition in task["when"])


def test_a_new_release_slower_than_its_baseline_loses_and_the_power_search_does_not_run():
    variables = _state("0.5.22", measurement(400, 2700))
    verdict = _judge(variables)
    assert verdict["decision"] == "lost" and verdict["previous_release"] == "0.5.22"
    assert not _power_runs(dict(variables, sm120_deploy_upgrade=verdict))


def test_a_new_release_as_fast_is_kept_and_the_power_search_runs():
    variables = _state("0.5.22", measurement(405, 1900))
    verdict = _judge(variables)
    assert verdict["decision"] == "kept"
    assert _power_runs(dict(variables, sm120_deploy_upgrade=verdict))


@pytest.mark.parametrize("previous", ["", "0.5.23"], ids=["no-release-replaced", "same-release"])
def test_no_upgrade_is_judged_where_the_release_did_not_change(previous):
    variables = _state(previous, {})
    assert _judge(variables) is None
    assert _power_runs(variables)


def test_the_power_search_runs_where_steps_are_given_and_the_smoke_test_measured_in_this_run():
    """The experiments role's steps and the smoke test's word on its measurement decide it, in the play: the smoke
    test no longer holds the search's steps."""
    variables = _state("", {})
    assert _power_runs(variables)
    assert not _power_runs(dict(variables, experiments_settings={"power_limit_steps_w": []}))
    assert not _power_runs(dict(variables, smoke_test_state=dict(variables["smoke_test_state"], reused=True)))


def test_the_report_gets_the_verdict_as_its_own_argument_and_the_smoke_test_the_release_replaced():
    report = _task("Check the result against the thresholds and the fleet, decide the run's verdict, report")
    assert report["vars"]["smoke_test_report_upgrade"] == "{{ sm120_deploy_upgrade | default(none) }}"
    measure = _task("Measure the server as deployed at every load with GPU power, or take its last measurement")
    assert measure["vars"]["smoke_test_previous_release"] == "{{ sglang_install_previous_release | default('') }}"
    for path in sorted((ROOT / "roles" / "smoke_test").glob("*/*.yml")):
        text = "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("#"))
        assert not re.search(r"\b(sglang_install_previous_release|sm120_deploy_upgrade)\b", text), path
        assert "upgrade_verdict(" not in text, "%s judges the upgrade itself" % path

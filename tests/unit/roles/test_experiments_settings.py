# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The experiments role's settings, its own arguments (issue 39): each new name reads the smoke test's old name for
one release through a default() chain in roles/experiments/defaults/main.yml, resolved here by Ansible's Templar; the
deploy play publishes them once and hands the smoke test what it needs, and the smoke test keeps none of them."""

from __future__ import annotations

import os
import pathlib
import re

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import DEPRECATED_NAMES

ROOT = pathlib.Path(__file__).resolve().parents[3]
DEFAULTS = ROOT / "roles" / "experiments" / "defaults" / "main.yml"
# What each setting was by default as the smoke test's variable: the new names keep it.
BEFORE = {"experiments_enabled": True, "experiments_retry": [], "experiments_tolerance": 0.03,
          "experiments_noise_multiple": 3.0, "experiments_resolution": 0.10, "experiments_restart_budget": None,
          "experiments_parity_min_match": 1.0, "experiments_parity_min_prefix": 0.25,
          "experiments_power_limit_steps_w": [], "experiments_nvidia_smi": "nvidia-smi",
          # Beside the smoke test's reports, in the directory ansible-playbook runs from.
          "experiments_verdict_file": os.environ.get("PWD", "") + "/reports/verdicts.json"}
# A value of each, unlike its default.
SET = {"experiments_enabled": False, "experiments_retry": ["s3"], "experiments_tolerance": 0.05,
       "experiments_noise_multiple": 2.0, "experiments_resolution": 0.2, "experiments_restart_budget": 2,
       "experiments_parity_min_match": 0.5, "experiments_parity_min_prefix": 0.5,
       "experiments_power_limit_steps_w": [350, 200], "experiments_nvidia_smi": "/opt/nvidia-smi",
       "experiments_verdict_file": "/srv/sm120/verdicts.json"}


def _resolved(name, inventory):
    """A setting of the experiments role for a host with these inventory variables, as Ansible resolves it."""
    loader = DataLoader()
    variables = dict(loader.load_from_file(str(DEFAULTS), trusted_as_template=True))
    variables.update(inventory)
    return Templar(loader=loader, variables=variables).template(trust_as_template("{{ %s }}" % name))


# Settings the experiments role was given after the rename, which never had a smoke_test_* name.
NEW = {"experiments_parity_tie_nats"}
# The order entry point's arguments (the configuration the verdicts are kept for), which the deploy play passes: not
# settings a user sets, and never the smoke test's.
ORDER_ARGUMENTS = {"experiments_release", "experiments_tp_size", "experiments_loads"}


def test_every_setting_has_its_old_name_and_nothing_else_is_a_setting():
    assert set(yaml.safe_load(DEFAULTS.read_text())) - NEW - ORDER_ARGUMENTS == set(DEPRECATED_NAMES) == set(BEFORE) \
        == set(SET)
    assert not NEW & set(DEPRECATED_NAMES)


@pytest.mark.parametrize("new", sorted(DEPRECATED_NAMES))
def test_a_setting_left_alone_keeps_the_default_it_had_as_the_smoke_test_s(new):
    assert _resolved(new, {}) == BEFORE[new]


@pytest.mark.parametrize("new", sorted(DEPRECATED_NAMES))
def test_the_old_name_still_sets_it(new):
    assert _resolved(new, {DEPRECATED_NAMES[new]: SET[new]}) == SET[new]


@pytest.mark.parametrize("new", sorted(DEPRECATED_NAMES))
def test_the_new_name_wins_over_the_old_one(new):
    assert _resolved(new, {new: SET[new], DEPRECATED_NAMES[new]: BEFORE[new]}) == SET[new]


def test_the_verdicts_stay_beside_the_smoke_test_s_reports_where_the_inventory_moves_them():
    """As before, when they were the smoke test's smoke_test_verdict_file: the molecule scenarios and the benchmarks
    move the reports, and read the verdicts there."""
    assert _resolved("experiments_verdict_file", {"smoke_test_report_dir": "/tmp/r"}) == "/tmp/r/verdicts.json"


def test_the_default_chain_reads_only_the_old_name_of_each_setting():
    for new, default in yaml.safe_load(DEFAULTS.read_text()).items():
        if new in NEW | ORDER_ARGUMENTS:
            assert "smoke_test_" not in str(default), (new, default)
            continue
        assert default.startswith("{{ %s | default(" % DEPRECATED_NAMES[new]), (new, default)


def test_the_smoke_test_keeps_none_of_the_settings():
    """Neither the old names nor the new ones are the smoke test's: what it needs of them comes in as
    smoke_test_from_experiments."""
    defaults = yaml.safe_load((ROOT / "roles" / "smoke_test" / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((ROOT / "roles" / "smoke_test" / "meta" / "argument_specs.yml").read_text())
    options = {name for entry in specs["argument_specs"].values() for name in entry.get("options") or {}}
    for name in set(DEPRECATED_NAMES) | set(DEPRECATED_NAMES.values()):
        assert name not in defaults and name not in options, name
    old = re.compile(r"\b(%s)\b" % "|".join(DEPRECATED_NAMES.values()))
    for path in sorted((ROOT / "roles" / "smoke_test").glob("*/*.yml")):
        for line in path.read_text().splitlines():
            assert line.strip().startswith("#") or not old.search(line), (path.name, line)


def test_the_experiments_role_reads_and_writes_the_memory_and_the_smoke_test_neither():
    settings = (ROOT / "roles" / "experiments" / "tasks" / "settings.yml").read_text()
    assert "lookup('ansible.builtin.file', experiments_verdict_file)" in settings
    main = yaml.safe_load((ROOT / "roles" / "experiments" / "tasks" / "main.yml").read_text())
    [write] = [task for task in main
               if task.get("ansible.builtin.copy", {}).get("dest") == "{{ experiments_verdict_file }}"]
    assert "sm120.sglang.experiment_remember(" in write["ansible.builtin.copy"]["content"]
    assert write["run_once"] is True and write["delegate_to"] == "localhost"
    for path in sorted((ROOT / "roles" / "smoke_test").glob("*/*.yml")):
        text = "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("#"))
        assert "experiment_remember" not in text and "verdict_file" not in text, path


def _tasks(play_path):
    return [task for play in yaml.safe_load(play_path.read_text()) for task in play.get("tasks") or []]


def test_the_deploy_play_publishes_the_settings_first_for_every_tag_and_hands_them_to_the_smoke_test():
    tasks = _tasks(ROOT / "playbooks" / "deploy.yml")
    roles = [task for task in tasks if "ansible.builtin.include_role" in task or "ansible.builtin.import_role" in task]
    first = roles[0]
    # Imported, not included: it runs on every deploy and an include would be a task more a host.
    assert first["ansible.builtin.import_role"]["name"] == "sm120.sglang.experiments"
    assert first["ansible.builtin.import_role"]["tasks_from"] == "settings"
    assert first["tags"] == ["always"]
    [phase] = [task for task in tasks if task.get("name") == "Measure, decide, judge and report"]
    assert phase["ansible.builtin.include_tasks"] == {"file": "tasks/smoke.yml", "apply": {"tags": ["smoke"]}}
    assert phase["tags"] == ["smoke"]
    block = yaml.safe_load((ROOT / "playbooks" / "tasks" / "smoke.yml").read_text())
    smoke = [task for task in block
             if task.get("ansible.builtin.import_role", {}).get("name") == "sm120.sglang.smoke_test"][0]
    assert "tasks_from" not in smoke["ansible.builtin.import_role"]
    assert smoke["vars"]["smoke_test_from_experiments"] == "{{ experiments_settings | combine(experiments_run) }}"
    # This run's experiments, named by their owner before the smoke test measures their baseline.
    order = block[block.index(smoke) - 1]["ansible.builtin.import_role"]
    assert (order["name"], order["tasks_from"]) == ("sm120.sglang.experiments", "order")

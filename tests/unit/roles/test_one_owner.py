# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One owner per fact that several roles read (issue 39): the deploy play hands each role the same value as
that role's own argument, and no role reads another role's argument for it.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from jinja2.nativetypes import NativeEnvironment

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_memory, gate_plan
from ansible_collections.sm120.sglang.tests.unit.role_vars import ansible_environment

ROOT = pathlib.Path(__file__).resolve().parents[3]
LEDGER_TASK = "Hand every role that reads or writes the patch ledger the same path"


def _load(path):
    return yaml.safe_load(path.read_text()) or {}


def _ledger_arguments():
    """Every role argument, of any entry point, whose default is the patch ledger: role -> names."""
    found = {}
    for specs in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        for entry in _load(specs)["argument_specs"].values():
            for name, option in (entry.get("options") or {}).items():
                if str(option.get("default", "")).endswith("/patch-ledger.json"):
                    found.setdefault(specs.parent.parent.name, set()).add(name)
    return found


def _deploy_ledger_task():
    plays = _load(ROOT / "playbooks" / "deploy.yml")
    tasks = [task for play in plays for task in play.get("tasks") or [] if task.get("name") == LEDGER_TASK]
    assert len(tasks) == 1, "playbooks/deploy.yml has one task that sets the patch ledger's path"
    return tasks[0]


def _render(template, variables):
    return ansible_environment(NativeEnvironment).from_string(template).render(variables)


def test_the_roles_that_read_the_patch_ledger_are_the_three_the_deploy_play_wires():
    assert _ledger_arguments() == {"sm120_patches": {"sm120_patches_ledger_path"},
                                   "sglang_install": {"sglang_install_patch_ledger"},
                                   "sglang_service": {"sglang_service_patch_ledger"}}


def test_the_deploy_play_sets_every_ledger_argument_from_one_value():
    task = _deploy_ledger_task()
    names = set().union(*_ledger_arguments().values())
    assert set(task["ansible.builtin.set_fact"]) == names
    assert {value.strip() for value in task["ansible.builtin.set_fact"].values()} == {"{{ __deploy_patch_ledger }}"}
    assert task["tags"] == ["always"], "--tags rollback, --tags service and --tags smoke read the ledger too"


@pytest.mark.parametrize("inventory, path", [
    ({}, "/var/lib/sm120-sglang/patch-ledger.json"),
    ({"sm120_state_dir": "/srv/sm120"}, "/srv/sm120/patch-ledger.json"),
    # The name users set before the deploy play owned the path: it moves the ledger for every role now.
    ({"sm120_state_dir": "/srv/sm120", "sm120_patches_ledger_path": "/data/ledger.json"}, "/data/ledger.json"),
])
def test_moving_the_ledger_moves_it_for_every_role_and_the_roles_alone_agree(inventory, path):
    template = _deploy_ledger_task()["vars"]["__deploy_patch_ledger"].strip()
    assert _render(template, inventory) == path
    if "sm120_patches_ledger_path" not in inventory:
        # A role taken alone (without deploy.yml) reads the same file by its own default.
        for specs in ROOT.glob("roles/*/meta/argument_specs.yml"):
            for entry in _load(specs)["argument_specs"].values():
                for option in (entry.get("options") or {}).values():
                    if str(option.get("default", "")).endswith("/patch-ledger.json"):
                        assert _render(option["default"], inventory) == path


def test_no_role_reads_another_role_s_ledger_argument():
    """Another role's ledger argument may appear in a role only as a key handed to that role (include vars)."""
    owners = {name: role for role, names in _ledger_arguments().items() for name in names}
    for path in sorted(ROOT.glob("roles/*/**/*.yml")) + sorted(ROOT.glob("roles/*/templates/*")):
        role = path.relative_to(ROOT / "roles").parts[0]
        text = path.read_text()
        for name, owner in owners.items():
            if owner == role or path.parent.name == "meta":
                continue
            reads = [line for line in text.splitlines() if re.search(r"\b%s\b(?!:)" % name, line)]
            assert not reads, "%s reads %s, an argument of %s: %s" % (path.relative_to(ROOT), name, owner, reads)


def _role_value(role, name, variables):
    """A variable of a role's vars/main.yml, resolved by Ansible's Templar over its defaults and the given vars."""
    loader = DataLoader()
    defaults = ROOT / "roles" / role / "defaults" / "main.yml"
    merged = dict(loader.load_from_file(str(defaults), trusted_as_template=True) if defaults.is_file() else {})
    merged.update(variables)
    merged.update(loader.load_from_file(str(ROOT / "roles" / role / "vars" / "main.yml"), trusted_as_template=True))
    return Templar(loader=loader, variables=merged).template(trust_as_template("{{ %s }}" % name))


OLD = {"reason": "smoke test R1: rejected", "rejected_at": "2026-12-01T00:00:00Z", "run_id": "R1"}
NEW = {"reason": "smoke test R2: no gain", "rejected_at": "2026-12-05T00:00:00Z", "run_id": "R2"}
# role: (the variable it records, the fact it reads the record from, its rejections now, its retry argument)
REJECTED_RECORDS = {
    "sm120_patches": ("__sm120_patches_rejected_next", "rejected", "sm120_patches_reject", "sm120_patches_retry_rejected"),
    "sglang_service": ("__sglang_service_tuning_rejected_next", "tuning_rejected", "sglang_service_tuning_reject",
                       "sglang_service_tuning_retry_rejected"),
}


@pytest.mark.parametrize("role", sorted(REJECTED_RECORDS))
@pytest.mark.parametrize("retry", [False, True])
def test_both_roles_record_their_rejections_through_the_one_merge(role, retry):
    name, fact, now, retry_name = REJECTED_RECORDS[role]
    recorded, rejected_now = {"a": OLD, "b": OLD}, {"b": NEW}
    found = _role_value(role, name, {"sglang_state": {fact: recorded}, now: rejected_now,
                                     retry_name: "yes" if retry else "no"})
    assert found == experiment_memory.rejected_record(recorded, rejected_now, retry)


def test_no_role_merges_a_record_of_rejections_in_its_own_jinja():
    """Each role's retry argument reaches the record only through the filter; a second copy of the merge in Jinja
    (the record, or nothing where retried, combined with this run's) would read it elsewhere."""
    retry_arguments = {name for role in ROOT.glob("roles/*") for name in _spec_options(role) if name.endswith("retry_rejected")}
    assert retry_arguments == {entry[3] for entry in REJECTED_RECORDS.values()}
    for path in sorted(ROOT.glob("roles/*/tasks/*.yml")) + sorted(ROOT.glob("roles/*/vars/*.yml")):
        for line in path.read_text().splitlines():
            for name in retry_arguments:
                if re.search(r"\b%s\s*\|\s*bool" % name, line):
                    assert "sm120.sglang.experiment_rejected_record(" in line, "%s merges rejections itself: %s" % (
                        path.relative_to(ROOT), line.strip())


def _spec_options(role):
    specs = role / "meta" / "argument_specs.yml"
    if not specs.is_file():
        return set()
    return {name for entry in _load(specs)["argument_specs"].values() for name in (entry.get("options") or {})}


# Where a role asks which gates are live: role -> the variable holding the answer, and whether it reads the facts
# this run's patch phase published (the patch role itself asks its ledger only, before its plan).
GATES_LIVE = {"sm120_patches": ("__sm120_patches_live_before", False),
              "experiments": ("__experiments_gates_live", True),
              "sglang_service": ("__sglang_service_live", True)}
PUBLISHED = ["moe_runner_sm120"]
RECORDED = {"gates": ["pcie_ipc_allreduce", "moe_runner_sm120"], "options": {"gates": [], "env": {}, "flags": {}}}


@pytest.mark.parametrize("role", sorted(GATES_LIVE))
@pytest.mark.parametrize("published", [True, False], ids=["patch-phase-ran", "ledger-only"])
def test_every_role_that_asks_which_gates_are_live_gets_the_one_answer(role, published):
    name, reads_published = GATES_LIVE[role]
    facts = {"sglang_state": {"ledger": RECORDED}}
    if published:
        facts.update(sm120_patches_live=PUBLISHED, sm120_patches_options={"gates": [], "env": {}, "flags": {}})
    expected = gate_plan.live(RECORDED, PUBLISHED if published and reads_published else None)["gates"]
    assert _role_value(role, name, facts) == expected


# The experiments' list (the experiments role's order entry point) takes the gates this run's patch phase made live
# as the experiments it decides, and none in a run without that phase (as it takes the tuning options only from this
# run's service phase), and smoke_test shows them in its measurements' rows: they read the published fact, never the
# ledger, so they have no fallback of their own to drift.
PUBLISHED_ONLY = {"smoke_test", "experiments/tasks/order.yml"}
READS_LIVE = re.compile(r"\bsm120_patches_(live|options)\b(?!:)|ledger\s*\.\s*(gates|options)\b|ledger\[")


def test_no_role_decides_which_gates_are_live_outside_the_one_function():
    for path in sorted(ROOT.glob("roles/*/tasks/*.yml")) + sorted(ROOT.glob("roles/*/vars/*.yml")):
        role = path.relative_to(ROOT / "roles").parts[0]
        for line in path.read_text().splitlines():
            if (line.strip().startswith("#") or not READS_LIVE.search(line) or role in PUBLISHED_ONLY
                    or path.relative_to(ROOT / "roles").as_posix() in PUBLISHED_ONLY):
                continue
            assert "sm120.sglang.gates_live" in line, "%s decides which gates are live itself: %s" % (
                path.relative_to(ROOT), line.strip())
    for path in sorted(ROOT.glob("roles/smoke_test/*/*.yml")):
        assert not re.search(r"ledger\b", path.read_text()), "%s reads the ledger: ask sm120.sglang.gates_live" % path


ASKS_ON = re.compile(r"sm120_patches_enabled\s*(\[|\.get\(|\|\s*combine)|fillvalue=false")


def test_no_role_decides_whether_a_gate_is_asked_on_outside_the_one_function():
    """Whether a gate is asked on (the inventory's choice over its default_enabled, less what is turned off) is
    gate_plan.enabled_map: the filters gates_enabled and gate_plan. A role that indexes or combines
    sm120_patches_enabled itself has a second answer (one that forgot default_enabled did)."""
    for path in sorted(ROOT.glob("roles/*/tasks/*.yml")) + sorted(ROOT.glob("roles/*/vars/*.yml")):
        for line in path.read_text().splitlines():
            assert line.strip().startswith("#") or not ASKS_ON.search(line), "%s decides it itself: %s" % (
                path.relative_to(ROOT), line.strip())


@pytest.mark.parametrize("asked, shown", [({}, True), ({"moe_runner_sm120": False}, False),
                                          ({"moe_runner_sm120": True}, True)])
def test_a_rejected_gate_on_by_default_is_said_to_stay_off(asked, shown):
    """The patch role's word on a rejected gate reads the same answer as its plan: moe_runner_sm120 is on by default."""
    tasks = _load(ROOT / "roles" / "sm120_patches" / "tasks" / "main.yml")
    task = [task for task in tasks if task["name"] == "Say which wanted gates stay off because they were rejected"][0]
    templar = Templar(loader=DataLoader(), variables={"sm120_patches_enabled": asked,
                                                      "item": {"key": "moe_runner_sm120", "value": {}}})
    assert templar.evaluate_conditional(trust_as_template(task["when"])) is shown


# What smoke_test reads of other roles (issue 39: 18 names in 53 references before the experiments took their
# settings, list, memory and the upgrade judgment; the TP size went with the memory key, which the experiments role
# computes): none in its tasks and vars. Its own documented arguments (defaults/main.yml, meta/argument_specs.yml)
# default to what the service and patch roles publish during a deploy - where to reach the server, the loads, the
# profile, the running process, what runs live and the restarts - so that the role alone takes them from its play
# and the deploy needs to pass nothing. None of the experiments role's (they come in as smoke_test_from_experiments
# and the result and report entry points' arguments), none of sglang_install's (smoke_test_previous_release), none
# held back (the experiments' list is the experiments role's). A name added here is a step back.
SMOKE_TEST_DEFAULTS_READ = {
    "sglang_service_api_key", "sglang_service_loads", "sglang_service_model_name", "sglang_service_profile_name",
    "sglang_service_restart_seconds", "sglang_service_restarts", "sglang_service_started",
    "sglang_service_tuning_live", "sglang_service_url", "sglang_service_vocab_size", "sm120_patches_live"}


def _smoke_test_reads(*folders):
    roles = sorted(path.name for path in (ROOT / "roles").iterdir() if path.is_dir() and path.name != "smoke_test")
    other = re.compile(r"(?<![\w.])_{0,2}(?:%s)_\w+" % "|".join(sorted(roles, key=len, reverse=True)))
    found = set()
    for folder in folders:
        for path in sorted((ROOT / "roles" / "smoke_test" / folder).glob("*.yml")):
            for line in path.read_text().splitlines():
                if not line.strip().startswith("#"):
                    found.update(other.findall(line))
    return found


def test_the_smoke_test_reads_no_other_role_but_through_its_own_documented_arguments():
    assert _smoke_test_reads("tasks", "vars") == set()
    found = _smoke_test_reads("defaults")
    assert found <= SMOKE_TEST_DEFAULTS_READ, sorted(found - SMOKE_TEST_DEFAULTS_READ)
    assert not any(name.startswith(("experiments_", "sglang_install_")) for name in found), found
    # Each such default is an argument of its own, documented with the same default.
    specs = yaml.safe_load((ROOT / "roles" / "smoke_test" / "meta" / "argument_specs.yml").read_text())
    documented = {name: spec for entry in specs["argument_specs"].values() for name, spec in
                  (entry.get("options") or {}).items()}
    defaults = yaml.safe_load((ROOT / "roles" / "smoke_test" / "defaults" / "main.yml").read_text())
    for name, default in defaults.items():
        if any(read in str(default) for read in SMOKE_TEST_DEFAULTS_READ):
            assert documented[name]["default"] == default, name


def test_the_smoke_test_asks_no_plan_and_keys_no_memory():
    """The experiments' plan and the configuration their verdicts are kept for are the experiments role's (its order
    entry point publishes the plan on the verdicts kept, experiments_run.settled, and the memory key): the smoke test
    reads them as handed on, and calls neither the planner nor the key."""
    asks = re.compile(r"sm120\.sglang\.(experiment_step|experiment_memory_key|experiment_remember)\b")
    for path in sorted((ROOT / "roles" / "smoke_test").glob("*/*.yml")):
        for line in path.read_text().splitlines():
            assert line.strip().startswith("#") or not asks.search(line), "%s: %s" % (path.name, line.strip())
    order = (ROOT / "roles" / "experiments" / "tasks" / "order.yml").read_text()
    assert "sm120.sglang.experiment_step(" in order and "sm120.sglang.experiment_memory_key(" in order

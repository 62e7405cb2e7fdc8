# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's inputs: each default has an argument spec with the same default, and back; secrets are no_log.

One test for all roles (roles/*), so a new role or a new variable cannot skip it.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

ROLES = sorted(path.parent.parent for path in (pathlib.Path(__file__).resolve().parents[3] / "roles").glob(
    "*/meta/argument_specs.yml"))
SECRET = re.compile(r"(api_key|token|password|secret)$")


def _load(path):
    return yaml.safe_load(path.read_text()) or {}


def test_every_role_has_argument_specs():
    assert [role.name for role in ROLES] == sorted(path.name for path in ROLES[0].parent.iterdir() if path.is_dir())


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_every_default_has_an_argument_spec_with_the_same_default_and_back(role):
    # A role without variables of its own has no defaults.
    defaults = _load(role / "defaults" / "main.yml") if (role / "defaults" / "main.yml").exists() else {}
    specs = _load(role / "meta" / "argument_specs.yml")["argument_specs"]
    # Mostly the main entry point's; a role whose settings have an entry point of their own (experiments' settings,
    # which the deploy play publishes first) documents them there, and main takes none.
    main = {}
    for entry_spec in specs.values():
        main.update(entry_spec.get("options") or {})
    assert sorted(main) == sorted(defaults)
    for name, spec in main.items():
        assert name.startswith(role.name + "_"), name
        assert spec.get("description"), name
        assert spec.get("type"), name
        assert "default" in spec, name
        assert spec["default"] == defaults[name], (name, spec["default"], defaults[name])
    # Every entry point (tasks_from) that takes a variable documents it alike.
    for entry, entry_spec in specs.items():
        for name, spec in (entry_spec.get("options") or {}).items():
            assert name in main, (entry, name)
            assert spec["type"] == main[name]["type"] and spec.get("default") == main[name]["default"], (entry, name)


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_every_key_or_token_is_no_log(role):
    for entry_spec in _load(role / "meta" / "argument_specs.yml")["argument_specs"].values():
        for name, spec in (entry_spec.get("options") or {}).items():
            assert bool(spec.get("no_log")) is bool(SECRET.search(name)), name


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_internal_variables_carry_the_double_underscore_prefix(role):
    for path in (role / "vars").glob("*.yml"):
        for name in _load(path):
            assert name.startswith("__%s_" % role.name), (path.name, name)


def _include_roles(node):
    """Every include_role/import_role of a task tree (blocks, rescue, always), as its arguments."""
    if isinstance(node, list):
        for item in node:
            yield from _include_roles(item)
    elif isinstance(node, dict):
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role"):
            if isinstance(node.get(key), dict):
                yield node[key]
        for key in ("tasks", "block", "rescue", "always", "pre_tasks", "post_tasks"):
            yield from _include_roles(node.get(key) or [])


def _entry_points_not_validated():
    root = pathlib.Path(__file__).resolve().parents[3]
    for path in sorted(list((root / "playbooks").glob("**/*.yml")) + list((root / "roles").glob("*/tasks/*.yml"))):
        for include in _include_roles(yaml.safe_load(path.read_text()) or []):
            if include.get("rolespec_validate") is False:
                yield path.relative_to(root), include["name"].split(".")[-1], include.get("tasks_from", "main")


def test_an_include_that_skips_validation_calls_an_entry_point_without_options():
    # rolespec_validate: false saves a task a host where there is nothing to check; an entry point that gains a
    # variable must be validated again.
    skipped = list(_entry_points_not_validated())
    assert ("playbooks/tasks/smoke.yml", "smoke_test", "verdict") in [(str(p), r, e) for p, r, e in skipped]
    for path, role, entry in skipped:
        specs = _load(pathlib.Path(__file__).resolve().parents[3] / "roles" / role / "meta" / "argument_specs.yml")
        assert entry in specs["argument_specs"], (path, role, entry)
        assert not specs["argument_specs"][entry].get("options"), (
            "%s includes %s's entry point %s with rolespec_validate: false, but it has options: validate it"
            % (path, role, entry))

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's variables for one host, resolved the way Ansible resolves them, without its executor.

For roles whose distributions molecule cannot run here: the variables are
layered in Ansible's precedence (defaults < inventory < role vars < the vars
file first_found picks), and each is templated with jinja2 and Ansible's own
filters when first read.
"""

from __future__ import annotations

import collections.abc
import importlib
import pathlib

import jinja2
import yaml
from jinja2.nativetypes import NativeEnvironment

from ansible.plugins.filter.core import FilterModule
from ansible.plugins.filter.mathstuff import FilterModule as MathFilters
from ansible.plugins.test.core import TestModule as AnsibleTests


def load_yaml(path):
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def _collection_filters():
    """The collection's own filters under their FQCN, as the roles call them (sm120.sglang.<name>)."""
    filters = {}
    for path in sorted((pathlib.Path(__file__).resolve().parents[2] / "plugins" / "filter").glob("*.py")):
        module = importlib.import_module("ansible_collections.sm120.sglang.plugins.filter." + path.stem)
        filters.update({"sm120.sglang." + name: function for name, function in module.FilterModule().filters().items()})
    return filters


def ansible_environment(cls, **options):
    """A jinja2 environment of class cls with Ansible's core and math filters and tests, and the collection's filters."""
    env = cls(undefined=jinja2.StrictUndefined, **options)
    env.filters.update(FilterModule().filters())
    # Ansible's default coalesces its own undefined marker, which this plain environment does not make: here a name
    # no file defines (sm120_state_dir, which the roles read with a default) is jinja2's Undefined.
    ansible_default = env.filters["default"]
    env.filters["default"] = lambda value, default_value="", boolean=False: (
        default_value if isinstance(value, jinja2.Undefined) else ansible_default(value, default_value, boolean))
    env.filters.update(MathFilters().filters())
    env.filters.update(_collection_filters())
    env.tests.update(AnsibleTests().tests())
    return env


class RoleVars(collections.abc.Mapping):
    """The variables of the role at role_dir for one host, each templated when first read.

    role_vars: the files under vars/ the role always loads, in order; vars_files_key:
    the variable holding the role's first_found spec ({files, paths}).
    """

    def __init__(self, role_dir, facts, vars_files_key, role_vars=("main.yml",), inventory=None, extra=None):
        self.role_dir = role_dir
        self._native = ansible_environment(NativeEnvironment)
        self._resolved = {}
        self._raw = {"ansible_facts": facts, "inventory_hostname": "gpu-node-01"}
        self._raw.update(extra or {})
        self._raw.update(load_yaml(role_dir / "defaults" / "main.yml"))
        self._raw.update(inventory or {})
        for name in role_vars:
            self._raw.update(load_yaml(role_dir / "vars" / name))
        self.vars_file = self._first_found(self[vars_files_key])
        self._raw.update(load_yaml(self.vars_file))
        self._resolved.clear()  # read before the vars file: its names may differ now

    def _first_found(self, spec):
        for name in spec["files"]:
            for path in spec["paths"]:
                candidate = self.role_dir / path / name
                if candidate.is_file():
                    return candidate
        raise LookupError("no vars file among %s" % spec["files"])

    def __getitem__(self, name):
        if name not in self._resolved:
            self._resolved[name] = self.render(self._raw[name])
        return self._resolved[name]

    def __iter__(self):
        return iter(self._raw)

    def __len__(self):
        return len(self._raw)

    def render(self, value):
        """A value with every template in it resolved against these variables."""
        if isinstance(value, dict):
            return {key: self.render(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.render(item) for item in value]
        if not isinstance(value, str) or ("{{" not in value and "{%" not in value):
            return value
        template = self._native.from_string(value)
        nodes = list(template.root_render_func(template.new_context(self, shared=True)))
        # One expression keeps its type (a list stays a list); text around it makes a string.
        return nodes[0] if len(nodes) == 1 else "".join(str(node) for node in nodes)

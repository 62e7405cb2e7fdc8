# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: input_problems
short_description: Every problem of the run's inputs, checked on the controller before anything changes
version_added: "0.9.0"
description:
  - For the hosts named, the variables each one has that carry a role's prefix (set in the inventory, with C(-e) or in
    a play), held to every role's C(meta/argument_specs.yml) and to the collection's data - the launch profile, the
    tensor-parallel size against the host's GPUs (C(preflight_gpu_count)) and nodes, the release, the tuning options,
    the gates, the smoke thresholds and loads, the model's path and repository - and a variable no role reads named
    with the nearest known name.
  - One line per problem, naming the hosts, the variable the user set and the fix; an empty list where there is none.
    The decisions are C(plugins/plugin_utils/input_check.py)'s.
options:
  _terms:
    description: The hosts of the run (e.g. C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  serving:
    description:
      - The run starts SGLang servers (C(playbooks/deploy.yml)); one that listens beyond its host without
        C(sglang_service_api_key) is refused.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Refuse every mistaken input at once
  ansible.builtin.assert:
    that: __problems | length == 0
    fail_msg: "{{ __problems }}"
  vars:
    __problems: "{{ query('sm120.sglang.input_problems', *ansible_play_hosts_all) }}"
  run_once: true
"""

RETURN = r"""
_raw:
  description: The problems, one line each; none where every input is right.
  type: list
  elements: str
"""

import glob
import os
import re

import yaml

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_data, input_check, sglang_releases

# plugins/lookup/input_problems.py -> the collection's root.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_KNOWN = {}


def _yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _published(tree, names):
    """The names a task file sets as facts (set_fact) or registers: what a later play of the same run sees."""
    if isinstance(tree, list):
        for item in tree:
            _published(item, names)
    elif isinstance(tree, dict):
        for key, value in tree.items():
            if key in ("ansible.builtin.set_fact", "set_fact") and isinstance(value, dict):
                names.update(name for name in value if name != "cacheable")
            elif key == "register" and isinstance(value, str):
                names.add(value)
            else:
                _published(value, names)
    return names


def collection_knowledge(root=ROOT):
    """Read once a process: the roles' specs and defaults, the facts they publish, the profiles and the data."""
    if root in _KNOWN:
        return _KNOWN[root]
    specs, defaults, published = {}, {}, set()
    for specs_path in sorted(glob.glob(os.path.join(root, "roles", "*", "meta", "argument_specs.yml"))):
        role_dir = os.path.dirname(os.path.dirname(specs_path))
        role = os.path.basename(role_dir)
        specs[role] = _yaml(specs_path)
        defaults_path = os.path.join(role_dir, "defaults", "main.yml")
        defaults[role] = _yaml(defaults_path) if os.path.isfile(defaults_path) else {}
    task_files = (glob.glob(os.path.join(root, "roles", "*", "tasks", "*.yml"))
                  + glob.glob(os.path.join(root, "roles", "*", "handlers", "*.yml"))
                  + glob.glob(os.path.join(root, "playbooks", "**", "*.yml"), recursive=True))
    for path in sorted(task_files):
        _published(_yaml(path), published)
    # Variables the plugins read from the inventory themselves (hostvars), documented in a role's descriptions.
    literal = re.compile(r"[\"']((?:%s)_[a-z0-9_]+)[\"']" % "|".join(sorted(specs)))
    for path in sorted(glob.glob(os.path.join(root, "plugins", "plugin_utils", "*.py"))):
        with open(path, encoding="utf-8") as handle:
            published.update(literal.findall(handle.read()))
    profiles = _yaml(os.path.join(root, "roles", "sglang_service", "vars", "profiles.yml"))
    _KNOWN[root] = (specs, defaults, published, profiles.get("__sglang_service_builtin_profiles") or {})
    return _KNOWN[root]


def _plain(value):
    """A value as YAML wrote it: plain dicts, lists and scalars (not Ansible's tagged types)."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        try:
            specs, defaults, published, profiles = collection_knowledge()
            known = input_check.knowledge(specs, defaults, published, profiles, sglang_releases.load(),
                                          experiment_data.load(), dict(variables.get("groups") or {}),
                                          self.get_option("serving"))
        except (OSError, yaml.YAMLError, sglang_releases.ReleaseDataError, experiment_data.ExperimentDataError) as exc:
            raise AnsibleLookupError("input_problems: the collection's own files cannot be read: %s" % exc)
        # A role's prefix, or its first word (sglang_servce_tp_size: a typo in the prefix, named when a known name
        # is that near).
        firsts = {role.split("_")[0] + "_" for role in known["roles"]}
        prefixes = tuple(sorted({role + "_" for role in known["roles"]} | firsts))
        hostvars = variables.get("hostvars") or {}
        hosts = {}
        for host in terms:
            if host not in hostvars:
                continue
            host_vars = hostvars[host]
            values = {}
            for name in list(host_vars.keys()):
                if not str(name).startswith(prefixes):
                    continue
                try:
                    values[name] = _plain(host_vars[name])
                except Exception:  # pylint: disable=broad-except
                    # A value that reads a variable only the role defines (its defaults) is rendered where the role
                    # runs; here it cannot be: its name is judged, its value is not.
                    values[name] = input_check.UNREAD
            hosts[host] = values
        return input_check.problems(hosts, known)

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: phase_inputs
short_description: The digest of a phase's inputs, its role's variables and the collection's code
version_added: "0.9.0"
description:
  - For the role named, the sha256 of every option of its entry point (read from the role's
    C(meta/argument_specs.yml), with this host's values) but its skip switch (C(ROLE_skip_unchanged), no input of
    what the phase does), of the role's files and of the collection's C(plugins/) and C(data/).
  - What M(sm120.sglang.phase_stamp) records, so that a later run skips the phase only where none of them changed.
options:
  _terms:
    description: The role's name within the collection (e.g. V(gpu_driver)); one.
    type: list
    elements: str
    required: true
  entry_point:
    description: The entry point whose options are the inputs.
    type: str
    default: main
"""

EXAMPLES = r"""
- name: Compare the driver phase with its last run
  sm120.sglang.phase_stamp:
    path: /var/lib/sm120-sglang/phases/driver.json
    phase: driver
    inputs: "{{ lookup('sm120.sglang.phase_inputs', 'gpu_driver') }}"
"""

RETURN = r"""
_raw:
  description: The digest, 64 hexadecimal digits.
  type: list
  elements: str
"""

import os

import yaml

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sm120.sglang.plugins.plugin_utils import phase_inputs

# plugins/lookup/phase_inputs.py -> the collection's root.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _code(role_dir):
    """Relative path -> bytes of the role's files and the collection's plugins and data (no bytecode)."""
    code = {}
    for top in (role_dir, os.path.join(ROOT, "plugins"), os.path.join(ROOT, "data")):
        for directory, subdirectories, names in os.walk(top):
            subdirectories[:] = sorted(name for name in subdirectories if name != "__pycache__")
            for name in sorted(names):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(directory, name)
                with open(path, "rb") as handle:
                    code[os.path.relpath(path, ROOT)] = handle.read()
    return code


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1 or not isinstance(terms[0], str) or not terms[0]:
            raise AnsibleLookupError("phase_inputs takes one role name, e.g. lookup('sm120.sglang.phase_inputs', "
                                     "'gpu_driver'); got %r" % (terms,))
        role = terms[0]
        role_dir = os.path.join(ROOT, "roles", role)
        specs_path = os.path.join(role_dir, "meta", "argument_specs.yml")
        if not os.path.isfile(specs_path):
            raise AnsibleLookupError("phase_inputs: the collection has no role %s with meta/argument_specs.yml (looked "
                                     "in %s); name one of its roles" % (role, os.path.join(ROOT, "roles")))
        try:
            with open(specs_path, encoding="utf-8") as handle:
                names = phase_inputs.option_names(yaml.safe_load(handle), self.get_option("entry_point"), role)
            values = {}
            for name in names:
                # An option without a default and not set stays out, as it does for the role.
                if name in (variables or {}):
                    values[name] = self._templar.template(variables[name])
            return [phase_inputs.inputs_digest(_code(role_dir), values)]
        except (phase_inputs.PhaseInputsError, OSError, yaml.YAMLError) as exc:
            raise AnsibleLookupError("phase_inputs for %s: %s" % (role, exc))

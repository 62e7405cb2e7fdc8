# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared fixtures: run a module's main() the way community.general's unit tests do."""

from __future__ import annotations

import json
import os
import sys

from ansible.plugins.loader import init_plugin_loader

# Ansible's collection loader must own the ansible_collections package before
# anything imports it, so that templates calling the collection's filters
# (sm120.sglang.*) find them in the checkout as ansible-playbook does.
for _name in [name for name in sys.modules if name == "ansible_collections" or name.startswith("ansible_collections.")]:
    del sys.modules[_name]
init_plugin_loader([os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".collections"))])

import pytest  # noqa: E402
from ansible.module_utils import basic  # noqa: E402
from ansible.module_utils.testing import patch_module_args  # noqa: E402

from ansible_collections.sm120.sglang.tests.unit.utils import ModuleExit, ModuleFail  # noqa: E402


@pytest.fixture
def run_module(monkeypatch):
    """Call a module's main() with args; return its result or raise ModuleFail."""

    def exit_json(self, **kwargs):
        raise ModuleExit(kwargs)

    def fail_json(self, msg, **kwargs):
        kwargs["msg"] = msg
        raise ModuleFail(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)

    def _run(main, args):
        with patch_module_args(args):
            try:
                main()
            except ModuleExit as done:
                # What a controller would see: the result survives JSON.
                return json.loads(json.dumps(done.result))
        raise AssertionError("module returned without exit_json or fail_json")

    return _run

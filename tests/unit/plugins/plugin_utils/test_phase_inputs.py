# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The digest of a phase's inputs: its role's documented variables and the collection's code.

The pure digest, then the lookup sm120.sglang.phase_inputs through a real ansible-playbook (local connection) on a
copy of the collection, whose role file the test may change.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils.phase_inputs import (
    PhaseInputsError,
    inputs_digest,
    option_names,
)

ROOT = pathlib.Path(__file__).resolve().parents[4]
CODE = {"roles/gpu_driver/tasks/main.yml": b"- name: x\n", "plugins/filter/a.py": b"A = 1\n"}
SPECS = {"argument_specs": {"main": {"options": {"gpu_driver_reboot": {}, "gpu_driver_branch": {},
                                                 "gpu_driver_skip_unchanged": {}}},
                            "verify": {"options": {}}}}


def test_the_inputs_are_the_options_of_the_entry_point_sorted_but_the_skip_switch():
    assert option_names(SPECS) == ["gpu_driver_branch", "gpu_driver_reboot"]
    assert option_names(SPECS, "verify") == []
    with pytest.raises(PhaseInputsError, match="gpu_driver has no entry point 'rollback' in meta/argument_specs.yml"):
        option_names(SPECS, "rollback", "gpu_driver")
    with pytest.raises(PhaseInputsError, match="has no entry point 'main'"):
        option_names({})


def test_the_digest_is_the_same_for_the_same_inputs_whatever_their_order_or_python_type():
    one = inputs_digest(CODE, {"gpu_driver_branch": 580, "gpu_driver_kernel_parameters": ("iommu=pt",)})
    two = inputs_digest(dict(reversed(list(CODE.items()))),
                        {"gpu_driver_kernel_parameters": ["iommu=pt"], "gpu_driver_branch": 580})
    assert one == two and len(one) == 64 and int(one, 16) >= 0


@pytest.mark.parametrize("code, variables", [
    ({**CODE, "plugins/filter/a.py": b"A = 2\n"}, {"gpu_driver_branch": 580}),
    ({**CODE, "plugins/filter/b.py": b""}, {"gpu_driver_branch": 580}),
    (CODE, {"gpu_driver_branch": 590}),
    (CODE, {"gpu_driver_branch": "580"}),
    (CODE, {"gpu_driver_branch": 580, "gpu_driver_reboot": True}),
])
def test_a_changed_file_or_variable_changes_the_digest(code, variables):
    assert inputs_digest(code, variables) != inputs_digest(CODE, {"gpu_driver_branch": 580})


def test_a_file_boundary_cannot_be_moved_without_changing_the_digest():
    assert inputs_digest({"a": b"xy", "b": b""}, {}) != inputs_digest({"a": b"x", "b": b"y"}, {})


# The role's defaults in scope, as they are for the role's own tasks.
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars_files:
    - collections/ansible_collections/sm120/sglang/roles/gpu_driver/defaults/main.yml
  tasks:
    - ansible.builtin.debug:
        msg: "DIGEST={{ lookup('sm120.sglang.phase_inputs', 'gpu_driver') }}"
"""


def _collection(tmp_path):
    """A copy of what the lookup reads: the role, the plugins, the data."""
    root = tmp_path / "collections" / "ansible_collections" / "sm120" / "sglang"
    for part in ("plugins", "data", "roles/gpu_driver"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "galaxy.yml", root / "galaxy.yml")
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    return root


def _digest(tmp_path, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_CONFIG=str(tmp_path / "none.cfg"))
    done = subprocess.run([sys.executable, str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i",
                           "localhost,", "-c", "local", str(tmp_path / "play.yml"), *extra], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line.split("DIGEST=")[1].strip().strip('"') for line in done.stdout.splitlines() if "DIGEST=" in line][0]


def test_the_lookup_changes_with_a_documented_variable_or_the_roles_code_and_not_otherwise(tmp_path):
    root = _collection(tmp_path)
    first = _digest(tmp_path)
    assert len(first) == 64
    # The same inputs; a variable the role does not document; the role's default given explicitly.
    assert _digest(tmp_path) == first
    assert _digest(tmp_path, "-e", "unrelated_variable=1") == first
    assert _digest(tmp_path, "-e", '{"gpu_driver_branch": 580}') == first
    # The switch that lets the phase be skipped is no input of what it does.
    assert _digest(tmp_path, "-e", "sm120_skip_unchanged=false") == first
    # A documented variable, or the role's code.
    assert _digest(tmp_path, "-e", '{"gpu_driver_branch": 590}') != first
    with open(root / "roles" / "gpu_driver" / "templates" / "blacklist-nouveau.conf.j2", "a", encoding="utf-8") as f:
        f.write("# edited\n")
    assert _digest(tmp_path) != first


def test_the_lookup_refuses_a_role_it_does_not_have_naming_it(tmp_path):
    _collection(tmp_path)
    (tmp_path / "play.yml").write_text(PLAYBOOK.replace("'gpu_driver'", "'gpu_drivers'"))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    done = subprocess.run([sys.executable, str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i",
                           "localhost,", "-c", "local", str(tmp_path / "play.yml")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert "the collection has no role gpu_drivers with meta/argument_specs.yml" in done.stdout + done.stderr

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_install role's distribution data: each supported distribution makes the venv from a Python
that the default release's Requires-Python accepts. The decisions themselves are in plugin_utils/install_plan.py
(tests/unit/plugins/plugin_utils/test_install_plan.py)."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import install_plan, sglang_releases
from ansible_collections.sm120.sglang.tests.unit.role_vars import load_yaml

ROLE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "sglang_install"
SPEC = load_yaml(ROLE / "vars" / "main.yml")["__sglang_install_vars_files"]
NEWEST = sglang_releases.install_set(sglang_releases.load(), "newest")


def vars_file(distribution, major, os_family):
    """The file the role's first_found picks, from its own list of candidates."""
    names = [name.replace("{{ ansible_facts['distribution'] }}", distribution)
             .replace("{{ ansible_facts['distribution_major_version'] }}", major)
             .replace("{{ ansible_facts['os_family'] }}", os_family) for name in SPEC["files"]]
    return next(ROLE / "vars" / name for name in names if (ROLE / "vars" / name).is_file())


# The Python each distribution ships under that name (its own package archive).
@pytest.mark.parametrize("distribution,major,os_family,picked,base,python_version", [
    ("Debian", "12", "Debian", "Debian.yml", "python3", "3.11.2"),
    ("Debian", "13", "Debian", "Debian.yml", "python3", "3.13.5"),
    ("Ubuntu", "22", "Debian", "Ubuntu-22.yml", "python3.11", "3.11.0"),
    ("Ubuntu", "24", "Debian", "Debian.yml", "python3", "3.12.3"),
    ("RedHat", "9", "RedHat", "RedHat.yml", "python3.12", "3.12.1"),
    ("Rocky", "9", "RedHat", "RedHat.yml", "python3.12", "3.12.1"),
])
def test_each_distribution_makes_the_venv_from_a_python_the_default_release_accepts(
        distribution, major, os_family, picked, base, python_version):
    path = vars_file(distribution, major, os_family)
    assert path.name == picked
    data = load_yaml(path)
    assert data["__sglang_install_os_base_python"] == base
    assert base in data["__sglang_install_os_packages"]
    assert install_plan.python_problem(NEWEST, base, python_version) is None

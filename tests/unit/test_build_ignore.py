# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built collection ships what runs; the tooling stays in the checkout, and what runs never needs it.

tooling/ holds code only the tests and scripts import (the gate-effect check, the
server-flag reader). galaxy.yml's build_ignore leaves it out of the tarball, with the
tests and the script that import it: a shipped file that imported it would fail in an
installed collection (and ansible-test sanity run on the tarball). These tests read
galaxy.yml and the sources, then build the tarball as `ansible-galaxy collection
build` does and read what it holds.
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys
import tarfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLING = "ansible_collections.sm120.sglang.tooling"
# Where a file may import the tooling: all of them left out by build_ignore.
TOOLING_USERS = ("tooling/", "tests/unit/tooling/", "scripts/upstream-watch.py")
SOURCE_DIRS = ("plugins", "roles", "playbooks", "molecule", "benchmarks", "scripts", "tests", "tooling", "meta", "data")


def _python_files(*tops):
    for top in tops:
        for directory, dirs, files in os.walk(ROOT / top):
            dirs[:] = [name for name in dirs if name != "__pycache__"]
            for name in sorted(files):
                if name.endswith(".py"):
                    yield pathlib.Path(directory, name)


def _imports(path, source=None):
    """The absolute module names a Python file imports (relative imports resolved against its path)."""
    relative = path.relative_to(ROOT).with_suffix("").parts
    found = set()
    for node in ast.walk(ast.parse(source if source is not None else path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(("ansible_collections", "sm120", "sglang") + relative[:-node.level] + ((base,) if base else ()))
            found.update([base] + ["%s.%s" % (base, alias.name) for alias in node.names])
    return found


def _imports_tooling(path, source=None):
    return any(name == TOOLING or name.startswith(TOOLING + ".") for name in _imports(path, source))


def test_galaxy_leaves_out_the_tooling_the_tests_and_the_script_that_import_it():
    ignored = yaml.safe_load((ROOT / "galaxy.yml").read_text())["build_ignore"]
    for path in ["tooling", "tests", "scripts", ".real-gpu", "molecule", "benchmarks", "docs/evidence",
                 "changelogs/fragments", "inventories/local", "ansible.cfg", "requirements.txt", "pytest.ini",
                 ".ansible-lint", ".gitignore"]:
        assert path in ignored


def test_no_plugin_imports_the_tooling():
    plugins = list(_python_files("plugins"))
    assert pathlib.Path(ROOT, "plugins", "plugin_utils", "sglang_releases.py") in plugins
    assert [str(path.relative_to(ROOT)) for path in plugins if _imports_tooling(path)] == []
    # Nor by name at run time (importlib, a module path in a string).
    assert [str(path.relative_to(ROOT)) for path in plugins if "sglang.tooling" in path.read_text()] == []


def test_only_what_the_build_leaves_out_imports_the_tooling():
    users = [str(path.relative_to(ROOT)) for path in _python_files(*SOURCE_DIRS) if _imports_tooling(path)]
    assert "scripts/upstream-watch.py" in users and "tests/unit/tooling/test_server_flags.py" in users
    assert [path for path in users if not path.startswith(TOOLING_USERS)] == []


def test_the_tooling_uses_the_runtime_modules_it_checks():
    """gate_check renders the edits with source_patch, as the module does: tooling may import plugins."""
    assert {"ansible_collections.sm120.sglang.plugins.module_utils.source_patch",
            "ansible_collections.sm120.sglang.tooling.gate_effect"} <= _imports(ROOT / "tooling" / "gate_check.py")


def test_the_built_collection_holds_no_tooling_and_nothing_it_ships_imports_what_it_leaves_out(tmp_path):
    galaxy = pathlib.Path(sys.executable).parent / "ansible-galaxy"  # the venv's, beside its python
    subprocess.run([str(galaxy) if galaxy.is_file() else "ansible-galaxy", "collection", "build", "--output-path", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    with tarfile.open(next(tmp_path.glob("sm120-sglang-*.tar.gz"))) as tarball:
        members = {member.name: member for member in tarball.getmembers() if member.isfile()}
        sources = {name: tarball.extractfile(member).read().decode() for name, member in members.items()
                   if name.endswith(".py")}
    for runs in ["plugins/plugin_utils/sglang_releases.py", "plugins/module_utils/source_patch.py",
                 "plugins/filter/gate_plan.py", "plugins/lookup/sglang_release.py", "plugins/modules/source_patch.py",
                 "data/sglang_releases.yml", "roles/sm120_patches/tasks/main.yml", "playbooks/deploy.yml"]:
        assert runs in members
    for left_out in ["tooling/gate_effect.py", "tooling/server_flags.py", "tests/unit/tooling/test_gate_effect.py",
                     "scripts/upstream-watch.py", ".real-gpu/site.tar.xz"]:
        assert left_out not in members
    assert [name for name in members if name.startswith(("tooling/", "tests/unit/tooling/", ".real-gpu/"))] == []
    # Only what runs (issue 19, item 3): the tests, the scenarios and their stand-ins, the benchmarks, the scripts
    # and the raw evidence stay in the checkout; the guides ship.
    assert [name for name in members if name.startswith(("tests/", "molecule/", "benchmarks/", "scripts/",
                                                         "docs/evidence/", "changelogs/fragments/",
                                                         "inventories/local/"))] == []
    assert [name for name in ("ansible.cfg", "requirements.txt", "pytest.ini", ".ansible-lint", ".gitignore")
            if name in members] == []
    for ships in ["docs/operations.md", "roles/smoke_test/meta/argument_specs.yml", "inventories/production/hosts.yml",
                  "meta/ee-requirements.txt", "changelogs/changelog.yaml"]:
        assert ships in members
    # Every module of the collection that a shipped file imports ships with it.
    missing = []
    for name, source in sources.items():
        for module in _imports(ROOT / name, source):
            if module.startswith("ansible_collections.sm120.sglang."):
                path = module[len("ansible_collections.sm120.sglang."):].replace(".", "/")
                if (ROOT / (path + ".py")).is_file() and path + ".py" not in members:
                    missing.append("%s imports %s" % (name, module))
    assert missing == []

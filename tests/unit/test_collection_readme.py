# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built collection's README is written for a collection user: shipped, and offering no command of the checkout
(scripts/, molecule/, tests/) that the tarball leaves out; the LICENSE galaxy.yml names is there."""

from __future__ import annotations

import fnmatch
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())


def _ignored(path):
    return any(path == pattern or path.startswith(pattern.rstrip("/") + "/") or fnmatch.fnmatch(path, pattern)
               for pattern in GALAXY.get("build_ignore") or [])


def test_the_galaxy_readme_is_shipped_and_offers_only_what_the_tarball_holds():
    readme = GALAXY["readme"]
    assert (ROOT / readme).is_file() and not _ignored(readme)
    text = (ROOT / readme).read_text()
    commands = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]
    assert commands and all(line.split()[0] in ("ansible-galaxy", "ansible-playbook") for line in commands), commands
    for left_out in ("scripts/", "molecule/", "tests/", ".venv"):
        assert left_out not in text, left_out
    assert "ansible-galaxy collection install" in text and "import_playbook: sm120.sglang.deploy" in text


def test_the_license_galaxy_yml_names_is_shipped():
    assert GALAXY["license"] == ["GPL-3.0-or-later"] and not _ignored("LICENSE")
    text = (ROOT / "LICENSE").read_text()
    assert "GNU GENERAL PUBLIC LICENSE" in text and "Version 3, 29 June 2007" in text

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""README.md opens with the two commands, and the release tables (docs/releases.md) are the release data's."""

from __future__ import annotations

import importlib.util
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("release_table", ROOT / "scripts" / "release-table.py")
release_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(release_table)
README = (ROOT / "README.md").read_text()
RELEASES = (ROOT / "docs" / "releases.md").read_text()


def test_the_release_tables_are_generated_from_the_data():
    assert release_table.FILES == ["docs/releases.md"]
    assert release_table.with_tables(RELEASES) == RELEASES, "run: python scripts/release-table.py --write"
    # The README links to them and carries no copy that could go stale.
    assert release_table.BEGIN not in README and "docs/releases.md" in README


def test_the_readme_opens_with_the_two_commands_and_ci_runs_the_first_first():
    first_block = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["bash scripts/deploy-local.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text()
    # Command 1 runs first, then the molecule stages; the static stages begin beside command 1 only once its setup
    # made the collection link (scripts/setup.sh makes it last), so command 1 still meets a fresh machine.
    assert ci.index("\nbash scripts/deploy-local.sh\n") < ci.index("SM120_TEST_STAGES=molecule bash scripts/test.sh")
    static = ci.index('SM120_TEST_STAGES="$1" bash scripts/test.sh')
    assert ci.index("until [[ -L .collections/ansible_collections/sm120/sglang ]]") < static
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert setup.rstrip().splitlines()[-2:][0].strip().startswith("ln -sfn ../../.. .collections/ansible_collections/sm120/sglang")
    # Between them, every stage of scripts/test.sh runs.
    test_sh = (ROOT / "scripts" / "test.sh").read_text()
    every = set(re.search(r'stages=\$\{SM120_TEST_STAGES:-"([^"]+)"\}', test_sh).group(1).split())
    static_stages = set(re.search(r'static_stages="([^"]+)"', ci).group(1).split())
    assert static_stages | {"molecule"} == every and "molecule" not in static_stages

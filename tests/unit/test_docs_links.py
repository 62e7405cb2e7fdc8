# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README and the guides in docs/ point only at what exists: every relative link resolves (to a file, a
folder, or a heading of a Markdown file), and every path of the checkout they name in code exists."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "roles").glob("*.md"))
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Paths of the checkout as the docs name them in code; a name with a placeholder or a glob is not a path.
CHECKOUT_PATH = re.compile(r"^(?:benchmarks|changelogs|data|docs|inventories|meta|molecule|playbooks|plugins|roles|"
                           r"scripts|tests|tooling)/[^\s<>*{}\[\]]*$")
# What the docs tell a reader to create: the copy of the example inventory.
YOURS = ("inventories/mycluster",)


def _name(page):
    return str(page.relative_to(ROOT))


def anchors(text):
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", FENCE.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else "%s-%d" % (slug, count))
    return found


def links(text):
    """The relative link targets of a page, outside code."""
    prose = SPAN.sub(lambda found: " " * len(found.group(0)), FENCE.sub("", text))
    return [target for target in LINK.findall(prose) if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def code_paths(text):
    """Every word in code (blocks and spans) that names a path of the checkout."""
    words = []
    for block in FENCE.findall(text):
        words += block.split()
    for _ticks, span in SPAN.findall(FENCE.sub("", text)):
        words += span.split()
    paths = []
    for word in words:
        word = word.strip("\"'`(").rstrip(".,;:)\"'")
        if CHECKOUT_PATH.match(word) and not word.startswith(YOURS):
            paths.append(word)
    return paths


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_resolves(page):
    text = page.read_text()
    broken = []
    for target in links(text):
        path, _hash, anchor = target.partition("#")
        found = (page.parent / path).resolve() if path else page
        if not found.exists():
            broken.append("%s: no such file or folder" % target)
        elif anchor and found.suffix == ".md" and anchor not in anchors(found.read_text()):
            broken.append("%s: %s has no heading with that anchor" % (target, found.relative_to(ROOT)))
    assert broken == [], "%s links to what does not exist" % _name(page)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_path_named_in_code_exists(page):
    missing = sorted({path for path in code_paths(page.read_text()) if not (ROOT / path).exists()})
    assert missing == [], "%s names paths of the checkout that do not exist" % _name(page)


def test_the_checks_find_what_is_broken():
    text = ("# Where is …\n\n## Entry point `main`\n\n## Entry point `main`\n\n"
            "[a](docs/x.md#b) [web](https://example.org/) [self](#where-is-) `[not](a-link.md)`\n\n"
            "```bash\nbash scripts/nothing-here.sh   # see data/sglang_releases.yml\ncp -r inventories/production "
            "inventories/mycluster\n```\n\nRun `python scripts/role-docs.py --write`, then read `reports/<run>/x.md`.\n")
    assert anchors(text) == {"where-is-", "entry-point-main", "entry-point-main-1"}
    assert links(text) == ["docs/x.md#b", "#where-is-"]
    assert code_paths(text) == ["scripts/nothing-here.sh", "data/sglang_releases.yml", "inventories/production",
                                "scripts/role-docs.py"]

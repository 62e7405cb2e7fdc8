# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Real SGLang wheels for tests: `pip download --no-deps` from PyPI into .cache/wheels, once each.

The tests themselves need no network once the wheels are there: run this file to fetch every release the data
describes (`bash scripts/setup.sh --tests` does, which scripts/test.sh runs first), and set SM120_TESTS_OFFLINE=1
to have a missing wheel fail the test that asks for it, naming the command, instead of downloading it.

    python tests/unit/sglang_wheels.py          # fetch what is missing; prints what it fetched
"""

from __future__ import annotations

import base64
import csv
import functools
import io
import os
import re
import subprocess
import sys
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CACHE = os.path.join(ROOT, ".cache", "wheels")


DATA = os.path.join(ROOT, "data", "sglang_releases.yml")


def _cached(version):
    os.makedirs(CACHE, exist_ok=True)
    return sorted(name for name in os.listdir(CACHE) if name.startswith("sglang-%s-" % version))


def _download(version):
    if os.environ.get("SM120_TESTS_OFFLINE") == "1":
        raise RuntimeError("the sglang %s wheel is not in %s and SM120_TESTS_OFFLINE=1 forbids fetching it: run "
                           "`python tests/unit/sglang_wheels.py` with the network first" % (version, CACHE))
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "-d", CACHE, "sglang==%s" % version], check=True)


@functools.lru_cache(maxsize=None)
def sglang_wheel(version):
    """The sglang wheel of that release (the one pip picks for this Python), opened."""
    if not _cached(version):
        _download(version)
    return zipfile.ZipFile(os.path.join(CACHE, _cached(version)[0]))


def needed_versions():
    """Every release data/sglang_releases.yml describes: the tests read each one's wheel."""
    import yaml
    with open(DATA) as handle:
        return sorted(str(version) for version in yaml.safe_load(handle)["releases"])


def fetch():
    fetched = [version for version in needed_versions() if not _cached(version)]
    for version in fetched:
        _download(version)
    print("sglang wheels in %s: %d, fetched now: %s" % (CACHE, len(needed_versions()), ", ".join(fetched) or "none"))


def _dist_info(archive, name):
    return archive.read(next(entry for entry in archive.namelist() if entry.endswith(".dist-info/" + name))).decode()


def record_sha256(archive):
    """path -> sha256 hex of every file the wheel's RECORD hashes."""
    hashes = {}
    for row in csv.reader(io.StringIO(_dist_info(archive, "RECORD"))):
        if len(row) >= 2 and row[1].startswith("sha256="):
            digest = row[1][len("sha256="):]
            hashes[row[0]] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return hashes


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def metadata_lines(archive, field):
    prefix = field + ": "
    return [line[len(prefix):] for line in _dist_info(archive, "METADATA").splitlines() if line.startswith(prefix)]


def wheel_pins(archive):
    """Unconditional exact pins of Requires-Dist: canonical name -> (version, sorted extras)."""
    pins = {}
    for line in metadata_lines(archive, "Requires-Dist"):
        found = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([^;\s]+)\s*$", line)
        if found:
            extras = sorted(extra.strip() for extra in (found.group(2) or "[]")[1:-1].split(",") if extra.strip())
            pins[canonical(found.group(1))] = (found.group(3), extras)
    return pins


if __name__ == "__main__":
    fetch()

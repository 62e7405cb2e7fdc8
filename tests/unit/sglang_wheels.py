# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Real SGLang wheels for tests: `pip download --no-deps` from PyPI into .cache/wheels, once each."""

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


@functools.lru_cache(maxsize=None)
def sglang_wheel(version):
    """The sglang wheel of that release (the one pip picks for this Python), opened."""
    os.makedirs(CACHE, exist_ok=True)
    found = [name for name in os.listdir(CACHE) if name.startswith("sglang-%s-" % version)]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "-d", CACHE, "sglang==%s" % version], check=True)
        found = [name for name in os.listdir(CACHE) if name.startswith("sglang-%s-" % version)]
    return zipfile.ZipFile(os.path.join(CACHE, sorted(found)[0]))


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

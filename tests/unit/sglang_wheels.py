# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Real SGLang wheels for tests: `pip download --no-deps` from PyPI into .cache/wheels, once."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CACHE = os.path.join(ROOT, ".cache", "wheels")


def sglang_wheel(version):
    """The sglang wheel of that release, opened."""
    os.makedirs(CACHE, exist_ok=True)
    found = [name for name in os.listdir(CACHE) if name.startswith("sglang-%s-" % version)]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "-d", CACHE, "sglang==%s" % version], check=True)
        found = [name for name in os.listdir(CACHE) if name.startswith("sglang-%s-" % version)]
    return zipfile.ZipFile(os.path.join(CACHE, found[0]))

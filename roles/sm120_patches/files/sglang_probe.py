# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report the SGLang installed for this interpreter, as JSON, without importing it.

Run with the interpreter that serves SGLang. Arguments are paths relative to the
package root (sglang/srt/...); for each, the report gives the absolute path and
the sha256 the wheel's RECORD holds for it: the shipped bytes. Importing sglang
would pull in torch and CUDA, so only the distribution metadata is read.
"""

import base64
import json
import sys

try:
    from importlib import metadata
except ImportError:  # Python < 3.8 has no importlib.metadata
    print(json.dumps({"installed": False, "reason": "Python %s is too old for SGLang" % sys.version.split()[0]}))
    sys.exit(0)


def record_sha256(dist):
    hashes = {}
    for entry in dist.files or []:
        if entry.hash is not None and entry.hash.mode == "sha256":
            digest = entry.hash.value
            hashes[str(entry)] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return hashes


def main(paths):
    try:
        dist = metadata.distribution("sglang")
    except metadata.PackageNotFoundError:
        return {"installed": False, "python": sys.executable,
                "reason": "sglang is not installed for %s" % sys.executable}
    hashes = record_sha256(dist)
    location = str(dist.locate_file(""))
    return {
        "installed": True,
        "python": sys.executable,
        "version": dist.version,
        "location": location,
        "files": {path: {"path": str(dist.locate_file(path)), "record_sha256": hashes.get(path)} for path in paths},
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

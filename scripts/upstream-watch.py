# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which SGLang releases on the package index does data/sglang_releases.yml not describe yet?

    python scripts/upstream-watch.py [--wheels DIR] [--versions 0.5.24,...]

Lists the releases pip's index has from the oldest one the data describes on,
and for each one the data does not describe: downloads its wheel
(`pip download --no-deps`), reads its install set from the wheel (Requires-Dist,
Requires-Python, GLM-5, build date), tries the gate entries that cover it (every
edit anchors and compiles, every decision flips on SM120 and stays as shipped on
SM90 and SM100) and prints a draft entry for the data, or the anchors and
decisions that broke.

Exit status: 1 when the data has a hole (a release older than the newest it
describes is missing: a release was skipped); 0 otherwise, with a warning for
each brand-new release. --versions takes the list instead of asking the index
(for a mirror without `pip index`, or to try a release by hand).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases  # noqa: E402
from ansible_collections.sm120.sglang.tooling import gate_check  # noqa: E402

try:
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:  # pip vendors packaging; ansible-core requires it
    from pip._vendor.packaging.utils import canonicalize_name
    from pip._vendor.packaging.version import InvalidVersion, Version

DECIDING = re.compile(r"^(flashinfer|sgl-kernel|sglang-kernel|torch$)")


def index_versions():
    """Every sglang release pip's configured index lists, newest first."""
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "sglang", "--disable-pip-version-check"],
                          capture_output=True, text=True, check=False)
    found = re.search(r"Available versions: (.*)", done.stdout)
    if done.returncode != 0 or not found:
        raise SystemExit("upstream-watch: cannot list SGLang's releases (pip index versions sglang, rc %d): %s"
                         % (done.returncode, (done.stderr or done.stdout).strip()[-400:]))
    versions = []
    for text in found.group(1).split(","):
        try:
            versions.append(Version(text.strip()))
        except InvalidVersion:
            continue
    return [str(version) for version in sorted(versions)]


def wheel(version, directory):
    """The release's wheel, downloaded once into directory."""
    os.makedirs(directory, exist_ok=True)
    prefix = "sglang-%s-" % version
    found = [name for name in os.listdir(directory) if name.startswith(prefix)]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--disable-pip-version-check", "-d", directory, "sglang==%s" % version], check=True)
        found = [name for name in os.listdir(directory) if name.startswith(prefix)]
    return zipfile.ZipFile(os.path.join(directory, sorted(found)[0]))


def _reader(archive):
    names = set(archive.namelist())
    return lambda path: archive.read(path).decode() if path in names else None


def draft(version, archive):
    """The release's entry for data/sglang_releases.yml, read from its wheel (torch_cuda left to a person)."""
    metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    pins = []
    for line in metadata.splitlines():
        found = re.match(r"Requires-Dist: ([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([^;\s]+)\s*$", line)
        if found and DECIDING.match(canonicalize_name(found.group(1))):
            pins.append("%s%s==%s" % (canonicalize_name(found.group(1)), found.group(2) or "", found.group(3)))
    python = re.search(r"^Requires-Python: (.*)$", metadata, re.M)
    models = archive.read("sglang/srt/models/glm4_moe.py").decode() if "sglang/srt/models/glm4_moe.py" in archive.namelist() else ""
    built = datetime.date(*max(info.date_time for info in archive.infolist())[:3]).isoformat()
    quoted = ['"%s"' % pin if "[" in pin else pin for pin in ["sglang==%s" % version] + pins]
    return "\n".join([
        '  "%s":' % version,
        '    date: "%s"' % built,
        "    glm5: %s" % ("true" if "class GlmMoeDsaForCausalLM(" in models else "false"),
        '    requires_python: "%s"' % (python.group(1).strip() if python else ""),
        '    torch_cuda: "?"  # the CUDA release of torch %s on PyPI (torch/version.py)'
        % next((pin.split("==")[1] for pin in pins if pin.startswith("torch==")), "?"),
        "    packages: [%s]" % ", ".join(quoted),
    ])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", default=os.path.join(ROOT, ".cache", "wheels"), help="where wheels are kept")
    parser.add_argument("--versions", help="comma-separated releases to consider instead of the index's")
    parser.add_argument("--data", default=sglang_releases.DATA_PATH, help="the release data to compare with")
    args = parser.parse_args(argv)

    data = sglang_releases.load(args.data)
    described = sglang_releases.versions(data)
    oldest, newest = Version(described[0]), Version(described[-1])
    listed = args.versions.split(",") if args.versions else index_versions()
    missing = [version for version in listed if Version(version) >= oldest and version not in described]
    print("upstream-watch: the index lists %d SGLang releases from %s; the data describes %d (%s to %s); not described: %s"
          % (len([v for v in listed if Version(v) >= oldest]), oldest, len(described), oldest, newest,
             ", ".join(missing) or "none"))
    holes = [version for version in missing if Version(version) < newest]
    for version in missing:
        try:
            archive = wheel(version, args.wheels)
        except subprocess.CalledProcessError:
            print("\n== SGLang %s: its wheel cannot be downloaded (pip download sglang==%s failed)" % (version, version))
            continue
        kind = "a hole: older than %s, which the data describes" % newest if version in holes else "new"
        print("\n== SGLang %s (%s)" % (version, kind))
        for gate, found in gate_check.check_release(data, version, _reader(archive)).items():
            verdict = ("BROKEN" if found["problems"] else "nothing to check" if found["kind"] == "unsupported"
                       else "native, as the entry says" if found["kind"] == "upstream" else "anchors and takes effect")
            print("  %s: entry %s (%s) %s" % (gate, found["versions"], found["kind"], verdict))
            for problem in found["problems"]:
                print("    - %s" % problem)
        print("  draft for data/sglang_releases.yml, under releases:\n%s" % draft(version, archive))
    for version in missing:
        if version not in holes:
            print("upstream-watch: WARNING SGLang %s is new on the index and not described yet; add the draft above "
                  "once the gates are checked (a release not described is refused by sglang_install)." % version)
    if holes:
        print("upstream-watch: ERROR the data skips %s, older than the newest release it describes (%s): describe "
              "them in data/sglang_releases.yml." % (", ".join(holes), newest))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

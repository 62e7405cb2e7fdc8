# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare the packages installed for this interpreter with a tested set; print JSON.

Run with the venv's interpreter and one argument, a JSON object:
  wanted      name -> exact version: the packages the run must see installed
  report      names whose installed version is reported (the whole set)
  torch_cuda  the CUDA release torch must be built for, or null
  git         {"url": ..., "ref": ...} when SGLang must come from that git ref, or null

Only distribution metadata is read: importing torch or sglang would pull in
CUDA and take seconds. The output says what is installed and, in "todo", what
differs from the set and why; pip runs only when "todo" is not empty.
"""

import json
import os
import re
import sys
import sysconfig

try:
    from importlib import metadata
except ImportError:  # Python < 3.8 has no importlib.metadata
    metadata = None

_TORCH_CUDA = re.compile(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)


def public_version(version):
    """The version without its local part: 2.9.1+cu128 -> 2.9.1."""
    return version.split("+", 1)[0]


def torch_cuda(dist):
    """The CUDA release torch was built for, from torch/version.py (None: a CPU build or no file)."""
    try:
        with open(str(dist.locate_file("torch/version.py"))) as handle:
            found = _TORCH_CUDA.search(handle.read())
    except OSError:
        return None
    return found.group(1) if found else None


def direct_source(dist):
    """Where pip took a distribution from when it was a direct URL (PEP 610), else None."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    data = json.loads(text)
    vcs = data.get("vcs_info") or {}
    return {
        "url": data.get("url"),
        "ref": vcs.get("requested_revision"),
        "commit": vcs.get("commit_id"),
        "subdirectory": data.get("subdirectory"),
    }


def same_git_source(source, git):
    if not source:
        return False
    url = (source.get("url") or "").replace("git+", "", 1)
    return url == git["url"] and source.get("ref") == git["ref"] and source.get("subdirectory") == "python"


def plan(wanted, installed, installed_torch_cuda=None, sglang_source=None, cuda=None, git=None):
    """What differs from the set: a list of {name, installed, wanted, reason, replace}, in the set's order.

    replace is true when the installed version number is right but the build is not
    (another CUDA build of torch, SGLang from another source): pip keeps such a package
    because its version satisfies the pin, so it has to be uninstalled first.
    """
    todo = []
    for name, version in wanted.items():
        have = installed.get(name)
        replace = False
        if have is None:
            reason = "not installed"
        elif public_version(have) != version:
            reason = "%s installed" % have
        elif name == "torch" and cuda and installed_torch_cuda != cuda:
            reason = "a %s build installed, the set needs CUDA %s" % (
                "CUDA %s" % installed_torch_cuda if installed_torch_cuda else "CPU-only", cuda)
            replace = True
        elif name == "sglang" and git and not same_git_source(sglang_source, git):
            reason = "not from %s@%s" % (git["url"], git["ref"])
            replace = True
        else:
            continue
        todo.append({"name": name, "installed": have, "wanted": version, "reason": reason, "replace": replace})
    return todo


def _distribution(name):
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def probe(request):
    names = list(request.get("report") or []) + [n for n in request["wanted"] if n not in (request.get("report") or [])]
    dists = {name: _distribution(name) for name in names}
    installed = {name: (dist.version if dist else None) for name, dist in dists.items()}
    sglang = dists.get("sglang")
    torch = dists.get("torch")
    cuda_built = torch_cuda(torch) if torch else None
    source = direct_source(sglang) if sglang else None
    return {
        "python": sys.executable,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        # The directory the sglang package is imported from: what sm120_patches
        # records as package_dir. Before SGLang is installed, the venv's site-packages.
        "location": os.path.normpath(str(sglang.locate_file(""))) if sglang else sysconfig.get_paths()["purelib"],
        "versions": installed,
        "torch_cuda": cuda_built,
        "sglang_source": source,
        "todo": plan(request["wanted"], installed, cuda_built, source, request.get("torch_cuda"), request.get("git")),
    }


def main(argv):
    if metadata is None:
        sys.stderr.write("Python %s is too old for SGLang (it needs 3.10 or later)\n" % sys.version.split()[0])
        return 2
    print(json.dumps(probe(json.loads(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

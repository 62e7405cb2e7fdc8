# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_install role must do to a venv: pure decisions from the install set and the venv's facts.

The install set comes from the release data (sglang_releases.install_set); the
facts from the sglang_facts module. pip runs only when ``todo`` is not empty.
"""

from __future__ import annotations

try:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version
except ImportError:  # ansible-core requires packaging
    SpecifierSet = None


def _public(version):
    return version.split("+", 1)[0] if version else version


def wanted(install_set, dependencies=True):
    """name -> version the venv must hold: the whole set, or SGLang alone (--no-deps)."""
    if dependencies:
        return dict(install_set["versions"])
    return {"sglang": install_set["versions"]["sglang"]}


def _same_git_source(source, git):
    if not source:
        return False
    url = (source.get("url") or "").replace("git+", "", 1)
    return url == git["url"] and source.get("ref") == git["ref"] and source.get("subdirectory") == "python"


def todo(install_set, facts, dependencies=True, git=None):
    """What differs from the set: [{name, installed, wanted, reason, replace}] in the set's order.

    ``replace`` is true when the version number is right but the build is not
    (another CUDA build of torch, SGLang from another source): pip keeps such a
    package because its version satisfies the pin, so it is uninstalled first.
    """
    installed = (facts or {}).get("packages") or {}
    cuda = install_set["torch_cuda"] if dependencies else None
    result = []
    for name, version in wanted(install_set, dependencies).items():
        have = installed.get(name)
        replace = False
        if not (facts or {}).get("python_version"):
            reason = "no venv yet"
        elif have is None:
            reason = "not installed"
        elif _public(have) != version:
            reason = "%s installed" % have
        elif name == "torch" and cuda and facts.get("torch_cuda") != cuda:
            reason = "a %s build installed, the set needs CUDA %s" % (
                "CUDA %s" % facts["torch_cuda"] if facts.get("torch_cuda") else "CPU-only", cuda)
            replace = True
        elif name == "sglang" and git and not _same_git_source(facts.get("sglang_source"), git):
            reason = "not from %s@%s" % (git["url"], git["ref"])
            replace = True
        else:
            continue
        result.append({"name": name, "installed": have, "wanted": version, "reason": reason, "replace": replace})
    return result


def requirements(install_set, dependencies=True, git=None):
    """pip's requirement strings: exact pins with their extras; SGLang as a git reference for the git source."""
    names = wanted(install_set, dependencies)
    pins = [package["requirement"] for package in install_set["packages"] if package["name"] in names]
    if not git:
        return pins
    return ["sglang @ git+%s@%s#subdirectory=python" % (git["url"], git["ref"])] + [
        pin for pin in pins if not pin.startswith("sglang==")]


def pip_install_argv(python, install_set, dependencies=True, source="index", wheel_dir="", index_url="",
                     extra_index_url="", extra_args=None, git=None):
    """The argv of the one pip run that installs the set."""
    argv = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    if not dependencies:
        argv.append("--no-deps")
    if source == "offline":
        argv += ["--no-index", "--find-links", wheel_dir]
    else:
        if index_url:
            argv += ["--index-url", index_url]
        if extra_index_url:
            argv += ["--extra-index-url", extra_index_url]
    return argv + list(extra_args or []) + requirements(install_set, dependencies, git if source == "git" else None)


def python_problem(install_set, python, python_version):
    """A message when the interpreter is too old or too new for the release's Requires-Python, else None."""
    try:
        fits = SpecifierSet(install_set["requires_python"]).contains(Version(str(python_version)))
    except (InvalidVersion, TypeError):
        fits = False
    if fits:
        return None
    return ("SGLang %s requires Python %s (its wheel's Requires-Python), and %s is %s. Set sglang_install_base_python "
            "to an interpreter that fits (for example python3.12), or pick another release (sglang_install_version)."
            % (install_set["version"], install_set["requires_python"], python, python_version or "not runnable"))

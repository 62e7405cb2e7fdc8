# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_install role renders and decides, without Ansible's executor.

The pip command line, its environment and the probe request are variables in
vars/main.yml; they are resolved here in Ansible's precedence (defaults <
inventory < role vars < distribution vars) with jinja2 and Ansible's own
filters, for each source and distribution. The probe (files/) decides whether
pip runs at all: its plan() is called directly, and the script is run against a
fake site directory with real dist-info metadata.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.sm120.sglang.tests.unit.role_vars import RoleVars as SharedRoleVars
from ansible_collections.sm120.sglang.tests.unit.role_vars import load_yaml


ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "sglang_install"
PROBE = ROLE / "files" / "sglang_install_probe.py"

_spec = importlib.util.spec_from_file_location("sglang_install_probe", PROBE)
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


_load = load_yaml


def _facts(distribution, version, os_family):
    return {"distribution": distribution, "distribution_major_version": version.split(".")[0],
            "distribution_version": version, "os_family": os_family}


HOSTS = {
    "debian12": _facts("Debian", "12.8", "Debian"),
    "debian13": _facts("Debian", "13.1", "Debian"),
    "ubuntu2204": _facts("Ubuntu", "22.04", "Debian"),
    "ubuntu2404": _facts("Ubuntu", "24.04", "Debian"),
    "rhel9": _facts("RedHat", "9.4", "RedHat"),
    "rocky9": _facts("Rocky", "9.5", "RedHat"),
}


class RoleVars(SharedRoleVars):
    """The sglang_install role's variables for one host (Debian 12 unless told)."""

    def __init__(self, facts=None, inventory=None):
        super().__init__(ROLE, facts or HOSTS["debian12"], "__sglang_install_vars_files",
                         role_vars=("main.yml", "matrix.yml"), inventory=inventory)


PIP = ["/opt/sglang/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
SET_059 = ["sglang==0.5.9", "flashinfer-python==0.6.3", "flashinfer-cubin==0.6.3", "sgl-kernel==0.3.21", "torch==2.9.1"]


# ---- inputs: defaults and argument specs -----------------------------------------------------------------------

def test_every_default_has_an_argument_spec_with_the_same_default_and_back():
    defaults = _load(ROLE / "defaults" / "main.yml")
    options = _load(ROLE / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    for name, spec in options.items():
        assert name.startswith("sglang_install_")
        assert spec["default"] == defaults[name], name
        assert spec.get("description"), name


def test_internal_variables_carry_the_double_underscore_prefix():
    for path in (ROLE / "vars").glob("*.yml"):
        assert all(name.startswith("__sglang_install_") for name in _load(path)), path.name


# ---- distributions ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("host, vars_file, base, packages", [
    ("debian12", "Debian.yml", "python3", ["python3", "python3-venv"]),
    ("debian13", "Debian.yml", "python3", ["python3", "python3-venv"]),
    ("ubuntu2204", "Debian.yml", "python3", ["python3", "python3-venv"]),
    ("ubuntu2404", "Debian.yml", "python3", ["python3", "python3-venv"]),
    # EL 9's python3 is 3.9, below SGLang's Requires-Python >=3.10.
    ("rhel9", "RedHat.yml", "python3.12", ["python3.12"]),
    ("rocky9", "RedHat.yml", "python3.12", ["python3.12"]),
])
def test_each_distribution_makes_the_venv_from_a_python_sglang_accepts(host, vars_file, base, packages):
    role = RoleVars(HOSTS[host])
    assert role.vars_file.name == vars_file
    assert role["__sglang_install_base_python"] == base
    assert role["__sglang_install_os_packages"] == packages


def test_a_base_python_of_its_own_wins():
    assert RoleVars(HOSTS["rhel9"], {"sglang_install_base_python": "/usr/local/bin/python3.11"})[
        "__sglang_install_base_python"] == "/usr/local/bin/python3.11"


# ---- the pip command -------------------------------------------------------------------------------------------

def test_the_default_installs_the_glm5_set_from_the_index_with_exact_pins():
    role = RoleVars()
    assert role["__sglang_install_pip_argv"] == PIP + SET_059
    assert role["__sglang_install_pip_environment"] == {}
    assert role["__sglang_install_python"] == "/opt/sglang/bin/python"


def test_indexes_and_extra_arguments_come_before_the_requirements():
    role = RoleVars(inventory={
        "sglang_install_index_url": "https://pypi.example.internal/simple",
        "sglang_install_extra_index_url": "https://download.pytorch.org/whl/cu128",
        "sglang_install_pip_extra_args": ["--no-cache-dir"],
        "sglang_install_venv": "/srv/sglang",
    })
    assert role["__sglang_install_pip_argv"] == [
        "/srv/sglang/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
        "--index-url", "https://pypi.example.internal/simple",
        "--extra-index-url", "https://download.pytorch.org/whl/cu128",
        "--no-cache-dir"] + SET_059


def test_offline_uses_only_the_wheel_directory():
    role = RoleVars(inventory={"sglang_install_source": "offline", "sglang_install_wheel_dir": "/srv/wheels",
                               "sglang_install_index_url": "https://ignored.example/simple"})
    assert role["__sglang_install_pip_argv"] == PIP + ["--no-index", "--find-links", "/srv/wheels"] + SET_059


def test_without_dependencies_only_sglang_is_installed_and_checked():
    role = RoleVars(inventory={"sglang_install_dependencies": False, "sglang_install_version": "0.5.8"})
    assert role["__sglang_install_pip_argv"] == PIP + ["--no-deps", "sglang==0.5.8"]
    request = role["__sglang_install_probe_request"]
    assert request["wanted"] == {"sglang": "0.5.8"}
    assert request["report"] == ["sglang", "flashinfer-python", "flashinfer-cubin", "sgl-kernel", "torch"]
    assert request["torch_cuda"] is None


def test_git_builds_sglang_from_the_release_tag_and_pins_the_rest():
    role = RoleVars(inventory={"sglang_install_source": "git"})
    assert role["__sglang_install_pip_argv"] == PIP + [
        "sglang @ git+https://github.com/sgl-project/sglang.git@v0.5.9#subdirectory=python"] + SET_059[1:]
    assert role["__sglang_install_probe_request"]["git"] == {
        "url": "https://github.com/sgl-project/sglang.git", "ref": "v0.5.9"}


def test_git_takes_a_ref_and_a_mirror_of_its_own():
    role = RoleVars(inventory={"sglang_install_source": "git", "sglang_install_git_ref": "0123abc",
                               "sglang_install_git_url": "https://git.example.internal/sglang.git",
                               "sglang_install_version": "0.5.8"})
    assert role["__sglang_install_requirements"][0] == \
        "sglang @ git+https://git.example.internal/sglang.git@0123abc#subdirectory=python"
    assert role["__sglang_install_requirements"][1:] == [
        "flashinfer-python==0.6.1", "flashinfer-cubin==0.6.1", "sgl-kernel==0.3.21", "torch==2.9.1"]


def test_the_ca_bundle_reaches_pip_and_for_git_also_git():
    index = RoleVars(inventory={"sglang_install_ca_bundle": "/etc/ssl/certs/ca-certificates.crt"})
    assert index["__sglang_install_pip_environment"] == {"PIP_CERT": "/etc/sm120-sglang/pip-ca-bundle.pem"}
    git = RoleVars(inventory={"sglang_install_ca_bundle": "/etc/ssl/certs/ca-certificates.crt",
                              "sglang_install_source": "git"})
    assert git["__sglang_install_pip_environment"] == {
        "PIP_CERT": "/etc/sm120-sglang/pip-ca-bundle.pem", "GIT_SSL_CAINFO": "/etc/sm120-sglang/pip-ca-bundle.pem"}


def test_the_probe_request_survives_json_as_the_script_receives_it():
    request = RoleVars()["__sglang_install_probe_request"]
    assert json.loads(json.dumps(request)) == {
        "wanted": dict(zip(["sglang", "flashinfer-python", "flashinfer-cubin", "sgl-kernel", "torch"],
                           ["0.5.9", "0.6.3", "0.6.3", "0.3.21", "2.9.1"])),
        "report": ["sglang", "flashinfer-python", "flashinfer-cubin", "sgl-kernel", "torch"],
        "torch_cuda": "12.8",
        "git": None,
    }


# ---- the probe's decision --------------------------------------------------------------------------------------

WANTED = {"sglang": "0.5.9", "torch": "2.9.1"}
GIT = {"url": "https://github.com/sgl-project/sglang.git", "ref": "v0.5.9"}


def test_nothing_to_do_when_every_version_matches():
    assert probe.plan(WANTED, {"sglang": "0.5.9", "torch": "2.9.1+cu128"}, "12.8", None, "12.8") == []


def test_missing_and_other_versions_are_installed_in_the_sets_order():
    todo = probe.plan(WANTED, {"sglang": "0.5.8", "torch": None}, None, None, "12.8")
    assert [(item["name"], item["installed"], item["reason"], item["replace"]) for item in todo] == [
        ("sglang", "0.5.8", "0.5.8 installed", False),
        ("torch", None, "not installed", False),
    ]


@pytest.mark.parametrize("built, reason", [
    ("13.0", "a CUDA 13.0 build installed, the set needs CUDA 12.8"),
    (None, "a CPU-only build installed, the set needs CUDA 12.8"),
])
def test_torch_of_another_build_is_replaced(built, reason):
    todo = probe.plan(WANTED, {"sglang": "0.5.9", "torch": "2.9.1"}, built, None, "12.8")
    assert todo == [{"name": "torch", "installed": "2.9.1", "wanted": "2.9.1", "reason": reason, "replace": True}]


def test_torch_build_is_not_checked_without_a_cuda_in_the_request():
    assert probe.plan(WANTED, {"sglang": "0.5.9", "torch": "2.9.1"}, None, None, None) == []


def test_sglang_from_the_index_is_replaced_when_the_git_ref_is_wanted():
    todo = probe.plan({"sglang": "0.5.9"}, {"sglang": "0.5.9"}, None, None, None, GIT)
    assert todo[0]["replace"] and todo[0]["reason"] == "not from https://github.com/sgl-project/sglang.git@v0.5.9"


def test_sglang_from_the_wanted_git_ref_is_kept():
    source = {"url": "https://github.com/sgl-project/sglang.git", "ref": "v0.5.9", "commit": "abc",
              "subdirectory": "python"}
    assert probe.plan({"sglang": "0.5.9"}, {"sglang": "0.5.9"}, None, source, None, GIT) == []
    assert probe.plan({"sglang": "0.5.9"}, {"sglang": "0.5.9"}, None, dict(source, ref="main"), None, GIT)[0]["replace"]


# ---- the probe script against real metadata --------------------------------------------------------------------

def _dist(site, name, version, files=None, extra=None):
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    (info / "RECORD").write_text("")
    for path, content in (files or {}).items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(content)
    for path, content in (extra or {}).items():
        (info / path).write_text(content)


def _run_probe(site, request):
    env = dict(os.environ, PYTHONPATH=str(site), PYTHONNOUSERSITE="1")
    done = subprocess.run([sys.executable, str(PROBE), json.dumps(request)], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def test_the_script_reads_versions_cuda_build_and_git_source_from_metadata(tmp_path):
    _dist(tmp_path, "sglang", "0.5.9", extra={"direct_url.json": json.dumps({
        "url": "https://github.com/sgl-project/sglang.git", "subdirectory": "python",
        "vcs_info": {"vcs": "git", "requested_revision": "v0.5.9", "commit_id": "f" * 40}})})
    _dist(tmp_path, "torch", "2.9.1+cu128",
          files={"torch/version.py": "__version__ = '2.9.1+cu128'\ncuda: Optional[str] = '12.8'\n"})
    _dist(tmp_path, "flashinfer-python", "0.6.1")
    report = _run_probe(tmp_path, {
        "wanted": {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1"},
        "report": ["sglang", "flashinfer-python", "flashinfer-cubin", "torch"],
        "torch_cuda": "12.8", "git": GIT})
    assert report["versions"] == {"sglang": "0.5.9", "flashinfer-python": "0.6.1", "flashinfer-cubin": None,
                                  "torch": "2.9.1+cu128"}
    assert report["torch_cuda"] == "12.8"
    assert report["sglang_source"]["commit"] == "f" * 40
    assert report["location"] == str(tmp_path)
    assert [(item["name"], item["reason"]) for item in report["todo"]] == [("flashinfer-python", "0.6.1 installed")]


def test_the_script_reports_site_packages_before_sglang_is_there(tmp_path):
    report = _run_probe(tmp_path, {"wanted": {"sglang": "0.5.9"}, "report": ["sglang"], "torch_cuda": None,
                                   "git": None})
    assert report["versions"] == {"sglang": None}
    assert report["location"].endswith("site-packages")
    assert report["todo"][0]["reason"] == "not installed"

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_install role's decisions: what differs from the set, the pip command, the interpreter check."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import install_plan, sglang_releases

DATA = sglang_releases.load()
SET_059 = sglang_releases.install_set(DATA, "0.5.9")
SET_NEWEST = sglang_releases.install_set(DATA, "newest")
PIP = ["/opt/sglang/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]


def facts(packages, torch_cuda="12.8", source=None, python_version="3.11.2"):
    return {"python_version": python_version, "packages": packages, "torch_cuda": torch_cuda, "sglang_source": source}


def test_nothing_to_do_when_every_version_and_build_matches():
    assert install_plan.todo(SET_059, facts(dict(SET_059["versions"]))) == []


def test_a_missing_venv_needs_the_whole_set():
    assert [item["reason"] for item in install_plan.todo(SET_059, {"python_version": None})] == ["no venv yet"] * 5


def test_missing_and_other_versions_are_installed_in_the_set_s_order():
    todo = install_plan.todo(SET_059, facts({"sglang": "0.5.8", "torch": "2.9.1+cu128"}))
    assert [(item["name"], item["reason"]) for item in todo] == [
        ("sglang", "0.5.8 installed"), ("flashinfer-python", "not installed"), ("flashinfer-cubin", "not installed"),
        ("sgl-kernel", "not installed")]


@pytest.mark.parametrize("built,reason", [(None, "a CPU-only build installed, the set needs CUDA 12.8"),
                                          ("12.6", "a CUDA 12.6 build installed, the set needs CUDA 12.8")])
def test_torch_of_another_build_is_replaced(built, reason):
    todo = install_plan.todo(SET_059, facts(dict(SET_059["versions"]), torch_cuda=built))
    assert todo == [{"name": "torch", "installed": "2.9.1", "wanted": "2.9.1", "reason": reason, "replace": True}]


def test_without_dependencies_only_sglang_is_wanted_and_torch_s_build_is_not_checked():
    todo = install_plan.todo(SET_059, facts({"sglang": "0.5.9"}, torch_cuda=None), dependencies=False)
    assert todo == []
    assert install_plan.pip_install_argv(PIP[0], SET_059, dependencies=False) == PIP + ["--no-deps", "sglang==0.5.9"]


def test_sglang_from_the_index_is_replaced_when_a_git_ref_is_wanted_and_kept_when_it_is_there():
    git = {"url": "https://github.com/sgl-project/sglang.git", "ref": "v0.5.9"}
    todo = install_plan.todo(SET_059, facts(dict(SET_059["versions"])), git=git)
    assert todo[0]["reason"] == "not from https://github.com/sgl-project/sglang.git@v0.5.9" and todo[0]["replace"]
    source = {"url": "git+https://github.com/sgl-project/sglang.git", "ref": "v0.5.9", "subdirectory": "python"}
    assert install_plan.todo(SET_059, facts(dict(SET_059["versions"]), source=source), git=git) == []


def test_the_default_installs_the_newest_set_with_its_extras_from_the_index():
    assert install_plan.pip_install_argv(PIP[0], SET_NEWEST) == PIP + [
        "sglang==0.5.23", "flashinfer-python[cu13]==0.7.2", "sglang-kernel==0.4.10", "torch==2.14.1"]


def test_indexes_and_extra_arguments_come_before_the_requirements_and_offline_uses_only_the_wheels():
    argv = install_plan.pip_install_argv(PIP[0], SET_059, index_url="https://mirror/simple",
                                         extra_index_url="https://download.pytorch.org/whl/cu128", extra_args=["--no-cache-dir"])
    assert argv[len(PIP):len(PIP) + 5] == ["--index-url", "https://mirror/simple", "--extra-index-url",
                                           "https://download.pytorch.org/whl/cu128", "--no-cache-dir"]
    offline = install_plan.pip_install_argv(PIP[0], SET_059, source="offline", wheel_dir="/var/cache/w",
                                            index_url="https://ignored")
    assert offline[len(PIP):len(PIP) + 3] == ["--no-index", "--find-links", "/var/cache/w"]
    assert "https://ignored" not in offline


def test_git_builds_sglang_from_its_ref_and_pins_the_rest():
    git = {"url": "https://mirror/sglang.git", "ref": "v0.5.9"}
    argv = install_plan.pip_install_argv(PIP[0], SET_059, source="git", git=git)
    assert argv[len(PIP):] == ["sglang @ git+https://mirror/sglang.git@v0.5.9#subdirectory=python",
                               "flashinfer-python==0.6.3", "flashinfer-cubin==0.6.3", "sgl-kernel==0.3.21", "torch==2.9.1"]


@pytest.mark.parametrize("version,problem", [("3.11.2", False), ("3.12.3", False), ("3.10.12", True), (None, True)])
def test_an_interpreter_outside_requires_python_is_refused_naming_both(version, problem):
    message = install_plan.python_problem(SET_NEWEST, "python3", version)
    assert bool(message) is problem
    if problem:
        assert message.startswith("SGLang 0.5.23 requires Python >=3.11 (its wheel's Requires-Python), and python3 is")
    assert install_plan.python_problem(SET_059, "python3", "3.10.12") is None

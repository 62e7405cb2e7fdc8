# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in the .yml files of the same names beside this file.

from ansible_collections.sm120.sglang.plugins.plugin_utils import install_plan
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name


def _todo(install_set, facts, dependencies=True, git=None):
    return install_plan.todo(install_set, facts, dependencies, git)


def _pip_argv(install_set, python, dependencies=True, source="index", wheel_dir="", index_url="", extra_index_url="",
              extra_args=None, git=None):
    return install_plan.pip_install_argv(python, install_set, dependencies, source, wheel_dir, index_url,
                                         extra_index_url, extra_args, git)


def _python_problem(install_set, python, python_version):
    return install_plan.python_problem(install_set, python, python_version) or ""


class FilterModule:
    def filters(self):
        return {
            "sglang_install_todo": _todo,
            "sglang_install_pip_argv": by_name(_pip_argv, "sglang_install_pip_argv"),
            "sglang_install_python_problem": _python_problem,
        }

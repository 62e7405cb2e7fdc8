# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the run_module fixture raises, and a script loaded as a module; import from here, not from conftest."""

from __future__ import annotations

import importlib.util
import sys


class ModuleExit(Exception):
    """exit_json was called; .result holds what the module returned."""

    def __init__(self, result):
        super().__init__(result)
        self.result = result


class ModuleFail(Exception):
    """fail_json was called; .result holds msg and the other keys."""

    def __init__(self, result):
        super().__init__(result.get("msg"))
        self.result = result


def load_script(path, name, beside=True):
    """The script at ``path`` (a pathlib.Path) loaded as module ``name``, its own folder on sys.path while it loads
    where ``beside`` (the benchmarks and the harness import their siblings)."""
    folder = str(path.parent)
    if beside:
        sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        if beside:
            sys.path.remove(folder)

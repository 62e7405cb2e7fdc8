# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The digest of a phase's inputs on the controller: its role's variables and the code that acts on them. Pure.

A phase may be skipped where its inputs and the host's side of it are as its last run left them
(``module_utils/phase_stamp.py``). Its inputs are every option of the role's entry point (from its
``meta/argument_specs.yml``, so that a variable documented there cannot be left out), with the values this host
has, and the bytes of the role's files and of the collection's plugins and data: a changed variable, an upgraded
collection or a new release's data, and the phase runs again.
"""

from __future__ import annotations

import hashlib
import json


class PhaseInputsError(ValueError):
    """What the digest cannot be taken of; the message names it and the fix."""


def option_names(argument_specs, entry_point="main", role="the role"):
    """The options of ``entry_point`` in a role's parsed ``meta/argument_specs.yml``, sorted, but its skip switch."""
    specs = (argument_specs or {}).get("argument_specs") if isinstance(argument_specs, dict) else None
    if not isinstance(specs, dict) or not isinstance(specs.get(entry_point), dict):
        raise PhaseInputsError("%s has no entry point %r in meta/argument_specs.yml; a phase's inputs are the "
                               "options documented there" % (role, entry_point))
    # The switch that lets the phase be skipped (ROLE_skip_unchanged) is no input of what the phase does: turning it off
    # for one run must not make that run's stamp another.
    return sorted(name for name in (specs[entry_point].get("options") or {}) if not name.endswith("_skip_unchanged"))


def _plain(value):
    """A value as JSON can hold it, the same for the same value whatever its Python type (tuple, set, tagged str)."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(item) for item in value), key=repr)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def inputs_digest(code, variables):
    """sha256 over the code (relative path -> bytes) and the variables (name -> value), in a fixed order."""
    if not isinstance(code, dict) or not isinstance(variables, dict):
        raise PhaseInputsError("the code and the variables must be mappings")
    digest = hashlib.sha256()
    for path in sorted(code):
        body = code[path]
        digest.update(b"file\0%s\0%d\0" % (str(path).encode("utf-8"), len(body)))
        digest.update(body)
    digest.update(b"variables\0")
    digest.update(json.dumps(_plain(variables), sort_keys=True, separators=(",", ":")).encode("utf-8"))
    return digest.hexdigest()

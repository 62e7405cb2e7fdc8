# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters a reader can call (issue 39, item 4): none takes more than four arguments, counting the value piped into
it; one that needs more takes one mapping of named keys, as its doc sidecar says."""

from __future__ import annotations

import importlib
import inspect
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[4]
FILTERS = ROOT / "plugins" / "filter"


def _filters():
    for path in sorted(FILTERS.glob("*.py")):
        module = importlib.import_module("ansible_collections.sm120.sglang.plugins.filter." + path.stem)
        if hasattr(module, "FilterModule"):
            yield from sorted(module.FilterModule().filters().items())


def _arguments(function):
    """The arguments a filter is called with, its input first: through the wrappers that translate errors
    (functools.wraps) to the function they call, or ["value", "arguments"] where that is by_name's, which takes one
    mapping."""
    while True:
        if getattr(function, "takes_mapping", False):
            return ["value", "arguments"]
        if not hasattr(function, "__wrapped__"):
            break
        function = function.__wrapped__
    parameters = inspect.signature(function).parameters.values()
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]


FOUND = list(_filters())


def test_the_filters_are_found():
    assert len(FOUND) > 80


@pytest.mark.parametrize("name,function", FOUND, ids=[entry[0] for entry in FOUND])
def test_a_filter_takes_at_most_four_arguments_with_its_input(name, function):
    arguments = _arguments(function)
    assert len(arguments) <= 4, "%s takes %d arguments (%s): take one mapping of named keys instead" % (
        name, len(arguments), ", ".join(arguments))
    # Its documentation: a sidecar NAME.yml, or the plugin file NAME.py of a filter alone in it, as ansible-doc reads them.
    sidecar, alone = FILTERS / (name + ".yml"), FILTERS / (name + ".py")
    if sidecar.exists():
        documented = yaml.safe_load(sidecar.read_text())["DOCUMENTATION"]
    else:
        assert alone.exists(), "%s has no documentation (plugins/filter/%s.yml)" % (name, name)
        text = alone.read_text()
        documented = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    assert documented["name"] == name
    # Documented with its input, and, past it, the arguments it takes: the mapping's name where it takes one.
    assert "_input" in documented["options"], name
    assert len(documented["options"]) <= 4, (name, list(documented["options"]))

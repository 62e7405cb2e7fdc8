# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One wrapper for the filter plugins: a pure function's own errors become the AnsibleFilterError that fails the
task with their message (the message names the problem and the fix)."""

from __future__ import annotations

import functools
import inspect

from ansible.errors import AnsibleFilterError


def refusing(*errors):
    """A decorator: the function, any of ``errors`` it raises re-raised as AnsibleFilterError with its message."""
    def wrap(function):
        @functools.wraps(function)
        def run_filter(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except errors as exc:
                raise AnsibleFilterError(str(exc)) from None
        return run_filter
    return wrap


def named_arguments(name, given, required, optional=()):
    """The keyword arguments a filter that takes one mapping passes on: ``given`` must be a mapping holding every
    name of ``required`` and no name outside ``required`` and ``optional``; otherwise AnsibleFilterError naming
    the filter, the names missing or unknown, and those it takes."""
    if not isinstance(given, dict):
        raise AnsibleFilterError("%s takes one mapping of %s; got %r"
                                 % (name, ", ".join(required + tuple(optional)), type(given).__name__))
    missing = [key for key in required if key not in given]
    unknown = sorted(key for key in given if key not in required and key not in optional)
    if missing or unknown:
        # A filter whose every name is optional takes "any of" them (not "it takes  (and ... where wanted)").
        takes = ("%s (and %s where wanted)" % (", ".join(required), ", ".join(optional) or "nothing more") if required
                 else "any of %s, each where wanted" % ", ".join(optional))
        raise AnsibleFilterError("%s: %s; it takes %s" % (
            name, "; ".join(part for part in ("missing " + ", ".join(missing) if missing else "",
                                              "unknown " + ", ".join(unknown) if unknown else "") if part),
            takes))
    return dict(given)


def by_name(function, name=None):
    """``function`` as a filter of two arguments, its input and one mapping of the rest by name: a filter of more
    than four arguments is read by name at its call (``x | f({'a': 1, 'b': 2})``) rather than by place. The names
    without a default in ``function``'s signature are required, the others optional. The mapping left out counts as
    an empty one: ``x | f`` serves where every name is optional, else fails naming those missing. More than one
    argument after the input, a call by place, fails naming the filter and how to call it by name."""
    parameters = list(inspect.signature(function).parameters.values())[1:]
    required = tuple(p.name for p in parameters if p.default is inspect.Parameter.empty)
    optional = tuple(p.name for p in parameters if p.default is not inspect.Parameter.empty)
    label = name or function.__name__

    @functools.wraps(function)
    def run_filter(value, *arguments):
        if len(arguments) > 1:
            raise AnsibleFilterError("%s takes its input and one mapping of %s by name (x | %s({'%s': ...})); got %d "
                                     "arguments after its input" % (label, ", ".join(required + optional), label,
                                                                    (required + optional)[0], len(arguments)))
        return function(value, **named_arguments(label, arguments[0] if arguments else {}, required, optional))
    # What tests/unit/plugins/filter/test_filter_arguments.py reads: this filter takes its input and one mapping.
    run_filter.takes_mapping = True
    return run_filter

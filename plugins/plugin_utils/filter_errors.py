# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One wrapper for the filter plugins: a pure function's own errors become the AnsibleFilterError that fails the
task with their message (the message names the problem and the fix)."""

from __future__ import annotations

import functools

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

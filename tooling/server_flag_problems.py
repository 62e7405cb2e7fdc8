# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Would one SGLang release's parser accept these flags? Checked against what server_flags.py read.

``flag_problems(flags, arguments)``: ``flags`` from ``server_flags.read_server_flags``,
``arguments`` in the launch profile's format (flag -> True for a switch, a list for
several values, a scalar for one). Pure, stdlib only.
"""

from __future__ import annotations

import difflib
import json
import re

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's _negative_number_matcher


def _accepts(record):
    count = {None: "one value", 0: "no value (a switch)", "?": "an optional value", "*": "any number of values",
             "+": "one or more values"}.get(record["nargs"], "%s values" % record["nargs"])
    kind = "" if record["nargs"] == 0 or record["type"] == "str" else " of type %s" % record["type"]
    choices = " from {%s}" % ", ".join(map(str, record["choices"])) if record["choices"] is not None else ""
    return "this release's flag takes %s%s%s" % (count, kind, choices)


def _value_problems(flag, value, record):
    shown = "%s %s" % (flag, "(switch)" if value is True else json.dumps(value, default=str))
    if record["rejects"]:
        return ["%s: the release's parser refuses it: %s" % (shown, record["rejects"])]
    if record["takes_value"] is None:
        return ["%s: registered with action %s, which could not be read; check by hand" % (shown, record["action"])]
    items = None if value is True else list(value) if isinstance(value, (list, tuple)) else [value]
    count, nargs, problems = len(items or []), record["nargs"], []
    if nargs == 0 and items is not None:
        problems.append("%s: a switch in this release, it takes no value (give true)" % shown)
    elif nargs != 0 and not {None: count == 1, "?": count <= 1, "*": True, "+": count >= 1}.get(nargs, count == nargs):
        problems.append("%s: %s, got %s" % (shown, _accepts(record), "no value" if items is None else count))
    for item in [] if nargs == 0 else items or []:
        word = json.dumps(item) if isinstance(item, dict) else str(item)  # as the unit template renders it
        if word.startswith("-") and len(word) > 1 and " " not in word and not _NEGATIVE_NUMBER.match(word):
            problems.append("%s: argparse would read %r as a flag, not as the value" % (shown, word))
            continue
        try:
            parsed = {"int": int, "float": float}.get(record["type"], str)(word)
        except ValueError:
            problems.append("%s: %r is not of type %s; %s" % (shown, word, record["type"], _accepts(record)))
            continue
        if record["choices"] is not None and parsed not in record["choices"]:
            problems.append("%s: %r is not among the choices; %s" % (shown, word, _accepts(record)))
    if record["ignored"] and not problems:
        problems.append("%s: accepted but ignored, its action %s stores nothing" % (shown, record["action"]))
    return problems


def flag_problems(flags, arguments):
    """What the release's parser would refuse in `arguments`, one message each.

    `arguments` is the whole command line as the profile holds it: flag -> value, true a switch,
    a list several values, a scalar one value, false or null left out. Values are checked against
    choices only where choices_known; required flags unless --config is given (its file may hold them).
    """
    problems, given = [], set()
    for flag, value in arguments.items():
        if value is None or value is False:
            continue
        record = flags.get(flag)
        if record is None:
            close = difflib.get_close_matches(flag, list(flags), n=3, cutoff=0.75)
            problems.append("%s %s: this release has no such flag%s" % (
                flag, "(switch)" if value is True else json.dumps(value, default=str),
                "; close: %s" % ", ".join(close) if close else ""))
            continue
        given.add(record["dest"])
        problems.extend(_value_problems(flag, value, record))
    if arguments.get("--config") in (None, False):
        missing = {}
        for option, record in flags.items():
            if record["required"] and record["dest"] not in given:
                missing.setdefault(record["dest"], option)
        problems.extend("%s: required by this release and not given" % option for option in missing.values())
    return problems

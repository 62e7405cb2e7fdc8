# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd's quoting, one place for every unit and environment file the roles write (filters in filter/systemd.py).

- a word of a command line (systemd.service(5), "Command lines"): safe words go as they are, anything else in double
  quotes with C escapes; ``%`` and ``$`` are doubled everywhere, so no specifier or variable reaches a value;
- an ExecStart= of one program and its flags: a line per flag and its values, joined by backslash-newlines, which
  systemd reads as spaces (the argv is the same; the unit reads better);
- a value of an EnvironmentFile= (systemd.exec(5)): safe values as they are, others in double quotes with ``\\``,
  ``"``, backquote and ``$`` escaped;
- which of the files a service runs were written after it started (a run stopped between writing them and the
  restart).
"""

from __future__ import annotations

import re

# The characters a word or a value may have and still go unquoted. re.match, as Jinja's "is match" did in the
# templates this replaces, so the files they write stay byte for byte the same.
_SAFE = r"[A-Za-z0-9_@+=:,./-]"
_SAFE_WORD = re.compile("^%s+$" % _SAFE)
_SAFE_VALUE = re.compile("^%s*$" % _SAFE)
CONTINUATION = " \\\n    "


def command_word(value):
    """One word of a command line, quoted and escaped as systemd needs."""
    text = str(value)
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("%", "%%").replace("$", "$$"))
    return escaped if _SAFE_WORD.match(text) else '"%s"' % escaped


def command_line(words):
    """Words as one command line."""
    return " ".join(command_word(word) for word in words)


def flag_lines(argv):
    """argv in lines: the program and what precedes the first flag, then each ``--flag`` with its values."""
    lines = []
    for word in argv:
        if not lines or str(word).startswith("--"):
            lines.append([word])
        else:
            lines[-1].append(word)
    return lines


def exec_start(argv, program=()):
    """The value of an ExecStart= running ``program`` (its words) with ``argv`` after it: their flag_lines, joined
    by backslash-newlines. argv comes first so that a template's failed argv reaches the error unchanged."""
    return CONTINUATION.join(command_line(line) for line in flag_lines(list(program) + list(argv)))


def environment_value(value):
    """One value of an EnvironmentFile=."""
    text = str(value)
    if _SAFE_VALUE.match(text):
        return text
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$")


def written_since_start(output):
    """The files a service runs that were written after its main process started: the service runs older ones.

    ``output``: what the role's read prints, the unit's ExecMainStartTimestamp from
    ``systemctl show --timestamp=unix -p ExecMainStartTimestamp --value UNIT`` (``@1796293615``, empty when the unit
    never started) on the first line, then one ``MTIME PATH`` line per file that exists (``stat -c '%Y %n'``).

    A run killed after writing the unit, its environment, its configuration or the patches and before its restart
    handler ran (a closed laptop, a dropped SSH session) leaves the server running the old files, and the next run
    finds every file as it wants it: only their times tell. Seconds, as stat and systemctl print them: a file written
    in the same second as the start is taken as older (the role writes before it restarts, never after).
    Returns the paths written later than the start, in the order given; empty when the service never started.
    """
    lines = str(output or "").splitlines()
    started = lines[0].strip().lstrip("@") if lines else ""
    if not started.isdigit() or int(started) == 0:
        return []
    newer = []
    for line in lines[1:]:
        mtime, path = (line.strip().split(" ", 1) + [""])[:2]
        if not mtime.isdigit() or not path:
            raise ValueError("cannot read %r as 'MTIME PATH' (stat -c '%%Y %%n')" % line)
        if int(mtime) > int(started):
            newer.append(path)
    return newer


def restart_plan(output, writes):
    """Whether a service restarts for what it runs, and why: the one decision the service role asks.

    ``output``: the read of ``written_since_start``. ``writes``: the registered results of this run's writes of what
    the service runs (unit, environment, configuration, readiness check), a result counting as a write where its
    ``changed`` is true (a skipped or unchanged one does not).

    Returns ``restart`` (it must restart), ``written`` (this run changed one of those files: the write notified the
    restart itself), ``stale`` (the files written after the server started, as ``written_since_start`` names them)
    and ``stale_only`` (only those say so: a run stopped before its restart left the server on old files, and this
    run must ask for the restart itself, naming them).
    """
    if not isinstance(writes, (list, tuple)):
        raise ValueError("the writes must be a list of registered results, got %s" % type(writes).__name__)
    written = any(isinstance(result, dict) and bool(result.get("changed")) for result in writes)
    stale = written_since_start(output)
    return {"restart": written or bool(stale), "written": written, "stale": stale,
            "stale_only": bool(stale) and not written}

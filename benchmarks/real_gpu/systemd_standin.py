# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemctl and journalctl for a host without systemd: the GPU host of the real-GPU harness.

That host is a microVM with no init system, so the sglang_service role cannot start its unit there. This stands
in for systemd alone, and for as little of it as the role uses: it reads the unit file the role wrote
(/etc/systemd/system/NAME) and runs exactly its ExecStart, with the environment of its EnvironmentFile, as its
User and Group, in its WorkingDirectory, with its LimitNOFILE and LimitMEMLOCK; it runs ExecStartPost (the role's
readiness check) with MAINPID set and holds the unit "activating" until that check returns, as Type=exec does;
stop sends SIGTERM to every process of the unit's session (KillMode=control-group), SIGKILL after
TimeoutStopSec. What it does not do (Restart=, dependencies, cgroups, the journal's metadata) the harness does not
need. The server and everything SGLang starts under it are the real ones.

Installed as /usr/local/bin/systemctl and /usr/local/bin/journalctl, two lines of sh each that run
``python3 systemd_standin.py systemctl|journalctl ARGS``. State lives in STATE_DIR, one JSON file per unit; the server's output in
LOG_DIR/NAME.log, which journalctl --unit NAME --lines N prints the end of.

    systemctl [--no-block] daemon-reload | start | stop | restart | is-active | is-enabled | enable | disable NAME
    systemctl show [-p|--property NAMES]... [--value] NAME
    journalctl --unit NAME [--lines N] [--no-pager]
"""

from __future__ import annotations

import json
import os
import pwd
import grp
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

UNIT_DIRS = tuple(Path(d) for d in os.environ.get("SYSTEMD_STANDIN_UNITS", "/etc/systemd/system:/lib/systemd/system")
                  .split(":"))
# The line written to a unit's log before each start of its server; decode_log.py finds the starts by it.
START_MARKER = "-- systemd-standin: starting"
STATE_DIR = Path(os.environ.get("SYSTEMD_STANDIN_STATE", "/run/systemd-standin"))
LOG_DIR = Path(os.environ.get("SYSTEMD_STANDIN_LOGS", "/var/log/systemd-standin"))
# What systemd puts in a service's environment before its EnvironmentFile (systemd.exec(5), "Environment
# variables in spawned processes"); PATH is systemd's default for system services.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class UnitError(Exception):
    """The unit file says something this stand-in cannot run; the message names the line."""


# ------------------------------------------------------------------ unit files

def unit_lines(text):
    """(key, value) of each assignment, continuation lines (a trailing backslash) joined, comments dropped."""
    lines, pending = [], ""
    for raw in text.splitlines():
        if not pending and raw.lstrip().startswith(("#", ";")):
            continue
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        line, pending = pending + raw, ""
        if "=" in line and not line.lstrip().startswith("["):
            key, value = line.split("=", 1)
            lines.append((key.strip(), value.strip()))
    return lines


_C_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "r": "\r", "s": " "}


def command_words(line):
    """The words of an ExecStart= line as systemd splits them: quotes, C escapes, %% and $$ for % and $.

    A lone % (a specifier) or $ (a variable) is refused: the role escapes both, so one here is a bug.
    """
    words, word, quote, in_word, i = [], [], None, False, 0
    while i < len(line):
        char = line[i]
        if quote is None and char.isspace():
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            i += 1
            continue
        in_word = True
        if quote is None and char in "\"'":
            quote = char
        elif quote is not None and char == quote:
            quote = None
        elif char == "\\" and i + 1 < len(line):
            i += 1
            word.append(_C_ESCAPES.get(line[i], line[i]))
        elif char in "%$":
            if line[i + 1:i + 2] != char:
                raise UnitError("%r in %r is a specifier or variable, which this stand-in does not expand"
                                % (char + line[i + 1:i + 2], line))
            word.append(char)
            i += 1
        else:
            word.append(char)
        i += 1
    if quote is not None:
        raise UnitError("unterminated quote in %r" % line)
    if in_word:
        words.append("".join(word))
    return words


def environment_file(text):
    """KEY=VALUE lines of an EnvironmentFile (systemd.exec(5)): double or single quotes, backslash escapes."""
    env = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            inner, out, i = value[1:-1], [], 0
            while i < len(inner):
                if inner[i] == "\\" and i + 1 < len(inner) and value[0] == '"':
                    i += 1
                out.append(inner[i])
                i += 1
            value = "".join(out)
        env[key.strip()] = value
    return env


def load_unit(name):
    for directory in UNIT_DIRS:
        path = directory / name
        if path.is_file():
            unit = {"path": str(path), "ExecStartPost": []}
            for key, value in unit_lines(path.read_text(encoding="utf-8")):
                if key == "ExecStartPost":
                    unit["ExecStartPost"].append(command_words(value))
                elif key == "ExecStart":
                    unit["ExecStart"] = command_words(value)
                else:
                    unit[key] = value
            if "ExecStart" not in unit:
                raise UnitError("%s has no ExecStart=" % path)
            return unit
    return None


def seconds(value, default):
    try:
        return float(str(value).rstrip("s"))
    except (TypeError, ValueError):
        return default


# ------------------------------------------------------------------ state

def state_path(name):
    return STATE_DIR / (name + ".json")


def read_state(name):
    try:
        return json.loads(state_path(name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"active": "inactive", "enabled": False, "pid": None}


def write_state(name, **changes):
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    state = dict(read_state(name), **changes)
    # A name of this process's own: the server's watcher and a stop write the state at once (the tenth run's
    # restart lost its .partial to the watcher's rename).
    partial = state_path(name).with_suffix(".partial.%d" % os.getpid())
    partial.write_text(json.dumps(state), encoding="utf-8")
    os.replace(partial, state_path(name))
    return state


def alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def current(name):
    """The unit's state, corrected where its main process has gone."""
    state = read_state(name)
    if state.get("active") in ("active", "activating") and not alive(state.get("pid")):
        state = write_state(name, active="failed" if state.get("active") == "activating" else "inactive", pid=None)
    return state


def session_members(sid):
    """Every process of the unit's session: SGLang's scheduler and detokenizer run as children of the launcher."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:
            pids.append(int(entry.name))
    return pids


# ------------------------------------------------------------------ start and stop

def _drop_to(user, group):
    """preexec: systemd applies limits as root, then drops to User= and Group=."""
    def run():
        os.setsid()
        if user:
            entry = pwd.getpwnam(user)
            gid = grp.getgrnam(group).gr_gid if group else entry.pw_gid
            os.setgid(gid)
            os.initgroups(user, gid)
            os.setuid(entry.pw_uid)
    return run


def spawn_environment(unit):
    env = {"PATH": BASE_PATH, "LANG": os.environ.get("LANG", "C.UTF-8")}
    user = unit.get("User")
    if user:
        entry = pwd.getpwnam(user)
        env.update(HOME=entry.pw_dir, USER=user, LOGNAME=user, SHELL=entry.pw_shell)
    if unit.get("EnvironmentFile"):
        path = unit["EnvironmentFile"].lstrip("-")
        try:
            env.update(environment_file(Path(path).read_text(encoding="utf-8")))
        except OSError:
            if not unit["EnvironmentFile"].startswith("-"):
                raise UnitError("EnvironmentFile %s cannot be read" % path)
    return env


def _limits(unit):
    for key, limit in (("LimitNOFILE", resource.RLIMIT_NOFILE), ("LimitMEMLOCK", resource.RLIMIT_MEMLOCK)):
        if key in unit:
            value = resource.RLIM_INFINITY if unit[key] == "infinity" else int(unit[key])
            try:
                resource.setrlimit(limit, (value, value))
            except (ValueError, OSError):
                pass


def supervise(name):
    """The unit's life, in a process of its own: start, readiness check, then wait for the server to end."""
    unit = load_unit(name)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = open(LOG_DIR / (name + ".log"), "ab", buffering=0)
    env = spawn_environment(unit)
    _limits(unit)
    log.write(b"%s %s: %s\n" % (START_MARKER.encode(), name.encode(), " ".join(unit["ExecStart"]).encode()))
    server = subprocess.Popen(unit["ExecStart"], env=env, cwd=unit.get("WorkingDirectory") or "/",
                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                              preexec_fn=_drop_to(unit.get("User"), unit.get("Group")))
    write_state(name, active="activating", pid=server.pid, started=time.time())
    deadline = time.time() + seconds(unit.get("TimeoutStartSec"), 90)
    for post in unit["ExecStartPost"]:
        check = subprocess.Popen(post, env=dict(env, MAINPID=str(server.pid)), stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT,
                                 preexec_fn=_drop_to(unit.get("User"), unit.get("Group")))
        while check.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        if check.poll() is None or check.returncode != 0:
            check.kill()
            log.write(b"-- systemd-standin: ExecStartPost failed (%s)\n" % str(check.returncode).encode())
            stop_processes(name, server.pid, unit)
            write_state(name, active="failed", pid=None)
            return 1
    write_state(name, active="active", active_at=time.time())
    log.write(b"-- systemd-standin: %s active\n" % name.encode())
    code = server.wait()
    state = read_state(name)
    if state.get("pid") == server.pid:
        write_state(name, active="inactive" if code in (0, -signal.SIGTERM) else "failed", pid=None)
    log.write(b"-- systemd-standin: %s exited with %d\n" % (name.encode(), code))
    return 0


def stop_processes(name, pid, unit):
    """SIGTERM to every process of the session, SIGKILL to what is left after TimeoutStopSec."""
    if not pid:
        return
    grace = seconds(unit.get("TimeoutStopSec") if unit else None, 90)
    members = session_members(pid) or [pid]
    for member in members:
        try:
            os.kill(member, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + grace
    while time.time() < deadline and any(alive(member) for member in session_members(pid) or [pid]):
        time.sleep(0.2)
    for member in session_members(pid):
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start(name, block):
    if current(name).get("active") in ("active", "activating"):
        return 0
    if load_unit(name) is None:
        sys.stderr.write("Failed to start %s: Unit %s not found.\n" % (name, name))
        return 5
    # The supervisor outlives this command (a session of its own), as the unit outlives systemctl.
    subprocess.Popen([sys.executable, os.path.abspath(__file__), "--supervise", name], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    began = time.time()
    while read_state(name).get("active") not in ("activating", "active", "failed"):
        if time.time() - began > 30:
            sys.stderr.write("%s: the supervisor did not start\n" % name)
            return 1
        time.sleep(0.05)
    if block:
        while current(name).get("active") == "activating":
            time.sleep(0.5)
        if current(name).get("active") != "active":
            sys.stderr.write("Job for %s failed. See journalctl --unit %s.\n" % (name, name))
            return 1
    return 0


def stop(name):
    state = current(name)
    stop_processes(name, state.get("pid"), load_unit(name))
    write_state(name, active="inactive", pid=None, stopped=time.time())
    return 0


# ------------------------------------------------------------------ the commands

def show(name, properties=(), value_only=False, unix_timestamps=False):
    """The unit's properties, or those of ``properties`` alone (an empty value for one it does not know, as systemd
    prints a property that has none); ``value_only``: the values without their names (--value);
    ``unix_timestamps``: timestamps as @seconds (--timestamp=unix), as systemd's weekday, date, time and zone
    otherwise."""
    unit = load_unit(name)
    state = current(name)
    active = state.get("active", "inactive")
    started = state.get("started") if state.get("pid") else None
    if started is None:
        start = ""
    elif unix_timestamps:
        start = "@%d" % int(started)
    else:
        start = time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(started))
    sub = {"active": "running", "activating": "start-post", "failed": "failed"}.get(active, "dead")
    # NRestarts: this stand-in has no Restart=, so it never restarts a unit.
    props = {"Id": name, "Names": name, "LoadState": "loaded" if unit else "not-found",
             "ActiveState": active, "SubState": sub, "MainPID": state.get("pid") or 0, "NRestarts": 0,
             "ExecMainStartTimestamp": start,
             "UnitFileState": ("enabled" if state.get("enabled") else "disabled") if unit else "",
             "FragmentPath": unit["path"] if unit else "", "Description": (unit or {}).get("Description", name)}
    shown = [(key, props.get(key, "")) for key in properties] if properties else list(props.items())
    print("\n".join(str(value) if value_only else "%s=%s" % (key, value) for key, value in shown))
    return 0


def systemctl_args(argv):
    """(words, properties, options) of a systemctl command line: the verb and unit names; the properties its
    -p/--property options ask for (-p X, -pX, --property X, --property=X, commas splitting each); the other
    options' names (--no-block, --value)."""
    words, properties, options, i = [], [], set(), 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-p", "--property"):
            i += 1
            properties += argv[i].split(",") if i < len(argv) else []
        elif arg.startswith("--property="):
            properties += arg.split("=", 1)[1].split(",")
        elif arg.startswith("-p") and not arg.startswith("--"):
            properties += arg[2:].split(",")
        elif arg.startswith("-"):
            options.add(arg.split("=", 1)[0])
        else:
            words.append(arg)
        i += 1
    return words, [name for name in properties if name], options


def systemctl(argv):
    args, properties, options = systemctl_args(argv)
    block = "--no-block" not in options
    if not args:
        sys.stderr.write(__doc__)
        return 2
    verb, names = args[0], args[1:]
    if verb == "daemon-reload":
        return 0
    if verb == "show":
        return max([show(name, properties, "--value" in options, "--timestamp" in options) for name in names] or [0])
    codes = []
    for name in names:
        if verb == "start":
            codes.append(start(name, block))
        elif verb == "stop":
            codes.append(stop(name))
        elif verb == "restart":
            stop(name)
            codes.append(start(name, block))
        elif verb == "is-active":
            active = current(name).get("active", "inactive")
            print(active)
            codes.append(0 if active == "active" else 3)
        elif verb == "is-enabled":
            enabled = read_state(name).get("enabled")
            print("enabled" if enabled else "disabled")
            codes.append(0 if enabled else 1)
        elif verb in ("enable", "disable"):
            write_state(name, enabled=verb == "enable")
            codes.append(0)
        elif verb == "status":
            codes.append(show(name))
        else:
            sys.stderr.write("systemd-standin: %s is not one of the verbs the role uses\n" % verb)
            return 2
    return max(codes or [0])


def journalctl(argv):
    name, lines, i = None, 50, 0
    while i < len(argv):
        if argv[i] in ("--unit", "-u"):
            name, i = argv[i + 1], i + 1
        elif argv[i] in ("--lines", "-n"):
            lines, i = int(argv[i + 1]), i + 1
        i += 1
    if name is None:
        return 0
    try:
        text = (LOG_DIR / (name + ".log")).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    sys.stdout.write("\n".join(text.splitlines()[-lines:]) + "\n")
    return 0


def main(argv):
    if argv[1:2] == ["--supervise"]:
        return supervise(argv[2])
    if argv[1:2] == ["journalctl"]:
        return journalctl(argv[2:])
    if argv[1:2] == ["systemctl"]:
        return systemctl(argv[2:])
    sys.stderr.write("usage: %s systemctl|journalctl ARGS\n" % argv[0])
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

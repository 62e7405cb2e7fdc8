# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wait for a (re)started server: its /health and its systemd unit, until it serves or cannot.

/health alone cannot tell a server that loads from one that exits at every start (a flag its release does not take,
out of GPU memory): both are refused. Its unit can: systemd marks it failed, or (Restart=on-failure) holds it in
``auto-restart`` for RestartSec and counts the restart in NRestarts. So each poll reads both, and
``health_verdict`` decides: serving, still loading, or failed, with the reason. ``wait`` is the loop the module
``sm120.sglang.health_wait`` runs, its reads and its clock passed in, so that tests drive it without Ansible.

Standard library and Ansible's module_utils only: this runs on the target with the host's own Python 3.9+.
"""

from __future__ import annotations

import time
import urllib.error

from ansible.module_utils.urls import ConnectionError as UrlConnectionError
from ansible.module_utils.urls import open_url

# What each poll asks ``systemctl show``. Job: a start or restart queued and not yet run (the role starts and
# restarts with --no-block) is not a failure, whatever state the unit is still in; NRestarts needs systemd 235.
# ExecMainStartTimestamp: when the running server started, which with MainPID names the process (the smoke test
# takes a measurement of the same process again, plugin_utils/measurement_reuse.py).
UNIT_PROPERTIES = ("ActiveState", "SubState", "NRestarts", "MainPID", "Job", "ExecMainStartTimestamp")
HEALTHY = "healthy"
WAIT = "wait"
FAILED = "failed"


def show_argv(systemctl, unit):
    """The command that prints the unit's properties this wait reads."""
    return [systemctl, "show", "--property=" + ",".join(UNIT_PROPERTIES), unit]


def _count(value):
    text = str(value or "").strip()
    return int(text) if text.isdigit() else 0


def parse_unit_props(text):
    """What ``systemctl show --property ...`` prints (``KEY=VALUE`` lines) as the properties this wait reads.

    A property systemd did not print reads as empty; NRestarts (absent before systemd 235) and MainPID as 0.
    """
    raw = {}
    for line in str(text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            raw.setdefault(key.strip(), value.strip())
    return {
        "ActiveState": raw.get("ActiveState", ""),
        "SubState": raw.get("SubState", ""),
        "NRestarts": _count(raw.get("NRestarts")),
        "MainPID": _count(raw.get("MainPID")),
        "Job": raw.get("Job", ""),
        "ExecMainStartTimestamp": raw.get("ExecMainStartTimestamp", ""),
    }


def server_identity(unit_props):
    """Which server process runs: "<ExecMainStartTimestamp>, PID <MainPID>", or "" where it never started.

    Two reads name the same process only where both are equal: a restart changes the start time, and a PID reused
    after one has a later start. The smoke test keeps this with a measurement, and takes the measurement again
    instead of measuring only where the server now running has the same identity.
    """
    started = str((unit_props or {}).get("ExecMainStartTimestamp") or "").strip()
    if not started:
        return ""
    return "%s, PID %s" % (started, _count((unit_props or {}).get("MainPID")))


def _state(state, sub):
    return "%s (%s)" % (state or "unknown", sub or "unknown")


def _times(count):
    return "1 time" if count == 1 else "%d times" % count


def health_verdict(status_code, unit_props, restarts_at_start, elapsed, timeout, unit="the unit", url="/health",
                   answer=None):
    """(verdict, reason) of one poll: HEALTHY, WAIT or FAILED, and a sentence naming what was seen and what to do.

    ``status_code``: what ``url`` answered, None without an answer (refused while the weights load); ``answer``
    says that answer in words for the timeout's reason. ``unit_props``: ``parse_unit_props``'s. ``restarts_at_start``:
    NRestarts when the wait began. ``elapsed`` and ``timeout`` in seconds.

    200 is healthy, whatever the unit says. Then the unit: ``auto-restart`` (its process exited and systemd waits
    RestartSec to start it again) or more restarts than at the start, failed, or inactive (stopped, or its process
    exited with 0, which Restart=on-failure does not restart) are failures. A failed or inactive unit with a job
    queued is about to start: the wait goes on. Then the clock.
    """
    journal = "journalctl -u %s says why" % unit
    if status_code == 200:
        return HEALTHY, "%s answered 200 after %d s" % (url, elapsed)
    state, sub = unit_props.get("ActiveState", ""), unit_props.get("SubState", "")
    restarts = unit_props.get("NRestarts", 0)
    if restarts > restarts_at_start:
        return FAILED, ("%s exited and systemd restarted it %s since the wait began (NRestarts %d -> %d, now %s); "
                        "%s. Fix what it names and run the play again."
                        % (unit, _times(restarts - restarts_at_start), restarts_at_start, restarts,
                           _state(state, sub), journal))
    if sub.startswith("auto-restart"):
        return FAILED, ("%s exited and systemd is about to restart it (SubState=%s, for RestartSec); %s. Fix what it "
                        "names and run the play again." % (unit, sub, journal))
    queued = bool(unit_props.get("Job"))
    if state == "failed" and not queued:
        return FAILED, ("%s is failed (SubState=%s): its server exited or its start timed out, and systemd does not "
                        "restart it (or gave up: StartLimitBurst); %s. Fix what it names and run the play again."
                        % (unit, sub, journal))
    if state == "inactive" and not queued:
        return FAILED, ("%s is inactive (SubState=%s): something stopped it, or its server exited with status 0, "
                        "which Restart=on-failure does not restart; %s. Start it again, or run the play again."
                        % (unit, sub, journal))
    if elapsed >= timeout:
        return FAILED, ("%s did not answer 200 within %d s (the last answer: %s), while %s stayed %s; %s. If the "
                        "load is only slow, raise sglang_service_health_timeout."
                        % (url, timeout, answer or status_code, unit, _state(state, sub), journal))
    return WAIT, "%s answered %s after %d s; %s is %s" % (url, answer or status_code, elapsed, unit, _state(state, sub))


def probe_health(url, timeout, headers=None):
    """(status, answer) of one GET: the HTTP status (None where nothing answered) and it in words.

    Through Ansible's open_url, as ansible.builtin.uri asked before: the same proxy settings and certificates.
    """
    try:
        with open_url(url, headers=dict(headers or {}), timeout=timeout) as response:
            return response.status, "%d" % response.status
    except urllib.error.HTTPError as exc:
        # 503 while SGLang warms up.
        return exc.code, "%d" % exc.code
    except (urllib.error.URLError, UrlConnectionError, OSError) as exc:
        # Refused while the weights load; a timeout where the server hangs.
        return None, "no answer (%s)" % getattr(exc, "reason", exc)


def wait(read_health, read_unit, timeout, delay, unit="the unit", url="/health", clock=time.monotonic,
         sleep=time.sleep):
    """Poll until the verdict is not WAIT; return the last poll as the module returns it.

    ``read_health()`` -> (status, answer), ``read_unit()`` -> ``parse_unit_props``'s. The unit is read once before
    the first poll: its NRestarts then is the count later polls compare with.
    """
    began = clock()
    restarts_at_start = read_unit().get("NRestarts", 0)
    while True:
        status, answer = read_health()
        props = read_unit()
        elapsed = clock() - began
        verdict, reason = health_verdict(status, props, restarts_at_start, elapsed, timeout, unit=unit, url=url,
                                         answer=answer)
        if verdict != WAIT:
            return {"verdict": verdict, "reason": reason, "status": status, "answer": answer,
                    "waited": round(elapsed, 1), "unit_props": props, "restarts_at_start": restarts_at_start,
                    "server": server_identity(props)}
        # The last sleep ends at the deadline, so the timeout's poll comes at the timeout, not a delay after it.
        sleep(max(0.0, min(delay, timeout - elapsed)))

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health wait's reading of systemctl show, its verdict on each poll, and its loop on a clock of the test's.

The unit properties are what systemd 252 (Debian 12) prints for a service that loads, one whose process exited
(Restart=on-failure waiting RestartSec, and after the restart), one that failed and one that was stopped.
"""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.health_wait import (
    FAILED,
    HEALTHY,
    WAIT,
    health_verdict,
    parse_unit_props,
    probe_health,
    server_identity,
    show_argv,
    wait,
)

UNIT = "sglang-glm-5-nvfp4.service"
URL = "http://127.0.0.1:30000/health"
LOADING = {"ActiveState": "activating", "SubState": "start-post", "NRestarts": 0, "MainPID": 4242, "Job": "181"}


def _props(**changes):
    return dict(LOADING, **changes)


def _verdict(status=None, props=None, at_start=0, elapsed=5.0, timeout=1800, answer="no answer (refused)"):
    return health_verdict(status, props or LOADING, at_start, elapsed, timeout, unit=UNIT, url=URL, answer=answer)


def test_the_command_asks_for_the_six_properties_of_the_unit():
    assert show_argv("/usr/bin/systemctl", UNIT) == [
        "/usr/bin/systemctl", "show", "--property=ActiveState,SubState,NRestarts,MainPID,Job,ExecMainStartTimestamp",
        UNIT]


def test_systemctl_shows_output_reads_as_strings_and_counts():
    text = ("ActiveState=activating\nSubState=start-post\nNRestarts=2\nMainPID=4242\nJob=181\n"
            "ExecMainStartTimestamp=Fri 2026-12-04 20:00:00 UTC\n")
    assert parse_unit_props(text) == {"ActiveState": "activating", "SubState": "start-post", "NRestarts": 2,
                                      "MainPID": 4242, "Job": "181",
                                      "ExecMainStartTimestamp": "Fri 2026-12-04 20:00:00 UTC"}


def test_what_systemd_did_not_print_is_empty_and_nrestarts_before_systemd_235_is_zero():
    assert parse_unit_props("MainPID=0\nActiveState=inactive\nSubState=dead\nJob=\nnot a property\n") == {
        "ActiveState": "inactive", "SubState": "dead", "NRestarts": 0, "MainPID": 0, "Job": "",
        "ExecMainStartTimestamp": ""}
    assert parse_unit_props("") == {"ActiveState": "", "SubState": "", "NRestarts": 0, "MainPID": 0, "Job": "",
                                    "ExecMainStartTimestamp": ""}


def test_200_is_healthy_whatever_the_unit_says():
    verdict, reason = _verdict(200, _props(ActiveState="failed", SubState="failed", NRestarts=3), elapsed=42.4)
    assert verdict == HEALTHY and reason == "%s answered 200 after 42 s" % URL


@pytest.mark.parametrize("status, answer", [(None, "no answer (refused)"), (503, "503")])
def test_a_loading_unit_that_is_refused_or_warming_up_is_waited_for(status, answer):
    verdict, reason = _verdict(status, answer=answer)
    assert verdict == WAIT
    assert reason == "%s answered %s after 5 s; %s is activating (start-post)" % (URL, answer, UNIT)


def test_a_restart_since_the_wait_began_fails_counting_the_restarts_and_naming_the_journal():
    verdict, reason = _verdict(props=_props(NRestarts=1, MainPID=4343))
    assert verdict == FAILED
    assert reason == ("%s exited and systemd restarted it 1 time since the wait began (NRestarts 0 -> 1, now "
                      "activating (start-post)); journalctl -u %s says why. Fix what it names and run the play again."
                      % (UNIT, UNIT))
    assert "restarted it 2 times since the wait began (NRestarts 3 -> 5" in _verdict(
        props=_props(NRestarts=5), at_start=3)[1]


def test_restarts_from_before_the_wait_are_not_counted():
    assert _verdict(props=_props(NRestarts=3), at_start=3)[0] == WAIT


@pytest.mark.parametrize("sub", ["auto-restart", "auto-restart-queued"])
def test_a_process_that_exited_and_waits_restartsec_fails_before_the_restart(sub):
    # systemd 254 and later name the wait after RestartSec, the restart job queued, auto-restart-queued.
    verdict, reason = _verdict(props=_props(SubState=sub, MainPID=0, Job=""))
    assert verdict == FAILED
    assert reason.startswith("%s exited and systemd is about to restart it (SubState=%s, for RestartSec); "
                             "journalctl -u %s says why." % (UNIT, sub, UNIT))


def test_a_failed_unit_fails_the_wait_naming_the_state():
    verdict, reason = _verdict(props=_props(ActiveState="failed", SubState="failed", MainPID=0, Job=""))
    assert verdict == FAILED
    assert reason.startswith("%s is failed (SubState=failed): its server exited" % UNIT)
    assert "journalctl -u %s says why" % UNIT in reason


def test_a_stopped_unit_fails_the_wait_saying_it_was_stopped_or_exited_with_0():
    verdict, reason = _verdict(props=_props(ActiveState="inactive", SubState="dead", MainPID=0, Job=""))
    assert verdict == FAILED
    assert reason.startswith("%s is inactive (SubState=dead): something stopped it, or its server exited with "
                             "status 0" % UNIT)


@pytest.mark.parametrize("state, sub", [("inactive", "dead"), ("failed", "failed")])
def test_a_unit_with_a_start_queued_is_waited_for_whatever_state_it_is_still_in(state, sub):
    # --no-block returns before the job runs; After=network-online.target can hold it queued.
    assert _verdict(props=_props(ActiveState=state, SubState=sub, MainPID=0, Job="182"))[0] == WAIT


def test_the_deadline_fails_with_the_last_answer_and_the_units_state():
    verdict, reason = _verdict(503, elapsed=1800.2, answer="503")
    assert verdict == FAILED
    assert reason == ("%s did not answer 200 within 1800 s (the last answer: 503), while %s stayed activating "
                      "(start-post); journalctl -u %s says why. If the load is only slow, raise "
                      "sglang_service_health_timeout." % (URL, UNIT, UNIT))
    assert _verdict(elapsed=1799.9)[0] == WAIT


def test_a_unit_that_failed_is_named_even_at_the_deadline():
    assert "exited and systemd is about to restart it" in _verdict(
        props=_props(SubState="auto-restart"), elapsed=1900)[1]


class _Clock:
    """The wait's clock and sleep: time passes only when the wait sleeps, and every read takes 0.5 s."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def _reads(clock, answers, units):
    answers, units = iter(answers), iter(units)

    def read_health():
        clock.now += 0.5
        return next(answers)

    def read_unit():
        return next(units)

    return read_health, read_unit


def test_the_wait_polls_every_delay_until_200():
    clock = _Clock()
    read_health, read_unit = _reads(clock, [(None, "no answer"), (503, "503"), (200, "200")], [LOADING] * 4)
    result = wait(read_health, read_unit, timeout=60, delay=10, unit=UNIT, url=URL, clock=clock, sleep=clock.sleep)
    assert result["verdict"] == HEALTHY and result["status"] == 200 and result["answer"] == "200"
    assert clock.sleeps == [10, 10] and result["waited"] == 21.5
    assert result["restarts_at_start"] == 0 and result["unit_props"] == LOADING
    # LOADING has no start time: the process is not named.
    assert result["server"] == ""


def test_the_wait_names_the_server_process_that_answered():
    clock = _Clock()
    started = _props(ActiveState="active", SubState="running", ExecMainStartTimestamp="Fri 2026-12-04 20:00:00 UTC")
    read_health, read_unit = _reads(clock, [(200, "200")], [started] * 2)
    result = wait(read_health, read_unit, timeout=60, delay=10, unit=UNIT, url=URL, clock=clock, sleep=clock.sleep)
    assert result["server"] == "Fri 2026-12-04 20:00:00 UTC, PID 4242"


def test_a_server_is_named_by_its_start_and_pid_and_not_at_all_before_it_started():
    assert server_identity({"ExecMainStartTimestamp": "Fri 2026-12-04 21:29:22 UTC", "MainPID": 820}) == (
        "Fri 2026-12-04 21:29:22 UTC, PID 820")
    # A restart with the same PID is another process: the start time differs.
    assert server_identity({"ExecMainStartTimestamp": "Fri 2026-12-04 21:40:01 UTC", "MainPID": 820}) == (
        "Fri 2026-12-04 21:40:01 UTC, PID 820")
    assert server_identity({"ExecMainStartTimestamp": "", "MainPID": 0}) == ""
    assert server_identity({"ExecMainStartTimestamp": "  ", "MainPID": 77}) == ""
    assert server_identity({}) == "" and server_identity(None) == ""


def test_the_wait_stops_at_the_first_poll_that_sees_a_restart_not_at_the_timeout():
    clock = _Clock()
    units = [_props(NRestarts=2), _props(NRestarts=2), _props(NRestarts=3, MainPID=4343)]
    read_health, read_unit = _reads(clock, [(None, "no answer")] * 2, units)
    result = wait(read_health, read_unit, timeout=1800, delay=10, unit=UNIT, url=URL, clock=clock, sleep=clock.sleep)
    assert result["verdict"] == FAILED and "(NRestarts 2 -> 3, now" in result["reason"]
    assert result["restarts_at_start"] == 2 and result["unit_props"]["MainPID"] == 4343
    assert clock.sleeps == [10] and result["waited"] == 11.0


def test_the_last_sleep_ends_at_the_deadline():
    clock = _Clock()
    read_health, read_unit = _reads(clock, [(None, "no answer")] * 4, [LOADING] * 5)
    result = wait(read_health, read_unit, timeout=25, delay=10, unit=UNIT, url=URL, clock=clock, sleep=clock.sleep)
    assert result["verdict"] == FAILED and "did not answer 200 within 25 s" in result["reason"]
    assert clock.sleeps == [10, 10, 3.5] and result["waited"] == 25.5


@pytest.fixture
def server():
    """A real HTTP server on a free port answering each path with the status the path names (/200, /503)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(int(self.path.strip("/").split("?")[0]))
            self.end_headers()
            self.wfile.write(self.headers.get("X-Probe", "").encode())

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_the_probe_reads_200_and_503_and_says_when_nothing_answers(server):
    assert probe_health(server + "/200", 5, {"X-Probe": "yes"}) == (200, "200")
    assert probe_health(server + "/503", 5) == (503, "503")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    status, answer = probe_health("http://127.0.0.1:%d/health" % port, 5)
    assert status is None and answer.startswith("no answer (") and "refused" in answer.lower()

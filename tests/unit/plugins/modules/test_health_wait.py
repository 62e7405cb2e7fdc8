# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""health_wait through main(), with real processes: an HTTP server on a free port and a systemctl on PATH.

The systemctl is a test double standing in for systemd, which unit tests cannot drive: a script that prints, at
its n-th call, the n-th of the property sets the test gives it (the last one from then on), as ``systemctl show
--property=...`` prints them, and counts its calls in a file.
"""

from __future__ import annotations

import http.server
import json
import socket
import sys
import threading
import time

import pytest
from ansible.module_utils import basic

from ansible_collections.sm120.sglang.plugins.modules import health_wait
from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail

UNIT = "sglang-demo.service"
LOADING = ("ActiveState=activating\nSubState=start-post\nNRestarts=0\nMainPID=4242\nJob=181\n"
           "ExecMainStartTimestamp=Fri 2026-12-04 20:00:00 UTC\n")

FAKE_SYSTEMCTL = """#!%s
import json, sys
script, calls = %r, %r
try:
    count = int(open(calls).read())
except OSError:
    count = 0
open(calls, "w").write(str(count + 1))
open(calls + ".argv", "a").write(json.dumps(sys.argv[1:]) + "\\n")
answers = json.load(open(script))
rc, out = answers[min(count, len(answers) - 1)]
sys.stdout.write(out) if rc == 0 else sys.stderr.write(out)
sys.exit(rc)
"""


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    """Put a systemctl on PATH answering with the given (rc, output) pairs; return how to read its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script, calls = tmp_path / "answers.json", tmp_path / "calls"
    program = bin_dir / "systemctl"
    program.write_text(FAKE_SYSTEMCTL % (sys.executable, str(script), str(calls)))
    program.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bin_dir)

    def answer(*outputs):
        script.write_text(json.dumps([output if isinstance(output, list) else [0, output] for output in outputs]))
        return lambda: [json.loads(line) for line in (tmp_path / "calls.argv").read_text().splitlines()]

    return answer


@pytest.fixture
def server():
    """A real HTTP server whose n-th request gets the n-th status of the list it is given (the last from then on);
    "auth" answers 200 only to a request with the test's Authorization header, 401 otherwise."""
    statuses = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
            if status == "auth":
                status = 200 if self.headers.get("Authorization") == "Bearer secret" else 401
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def answering(*given):
        statuses[:] = list(given)
        return "http://127.0.0.1:%d/health" % httpd.server_address[1]

    yield answering
    httpd.shutdown()
    httpd.server_close()


def _refusing_url():
    """A URL on a port nothing listens on: connections to it are refused, as while the weights load."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return "http://127.0.0.1:%d/health" % probe.getsockname()[1]


def _args(url, **changes):
    return dict({"url": url, "unit": UNIT, "timeout": 60, "delay": 0.1, "request_timeout": 5}, **changes)


def test_it_returns_once_health_answers_200_after_503s(run_module, systemctl, server):
    calls = systemctl(LOADING)
    url = server(503, 503, 200)
    result = run_module(health_wait.main, _args(url))
    assert result["changed"] is False and result["verdict"] == "healthy" and result["status"] == 200
    assert result["reason"] == "%s answered 200 after 0 s" % url and result["answer"] == "200"
    assert result["unit_props"] == {"ActiveState": "activating", "SubState": "start-post", "NRestarts": 0,
                                    "MainPID": 4242, "Job": "181",
                                    "ExecMainStartTimestamp": "Fri 2026-12-04 20:00:00 UTC"}
    assert calls()[0] == ["show", "--property=ActiveState,SubState,NRestarts,MainPID,Job,ExecMainStartTimestamp", UNIT]
    # One read before the first poll, then one per poll: three polls.
    assert len(calls()) == 4


def test_a_server_restarted_by_systemd_stops_the_wait_within_a_few_delays_not_at_the_timeout(run_module, systemctl):
    # Nothing ever listens, as when the server exits at every start; systemd restarts it by the 3rd read.
    restarted = LOADING.replace("NRestarts=0", "NRestarts=1").replace("MainPID=4242", "MainPID=4343")
    systemctl(LOADING, LOADING, restarted)
    began = time.monotonic()
    with pytest.raises(ModuleFail) as failure:
        run_module(health_wait.main, _args(_refusing_url(), timeout=600))
    assert time.monotonic() - began < 10
    result = failure.value.result
    assert result["msg"] == result["reason"] == (
        "%s exited and systemd restarted it 1 time since the wait began (NRestarts 0 -> 1, now activating "
        "(start-post)); journalctl -u %s says why. Fix what it names and run the play again." % (UNIT, UNIT))
    assert result["verdict"] == "failed" and result["status"] is None and result["restarts_at_start"] == 0
    assert result["answer"].startswith("no answer (")
    assert result["unit_props"]["MainPID"] == 4343 and result["waited"] < 10


def test_a_unit_waiting_to_restart_its_exited_server_fails_the_wait_at_once(run_module, systemctl, server):
    systemctl("ActiveState=activating\nSubState=auto-restart\nNRestarts=0\nMainPID=0\nJob=\n")
    with pytest.raises(ModuleFail) as failure:
        run_module(health_wait.main, _args(server(503), timeout=600))
    assert "exited and systemd is about to restart it (SubState=auto-restart" in failure.value.result["msg"]
    assert failure.value.result["waited"] < 10


def test_the_timeout_fails_with_the_last_answer(run_module, systemctl, server):
    systemctl(LOADING)
    with pytest.raises(ModuleFail) as failure:
        run_module(health_wait.main, _args(server(503), timeout=0.3))
    assert failure.value.result["msg"].startswith("%s did not answer 200 within 0 s (the last answer: 503), while %s "
                                                  "stayed activating (start-post)" % (server(503), UNIT))


def test_headers_go_with_each_request(run_module, systemctl, server):
    systemctl(LOADING)
    url = server("auth")
    assert run_module(health_wait.main, _args(url, headers={"Authorization": "Bearer secret"}))["status"] == 200
    with pytest.raises(ModuleFail) as failure:
        run_module(health_wait.main, _args(url, timeout=0.2))
    assert failure.value.result["status"] == 401


def test_a_systemctl_that_fails_stops_the_wait_with_its_error(run_module, systemctl, server):
    systemctl([1, "System has not been booted with systemd as init system (PID 1). Can't operate.\n"])
    with pytest.raises(ModuleFail) as failure:
        run_module(health_wait.main, _args(server(200)))
    assert failure.value.result["msg"].endswith(
        "systemctl show --property=ActiveState,SubState,NRestarts,MainPID,Job,ExecMainStartTimestamp %s failed (rc 1): "
        "System has not been "
        "booted with systemd as init system (PID 1). Can't operate." % UNIT)


def test_without_systemctl_the_wait_fails_saying_it_needs_systemd(run_module, monkeypatch, server):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda module, name, *args, **kwargs: None)
    with pytest.raises(ModuleFail) as failure:
        run_module(health_wait.main, _args(server(200)))
    assert failure.value.result["msg"] == ("systemctl is not on the PATH of the target, so the state of %s cannot be "
                                           "read; the wait needs systemd" % UNIT)


@pytest.mark.parametrize("changes", [{"delay": 0}, {"request_timeout": -1}])
def test_a_delay_or_request_timeout_of_0_s_is_refused(run_module, systemctl, server, changes):
    systemctl(LOADING)
    with pytest.raises(ModuleFail) as failure:
        run_module(health_wait.main, _args(server(200), **changes))
    assert failure.value.result["msg"].startswith("delay and request_timeout must be more than 0 s")


def test_check_mode_skips_the_wait_as_uri_did(run_module, systemctl, server):
    calls = systemctl(LOADING)
    result = run_module(health_wait.main, dict(_args(server(200)), _ansible_check_mode=True))
    assert result["skipped"] is True
    with pytest.raises(FileNotFoundError):
        calls()

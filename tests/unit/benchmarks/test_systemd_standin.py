# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-GPU harness's stand-in for systemd (benchmarks/real_gpu/systemd_standin.py).

It runs the unit the sglang_service role writes on a host without systemd: these check that it reads the unit
as systemd would (command-line quoting, the environment file), and runs, holds and stops it as the role expects,
with a real process and the role's own readiness check; and that the role's health wait (module health_wait)
reads its show as it reads systemd's, ending when the unit serves or its server exits.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from ansible_collections.sm120.sglang.plugins.modules import health_wait
from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "real_gpu" / "systemd_standin.py"
WAIT = ROOT / "roles" / "sglang_service" / "files" / "sglang-service-wait-health.py"


def _module():
    spec = importlib.util.spec_from_file_location("systemd_standin", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sd = _module()


def test_command_words_follow_systemds_quoting_and_escapes():
    # As the role's template writes them: safe words bare, others in double quotes, % and $ doubled.
    line = '/opt/sglang/bin/python -m sglang.launch_server --x "a b" "say \\"hi\\"\\n" 100%% $$HOME'
    assert sd.command_words(line) == ["/opt/sglang/bin/python", "-m", "sglang.launch_server", "--x", "a b",
                                      'say "hi"\n', "100%", "$HOME"]


@pytest.mark.parametrize("line, message", [("run %h", "specifier or variable"), ("run $HOME", "specifier or"),
                                           ('run "open', "unterminated quote")])
def test_what_it_cannot_run_is_refused_naming_the_line(line, message):
    with pytest.raises(sd.UnitError, match=message):
        sd.command_words(line)


def test_continuation_lines_join_and_comments_drop():
    text = "[Service]\n# a comment\nExecStart=/bin/echo one \\\n    two\nUser=sglang\n"
    assert sd.unit_lines(text) == [("ExecStart", "/bin/echo one      two"), ("User", "sglang")]


def test_the_environment_file_as_the_role_writes_it():
    text = '# comment\nPLAIN=1\nQUOTED="a \\"b\\" \\$c"\nSINGLE=\'x y\'\n\nEMPTY=\n'
    assert sd.environment_file(text) == {"PLAIN": "1", "QUOTED": 'a "b" $c', "SINGLE": "x y", "EMPTY": ""}


@pytest.fixture
def unit(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "units").mkdir()
    (tmp_path / "demo.env").write_text('GREETING="hello world"\n')
    server = ("import os, time, http.server as h; print('GREETING', os.environ['GREETING'], flush=True); "
              "time.sleep(0.5); h.HTTPServer(('127.0.0.1', %d), h.SimpleHTTPRequestHandler).serve_forever()" % port)
    (tmp_path / "units" / "demo.service").write_text(
        "[Service]\nType=exec\nWorkingDirectory=%s\nEnvironmentFile=%s\nExecStart=%s -c \"%s\"\n"
        "ExecStartPost=%s %s http://127.0.0.1:%d/ 0.1\nTimeoutStartSec=20\nTimeoutStopSec=5\n"
        % (tmp_path, tmp_path / "demo.env", sys.executable, server.replace('"', '\\"'), sys.executable, WAIT, port))
    env = dict(os.environ, SYSTEMD_STANDIN_UNITS=str(tmp_path / "units"), SYSTEMD_STANDIN_STATE=str(tmp_path / "state"),
               SYSTEMD_STANDIN_LOGS=str(tmp_path / "logs"))

    def systemctl(*args, program="systemctl"):
        return subprocess.run([sys.executable, str(SCRIPT), program, *args], env=env, capture_output=True, text=True,
                              timeout=60, check=False)

    yield systemctl, port
    systemctl("stop", "demo.service")


def _answers(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=2) as response:
            return response.status
    except OSError:
        return None


def test_start_holds_activating_until_the_readiness_check_passes_then_stop_ends_the_server(unit):
    systemctl, port = unit
    assert "LoadState=loaded" in systemctl("show", "demo.service").stdout
    assert systemctl("--no-block", "start", "demo.service").returncode == 0
    assert systemctl("is-active", "demo.service").stdout.strip() == "activating"
    for _attempt in range(100):
        if systemctl("is-active", "demo.service").stdout.strip() == "active":
            break
        time.sleep(0.1)
    assert "ActiveState=active" in systemctl("show", "demo.service").stdout
    assert _answers(port) == 200
    assert "GREETING hello world" in systemctl("--unit", "demo.service", "--lines", "20", program="journalctl").stdout
    assert systemctl("stop", "demo.service").returncode == 0
    assert systemctl("is-active", "demo.service").returncode == 3
    assert _answers(port) is None


def test_a_blocking_restart_returns_once_active_and_a_unit_that_does_not_exist_is_not_found(unit):
    systemctl, port = unit
    assert systemctl("restart", "demo.service").returncode == 0
    assert systemctl("is-active", "demo.service").stdout.strip() == "active" and _answers(port) == 200
    assert systemctl("enable", "demo.service").returncode == 0
    assert systemctl("is-enabled", "demo.service").stdout.strip() == "enabled"
    assert "LoadState=not-found" in systemctl("show", "nothing.service").stdout
    assert systemctl("start", "nothing.service").returncode == 5


@pytest.mark.parametrize("args", [("--property=ActiveState,NRestarts",), ("-p", "ActiveState", "-p", "NRestarts"),
                                  ("--property", "ActiveState,NRestarts"), ("-pActiveState", "-pNRestarts")])
def test_show_prints_the_properties_asked_for_in_each_way_systemctl_takes_them(unit, args):
    systemctl, _port = unit
    shown = systemctl("show", *args, "demo.service")
    assert shown.returncode == 0 and shown.stdout == "ActiveState=inactive\nNRestarts=0\n"


def test_show_counts_no_restarts_and_prints_values_alone_with_value(unit):
    systemctl, _port = unit
    assert "\nNRestarts=0\n" in systemctl("show", "demo.service").stdout
    assert systemctl("show", "--property=MainPID,SubState", "--value", "demo.service").stdout == "0\ndead\n"
    # The role's read of when the server started (tasks/main.yml): a unit that never started has no start, which
    # plugin_utils/systemd.py takes as a server that never started.
    shown = systemctl("show", "--timestamp=unix", "-p", "ExecMainStartTimestamp", "--value", "demo.service")
    assert shown.stdout == "\n"


def test_show_gives_the_start_of_the_running_server_as_systemd_prints_it(unit):
    systemctl, _port = unit
    before = int(time.time())
    assert systemctl("restart", "demo.service").returncode == 0
    after = int(time.time())
    unix = systemctl("show", "--timestamp=unix", "-p", "ExecMainStartTimestamp", "--value", "demo.service").stdout
    assert unix.startswith("@") and before <= int(unix.strip()[1:]) <= after
    # Without --timestamp: weekday, date, time and zone (health_wait reads it so, for the smoke test's reuse).
    shown = systemctl("show", "-p", "ExecMainStartTimestamp", "demo.service").stdout.strip()
    started = time.gmtime(int(unix.strip()[1:]))
    assert shown == "ExecMainStartTimestamp=" + time.strftime("%a %Y-%m-%d %H:%M:%S UTC", started)


@pytest.fixture
def standin_on_path(unit, tmp_path, monkeypatch):
    """The stand-in as the harness installs it: a systemctl on PATH that runs it, its directories in the env."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text('#!/bin/sh\nexec %s %s systemctl "$@"\n' % (sys.executable, SCRIPT))
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    for name, directory in (("UNITS", "units"), ("STATE", "state"), ("LOGS", "logs")):
        monkeypatch.setenv("SYSTEMD_STANDIN_" + name, str(tmp_path / directory))
    return unit


def test_the_health_wait_returns_once_the_standins_unit_serves(run_module, standin_on_path):
    systemctl, port = standin_on_path
    assert systemctl("--no-block", "start", "demo.service").returncode == 0
    result = run_module(health_wait.main, {"url": "http://127.0.0.1:%d/" % port, "unit": "demo.service",
                                           "timeout": 30, "delay": 0.2})
    assert result["verdict"] == "healthy" and result["status"] == 200
    assert result["unit_props"]["NRestarts"] == 0 and result["unit_props"]["MainPID"] > 0


def test_the_health_wait_stops_when_the_standins_server_exits_at_start(run_module, standin_on_path, tmp_path):
    systemctl, port = standin_on_path
    (tmp_path / "units" / "broken.service").write_text(
        "[Service]\nType=exec\nExecStart=%s -c \"import sys; sys.exit('failing at start')\"\n"
        "ExecStartPost=%s %s http://127.0.0.1:%d/ 0.1\nTimeoutStartSec=20\nTimeoutStopSec=5\n"
        % (sys.executable, sys.executable, WAIT, port))
    assert systemctl("--no-block", "start", "broken.service").returncode == 0
    began = time.monotonic()
    with pytest.raises(ModuleFail) as failure:
        run_module(health_wait.main, {"url": "http://127.0.0.1:%d/" % port, "unit": "broken.service",
                                      "timeout": 120, "delay": 0.2})
    assert time.monotonic() - began < 20
    assert failure.value.result["msg"].startswith("broken.service is failed (SubState=failed)")
    assert "failing at start" in systemctl("--unit", "broken.service", program="journalctl").stdout

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-GPU harness's stand-in for systemd (benchmarks/real_gpu/systemd_standin.py).

It runs the unit the sglang_service role writes on a host without systemd: these check that it reads the unit
as systemd would (command-line quoting, the environment file), and runs, holds and stops it as the role expects,
with a real process and the role's own readiness check.
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

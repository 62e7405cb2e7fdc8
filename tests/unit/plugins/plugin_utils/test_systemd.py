# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd's quoting for the unit and environment files (the roles' templates check the argv systemd makes of
them: tests/unit/roles/test_sglang_service.py, test_sglang_router.py)."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import systemd


@pytest.mark.parametrize("value, written", [
    ("/opt/sglang/bin/python", "/opt/sglang/bin/python"),
    ("--tp-size", "--tp-size"),
    (8, "8"),
    (0.85, "0.85"),
    (True, "True"),
    ("", '""'),
    ("GLM 5", '"GLM 5"'),
    ("100%", '"100%%"'),
    ("$HOME", '"$$HOME"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("a\\b", '"a\\\\b"'),
    ("two\nlines", '"two\\nlines"'),
])
def test_a_word_goes_as_it_is_when_safe_and_quoted_and_escaped_otherwise(value, written):
    assert systemd.command_word(value) == written


def test_a_command_line_is_its_words_quoted():
    assert systemd.command_line(["/usr/bin/python3", "/opt/wait.py", "http://127.0.0.1:30000/health"]) == \
        "/usr/bin/python3 /opt/wait.py http://127.0.0.1:30000/health"
    assert systemd.command_line(["echo", "a b"]) == 'echo "a b"'


def test_exec_start_puts_each_flag_and_its_values_on_a_line_of_its_own():
    argv = ["--tp-size", "8", "--enable-metrics", "--dist-init-addr", "10.0.0.1:25000", "--served-model-name", "glm 5"]
    assert systemd.exec_start(argv, ["/opt/sglang/bin/python", "-m", "sglang.launch_server"]) == (
        "/opt/sglang/bin/python -m sglang.launch_server \\\n"
        "    --tp-size 8 \\\n"
        "    --enable-metrics \\\n"
        "    --dist-init-addr 10.0.0.1:25000 \\\n"
        '    --served-model-name "glm 5"')
    assert systemd.flag_lines(["p", "x", "--a", "1", "2", "--b"]) == [["p", "x"], ["--a", "1", "2"], ["--b"]]


@pytest.mark.parametrize("value, written", [
    ("0.5.23", "0.5.23"),
    ("", ""),
    ("a b", '"a b"'),
    ("$HOME", '"\\$HOME"'),
    ("`id`", '"\\`id\\`"'),
    ('"q"', '"\\"q\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("100%", '"100%"'),
])
def test_an_environment_value_escapes_what_systemd_would_read_otherwise(value, written):
    assert systemd.environment_value(value) == written


# ---- which files a running service is older than ---------------------------------------------------------------

def test_a_file_written_after_the_start_is_named_and_older_or_same_second_ones_are_not():
    # As systemctl and stat print them on Debian 12 (systemd 252), the environment rewritten by a run killed
    # before its restart.
    output = ("@1796293615\n"
              "1796293570 /etc/systemd/system/sglang-glm-5-nvfp4.service\n"
              "1796293702 /etc/sglang/glm-5-nvfp4.env\n"
              "1796293615 /etc/sglang/glm-5-nvfp4.yaml\n")
    assert systemd.written_since_start(output) == ["/etc/sglang/glm-5-nvfp4.env"]


def test_a_service_started_after_every_file_or_never_started_is_not_stale():
    assert systemd.written_since_start("@1796293615\n1796293570 /etc/a\n1796293600 /etc/b\n") == []
    # Never started: systemctl prints an empty value (or 0); nothing to restart, the role starts it.
    assert systemd.written_since_start("\n1796293570 /etc/a\n") == []
    assert systemd.written_since_start("0\n1796293570 /etc/a\n") == []
    assert systemd.written_since_start("") == []


def test_a_line_that_is_not_a_time_and_a_path_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"cannot read 'stat: cannot statx' as 'MTIME PATH'"):
        systemd.written_since_start("@1796293615\nstat: cannot statx")


# ---- whether it restarts, and why -------------------------------------------------------------------------------

STARTED_BEFORE_THE_ENV = ("@1796293615\n"
                          "1796293570 /etc/systemd/system/sglang-glm-5-nvfp4.service\n"
                          "1796293702 /etc/sglang/glm-5-nvfp4.env\n")
OLDER_FILES = "@1796293615\n1796293570 /etc/systemd/system/sglang-glm-5-nvfp4.service\n"


def test_a_write_of_this_run_restarts_it_and_the_write_asked_for_it():
    writes = [{"changed": False}, {"changed": True}, {"skipped": True, "changed": False}]
    assert systemd.restart_plan(OLDER_FILES, writes) == {
        "restart": True, "written": True, "stale": [], "stale_only": False}
    # Written now and newer than the start: the write's own notification restarts it; the role adds none.
    assert systemd.restart_plan(STARTED_BEFORE_THE_ENV, writes) == {
        "restart": True, "written": True, "stale": ["/etc/sglang/glm-5-nvfp4.env"], "stale_only": False}


def test_a_file_left_newer_by_a_stopped_run_restarts_it_alone():
    writes = [{"changed": False}, {"changed": False}, {"skipped": True}]
    assert systemd.restart_plan(STARTED_BEFORE_THE_ENV, writes) == {
        "restart": True, "written": False, "stale": ["/etc/sglang/glm-5-nvfp4.env"], "stale_only": True}


def test_nothing_written_and_nothing_newer_keeps_it_running():
    assert systemd.restart_plan(OLDER_FILES, [{"changed": False}]) == {
        "restart": False, "written": False, "stale": [], "stale_only": False}
    # A unit that never started is started by the role, not restarted for staleness.
    assert systemd.restart_plan("\n1796293570 /etc/a\n", []) == {
        "restart": False, "written": False, "stale": [], "stale_only": False}


def test_writes_that_are_not_a_list_are_refused():
    with pytest.raises(ValueError, match="the writes must be a list of registered results, got dict"):
        systemd.restart_plan(OLDER_FILES, {"changed": True})

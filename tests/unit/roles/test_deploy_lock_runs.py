# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two deploys against one host at once, with real ansible-playbook processes (local connection): the role
deploy_lock that playbooks/deploy.yml opens and closes with. The second run is refused naming the first; a killed
run's lock is taken over by the next run from the same controller; another controller's is refused until it is
broken on request; check mode takes nothing."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAYBOOK = """
- name: Take the deploy lock on every host of this run
  hosts: gpu_hosts
  gather_facts: false
  tags: [always]
  roles:
    - role: sm120.sglang.deploy_lock

- name: The deploy's work, here a wait for a file
  hosts: gpu_hosts
  gather_facts: false
  tasks:
    - name: Wait
      ansible.builtin.wait_for:
        path: "{{ go }}"
        timeout: 120

- name: Give the deploy lock back
  hosts: gpu_hosts
  gather_facts: false
  tags: [always]
  tasks:
    - name: Give this run's deploy lock back
      ansible.builtin.import_role:
        name: sm120.sglang.deploy_lock
        tasks_from: release
"""


def _setup(tmp_path):
    lock = tmp_path / "state" / "deploy.lock"
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"gpu_hosts": {"hosts": {"gpu1": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "deploy_lock_path": str(lock), "go": str(tmp_path / "go")}}}}))
    (tmp_path / "go").touch()  # runs pass their wait at once; the first of the test below waits for its own file
    return lock


def _argv(tmp_path, *extra):
    return [sys.executable, str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i",
            str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), *extra]


def _env(tmp_path):
    return dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
                ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")


def _run(tmp_path, *extra):
    done = subprocess.run(_argv(tmp_path, *extra), env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)
    return done.returncode, done.stdout + done.stderr


def _owner(lock):
    return json.loads((lock / "owner.json").read_text())


def test_a_second_deploy_is_refused_naming_the_first_and_a_killed_one_is_taken_over(tmp_path):
    lock = _setup(tmp_path)
    first = subprocess.Popen(_argv(tmp_path, "-e", "go=%s" % (tmp_path / "first-go")), env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (lock / "owner.json").exists():
            assert first.poll() is None and time.monotonic() < deadline, "the first run did not take the lock"
            time.sleep(0.2)
        assert _owner(lock)["pid"] == first.pid and _owner(lock)["controller"] == socket.gethostname()
        rc, out = _run(tmp_path)
        assert rc == 2, out
        assert "gpu1 is being deployed by another run: " in out and "(ansible-playbook pid %d, " % first.pid in out
        assert "run %s)" % _owner(lock)["run_id"] in " ".join(out.split())
        first.send_signal(signal.SIGKILL)  # a controller lost mid-run: its lock stays
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    killed = _owner(lock)
    rc, out = _run(tmp_path)
    assert rc == 0, out
    assert "Took over the deploy lock" in out and "its ansible-playbook (pid %d on" % killed["pid"] in out
    assert not lock.exists()


def test_another_controllers_lock_refuses_until_broken_and_check_mode_takes_nothing(tmp_path):
    lock = _setup(tmp_path)
    rc, out = _run(tmp_path, "--check")
    assert rc == 0 and not lock.exists(), out
    lock.mkdir(parents=True)
    elsewhere = {"run_id": "ops-box-9-%d" % time.time(), "controller": "ops-box", "user": "alice", "pid": 9,
                 "started": int(time.time()), "playbook": "deploy"}
    (lock / "owner.json").write_text(json.dumps(elsewhere))
    # As deploy.yml's plays: tagged always, so a run of some phases (--tags) is refused too.
    for extra in ((), ("--check",), ("--tags", "service")):
        rc, out = _run(tmp_path, *extra)
        assert rc == 2 and "gpu1 is being deployed by another run: alice@ops-box (ansible-playbook pid 9, " in out, out
        assert _owner(lock) == elsewhere
    rc, out = _run(tmp_path, "-e", "deploy_lock_break=true")
    assert rc == 0 and "broken on request (deploy_lock_break)" in out, out
    assert not lock.exists()


def test_the_deploy_playbook_opens_with_the_lock_and_closes_by_giving_it_back():
    plays = yaml.safe_load((ROOT / "playbooks" / "deploy.yml").read_text())
    # Before the lock only the input check, which reaches no host (tests/unit/plugins/plugin_utils/test_input_check.py).
    assert plays[0]["tasks"] == [{"name": "Check every input of the run",
                                  "ansible.builtin.import_tasks": "tasks/inputs.yml"}]
    first, last = plays[1], plays[-1]
    assert first["roles"] == [{"role": "sm120.sglang.deploy_lock"}] and first["tags"] == ["always"]
    assert last["tasks"][0]["ansible.builtin.import_role"] == {"name": "sm120.sglang.deploy_lock",
                                                               "tasks_from": "release"}
    assert last["tags"] == ["always"] and first["hosts"] == last["hosts"] == "gpu_hosts:router_hosts"

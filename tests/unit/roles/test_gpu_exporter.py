# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_exporter role without systemd: what it installs, the unit it writes run as systemd runs it, and the role
itself in check mode.

A real run needs systemd and a user of its own, which the unit stage has not (and must not make on this machine):
the unit is rendered by Ansible's Templar with the role's defaults and vars, the code laid out as the role lays it
out, and the unit started by the real-GPU harness's systemd stand-in (benchmarks/real_gpu/systemd_standin.py:
ExecStart as systemd splits it, as User= and Group=, in WorkingDirectory=) against the molecule nvidia-smi stand-in;
then ansible-playbook --check --diff runs the role and its rollback against this host with a local connection, and
must change nothing.
"""

from __future__ import annotations

import ast
import grp
import importlib.util
import os
import pathlib
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.sm120.sglang.plugins.plugin_utils.prometheus_config import scrape_config

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "gpu_exporter"
MODULE_UTILS = ROOT / "plugins" / "module_utils"
PACKAGE = "ansible_collections.sm120.sglang.plugins.module_utils"
SYSTEMD = ROOT / "benchmarks" / "real_gpu" / "systemd_standin.py"
NVIDIA_SMI = ROOT / "molecule" / "resources" / "nvidia-smi" / "nvidia_smi_standin.py"
CAPTURES = ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "gpu"
# The stand-in drops to the unit's user as systemd does; an unprivileged one every Debian has.
USER, GROUP = "nobody", "nogroup"


def _load(path):
    return yaml.safe_load(path.read_text())


def _role_vars():
    return _load(ROLE / "vars" / "main.yml")


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _templar(**inventory):
    loader = DataLoader()
    hostvars = {"gpu1": {"ansible_host": "10.0.0.11"}}
    variables = {"inventory_hostname": "gpu1", "hostvars": hostvars, "ansible_check_mode": False}
    variables.update(loader.load_from_file(str(ROLE / "defaults" / "main.yml"), trusted_as_template=True))
    variables.update(inventory)
    variables.update(loader.load_from_file(str(ROLE / "vars" / "main.yml"), trusted_as_template=True))
    return Templar(loader=loader, variables=variables)


def _render_unit(templar):
    text = (ROLE / "templates" / "sm120-gpu-exporter.service.j2").read_text()
    return templar.template(trust_as_template(text), escape_backslashes=False)


def _systemd():
    spec = importlib.util.spec_from_file_location("systemd_standin", SYSTEMD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _collection_imports(path):
    tree = ast.parse(path.read_text())
    return {node.module.rsplit(".", 1)[1] + ".py" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE + ".")}


# ---------------------------------------------------------------- what is installed

def test_the_role_installs_exactly_the_exporter_and_every_module_it_imports():
    wanted, todo = set(), ["gpu_exporter.py"]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo += sorted(_collection_imports(MODULE_UTILS / name))
    role = _role_vars()
    assert sorted(role["__gpu_exporter_sources"]) == sorted(wanted)
    assert role["__gpu_exporter_module"] == PACKAGE + ".gpu_exporter"
    assert role["__gpu_exporter_package"] == PACKAGE.replace(".", "/")
    dirs = role["__gpu_exporter_package_dirs"]
    assert dirs == ["/".join(PACKAGE.split(".")[:depth]) for depth in range(1, len(PACKAGE.split(".")) + 1)]


def test_the_unit_runs_the_exporter_with_the_venvs_python_on_the_address_prometheus_scrapes():
    unit = dict(_systemd().unit_lines(_render_unit(_templar())))
    assert _systemd().command_words(unit["ExecStart"]) == [
        "/opt/sglang/bin/python", "-m", PACKAGE + ".gpu_exporter", "--listen-address", "10.0.0.11", "--port", "9400",
        "--nvidia-smi", "nvidia-smi"]
    assert (unit["User"], unit["Group"], unit["WorkingDirectory"]) == (
        "sm120-gpu-exporter", "sm120-gpu-exporter", "/opt/sm120-gpu-exporter")
    assert (unit["Type"], unit["Restart"]) == ("exec", "on-failure")
    # NVML opens /dev/nvidia*: a private /dev would hide the GPUs.
    assert "PrivateDevices" not in unit and unit["NoNewPrivileges"] == "true"


def test_the_listen_address_follows_the_inventory_and_the_health_check_asks_loopback_for_any_address():
    templar = _templar(sglang_install_python="/srv/venv/bin/python", hostvars={"gpu1": {}}, gpu_exporter_port=9500)
    words = _systemd().command_words(dict(_systemd().unit_lines(_render_unit(templar)))["ExecStart"])
    assert words[0] == "/srv/venv/bin/python" and words[3:7] == ["--listen-address", "gpu1", "--port", "9500"]
    assert templar.template(trust_as_template("{{ __gpu_exporter_url }}")) == "http://gpu1:9500/metrics"
    anywhere = _templar(gpu_exporter_listen_address="0.0.0.0")
    assert anywhere.template(trust_as_template("{{ __gpu_exporter_url }}")) == "http://127.0.0.1:9400/metrics"


@pytest.mark.parametrize("own", [{"ansible_host": "10.0.0.11"}, {"ansible_host": "gpu1.example.org"},
                                 {"ansible_host": "fd00::11"}, {}])
def test_the_exporter_listens_on_the_very_address_the_prometheus_role_scrapes(own):
    hostvars = {"gpu1": own}
    scraped = scrape_config({"gpu_hosts": ["gpu1"]}, hostvars)["scrape_configs"][1]["static_configs"][0]["targets"][0]
    address = _templar(hostvars=hostvars).template(trust_as_template("{{ gpu_exporter_listen_address }}"))
    assert scraped.rsplit(":", 1)[0].strip("[]") == address


# ---------------------------------------------------------------- the unit, run as systemd runs it

@pytest.fixture
def host():
    """A directory every user may read (the unit runs as nobody), standing in for the host's / : the exporter's code
    as the role lays it out, the nvidia-smi stand-in with a copy of an RTX PRO 6000 x8 capture, and systemctl."""
    if os.geteuid() != 0:
        pytest.fail("the systemd stand-in runs the unit as its User=, which takes root; the unit stage runs as root")
    top = pathlib.Path(tempfile.mkdtemp(prefix="sm120-gpu-exporter-"))
    top.chmod(0o755)
    role = _role_vars()
    code = top / "opt" / "sm120-gpu-exporter"
    for directory in role["__gpu_exporter_package_dirs"]:
        (code / directory).mkdir(parents=True, exist_ok=True)
        (code / directory / "__init__.py").write_text("")
    for name in role["__gpu_exporter_sources"]:
        shutil.copyfile(MODULE_UTILS / name, code / role["__gpu_exporter_package"] / name)
    (top / "captures").mkdir()
    shutil.copytree(CAPTURES / "rtx-pro-6000-server-x8", top / "captures" / "rtx-pro-6000-server-x8")
    shutil.copyfile(NVIDIA_SMI, top / "nvidia_smi_standin.py")
    (top / "power").write_text("125 100\n")
    nvidia_smi = top / "nvidia-smi"
    nvidia_smi.write_text("#!/bin/sh\nNVIDIA_SMI_STANDIN_CAPTURES=%s NVIDIA_SMI_STANDIN_FIXTURE=rtx-pro-6000-server-x8 "
                          "NVIDIA_SMI_STANDIN_POWER_FILE=%s exec /usr/bin/python3 %s \"$@\"\n"
                          % (top / "captures", top / "power", top / "nvidia_smi_standin.py"))
    for path in [top, *top.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or path == nvidia_smi else 0o644)
    (top / "units").mkdir()
    yield top
    shutil.rmtree(top)


def _systemctl(top, *args):
    env = dict(os.environ, SYSTEMD_STANDIN_UNITS=str(top / "units"), SYSTEMD_STANDIN_STATE=str(top / "state"),
               SYSTEMD_STANDIN_LOGS=str(top / "logs"))
    return subprocess.run([sys.executable, str(SYSTEMD), *args], env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_unit_serves_every_gpu_at_metrics_as_its_user_from_the_code_the_role_lays_out(host):
    port = _free_port()
    templar = _templar(gpu_exporter_python="/usr/bin/python3", gpu_exporter_listen_address="127.0.0.1",
                       gpu_exporter_port=port, gpu_exporter_dir=str(host / "opt" / "sm120-gpu-exporter"),
                       gpu_exporter_user=USER, gpu_exporter_group=GROUP, gpu_exporter_nvidia_smi=str(host / "nvidia-smi"))
    (host / "units" / "sm120-gpu-exporter.service").write_text(_render_unit(templar))
    started = _systemctl(host, "systemctl", "start", "sm120-gpu-exporter.service")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        deadline, text = time.monotonic() + 30, None
        while text is None:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as answer:
                    text = answer.read().decode()
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(_systemctl(host, "journalctl", "-u", "sm120-gpu-exporter.service").stdout)
                time.sleep(0.3)
        power = re.findall(r'^DCGM_FI_DEV_POWER_USAGE\{gpu="(\d)",[^}]*\} (\S+)$', text, re.M)
        assert power == [(str(gpu), "125.0") for gpu in range(8)]
        pid = int(_systemctl(host, "systemctl", "show", "-p", "MainPID", "--value", "sm120-gpu-exporter.service")
                  .stdout.strip())
        assert os.stat("/proc/%d" % pid).st_uid == pwd.getpwnam(USER).pw_uid
        assert os.stat("/proc/%d" % pid).st_gid == grp.getgrnam(GROUP).gr_gid
    finally:
        _systemctl(host, "systemctl", "stop", "sm120-gpu-exporter.service")


def test_the_check_before_the_unit_changes_reads_the_gpus_as_the_role_runs_it(host):
    argv = _templar(gpu_exporter_python="/usr/bin/python3").template(trust_as_template("{{ __gpu_exporter_argv[:3] }}"))
    code = host / "opt" / "sm120-gpu-exporter"
    done = subprocess.run(["runuser", "-u", USER, "--", *argv, "--once", "--nvidia-smi", str(host / "nvidia-smi")],
                          cwd=code, capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    assert 'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="7"' in done.stdout
    # Without a GPU to read, it fails and says why: the role stops there, before the unit.
    (host / "captures" / "rtx-pro-6000-server-x8" / "query-gpu.csv").unlink()
    done = subprocess.run(["runuser", "-u", USER, "--", *argv, "--once", "--nvidia-smi", str(host / "nvidia-smi")],
                          cwd=code, capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 1 and "no GPU to read" in done.stderr


# ---------------------------------------------------------------- the role, in check mode

def _check_mode(tmp_path, tasks_from):
    code = tmp_path / "exporter"
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "The GPU exporter in check mode", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Run the role", "ansible.builtin.include_role": {
            "name": "sm120.sglang.gpu_exporter", "tasks_from": tasks_from}}]}], sort_keys=False))
    (tmp_path / "vars.yml").write_text(yaml.safe_dump({
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "gpu_exporter_dir": str(code), "gpu_exporter_user": "sm120-gpu-exporter-check",
        "gpu_exporter_group": "sm120-gpu-exporter-check", "gpu_exporter_python": sys.executable}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    done = subprocess.run([sys.executable, str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "--check",
                           "--diff", "-i", "localhost,", "-e", "@" + str(tmp_path / "vars.yml"),
                           str(tmp_path / "play.yml")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout + done.stderr, code


def _recap(output):
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", output.rsplit("PLAY RECAP", 1)[1])}


def test_check_mode_shows_the_unit_it_would_write_and_changes_nothing(tmp_path):
    code, output, directory = _check_mode(tmp_path, "main")
    assert code == 0, output[-4000:]
    recap = _recap(output)
    assert recap["failed"] == 0 and recap["changed"] > 0, recap
    # The diff of the unit, as a real run would write it: its address is this host's inventory name.
    exec_start = re.search(r"^\+ExecStart=(.*)$", output, re.M)
    assert exec_start, output[-4000:]
    assert _systemd().command_words(exec_start.group(1)) == [
        sys.executable, "-m", PACKAGE + ".gpu_exporter", "--listen-address", "localhost", "--port", "9400",
        "--nvidia-smi", "nvidia-smi"]
    assert "+User=sm120-gpu-exporter-check" in output
    # The read of the GPUs and the check of /metrics need what a real run makes: check mode skips them.
    for task in ("Read the GPUs once as the exporter's user", "Wait until /metrics serves every GPU's power"):
        assert re.search(r"TASK \[sm120\.sglang\.gpu_exporter : %s\] \**\nskipping: \[localhost\]" % re.escape(task),
                         output), (task, output[-4000:])
    assert not directory.exists()
    assert not pathlib.Path("/etc/systemd/system/sm120-gpu-exporter.service").exists()
    with pytest.raises(KeyError):
        pwd.getpwnam("sm120-gpu-exporter-check")


def test_the_rollback_in_check_mode_changes_nothing(tmp_path):
    code, output, directory = _check_mode(tmp_path, "rollback")
    assert code == 0, output[-4000:]
    assert _recap(output)["failed"] == 0
    assert "TASK [sm120.sglang.gpu_exporter : Remove the exporter's code]" in output
    assert not directory.exists()

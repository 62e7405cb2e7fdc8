# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one Ansible task costs on a container host, and where: the machine's CPU, the container's share of it, and
the import that dominates it; over the docker CLI connection and the Docker API connection side by side.

Why: CI runs the molecule scenarios on 2 cores kept about 92 % busy, so its time is the CPU its tasks cost
(docs/testing.md, "Where CI's time goes"). Each round runs one playbook of --tasks `command: true` module runs on two
systemd containers (Debian 12 and 13, the images scripts/setup.sh builds) over community.docker.docker (a `docker
exec` of the docker CLI per module run) and then over community.docker.docker_api (the Docker API from Ansible's
worker), both with pipelining, as the scenarios run. Printed per connection: the median over the rounds of the
machine's CPU seconds per module run (/proc/stat, everything the machine ran: controller, docker daemons, the
containers) and of the containers' part (their cgroups' CPU accounting, where it can be read), then the ratio
docker_api / docker. Then the import time of ansible.module_utils.basic inside a container, from the AnsiballZ file
of one module run kept on the host (python3 -X importtime): a zip import keeps no bytecode, so every run compiles it.

    bash scripts/setup.sh && .venv/bin/python benchmarks/task_cost.py [--rounds 3] [--tasks 35]

About a minute a round on 2 cores. Run it on an otherwise idle machine: the machine's CPU counts everything on it.
The containers are sm120-taskcost-1 and -2, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTS = {"sm120-taskcost-1": "localhost/sm120-systemd:bookworm", "sm120-taskcost-2": "localhost/sm120-systemd:trixie"}
CONNECTIONS = ("community.docker.docker", "community.docker.docker_api")
PLAYBOOK = """- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.command: "true"
      changed_when: false
      loop: "{{ range(%d) | list }}"
"""


def machine_cpu_s():
    """Busy CPU seconds of the whole machine since boot (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    return (sum(fields[:3]) + sum(fields[5:8])) / os.sysconf("SC_CLK_TCK")


def container_cpu_s(ids):
    """The containers' CPU seconds from their cgroups (v1 cpuacct or v2 cpu.stat), None where none can be read."""
    total = 0.0
    for cid in ids:
        for path, scale in (("/sys/fs/cgroup/cpuacct/docker/%s/cpuacct.usage" % cid, 1e-9),
                            ("/sys/fs/cgroup/system.slice/docker-%s.scope/cpu.stat" % cid, 1e-6)):
            try:
                with open(path) as handle:
                    text = handle.read()
            except OSError:
                continue
            match = re.search(r"usage_usec (\d+)", text) if path.endswith("cpu.stat") else re.match(r"(\d+)", text)
            total += int(match.group(1)) * scale
            break
        else:
            return None
    return total


def ansible_env(config):
    env = dict(os.environ, ANSIBLE_CONFIG=config, ANSIBLE_PIPELINING="1", ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3")
    env["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + env.get("PATH", "")
    return env


def run_round(connection, playbook, config, ids, tasks):
    before, inside = machine_cpu_s(), container_cpu_s(ids)
    started = time.monotonic()
    result = subprocess.run(["ansible-playbook", "-i", ",".join(HOSTS) + ",", "-c", connection, playbook],
                            env=ansible_env(config), capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if result.returncode != 0:
        sys.exit("ansible-playbook over %s failed (exit %d):\n%s" % (connection, result.returncode, result.stdout[-3000:]))
    after, inside_after = machine_cpu_s(), container_cpu_s(ids)
    runs = tasks * len(HOSTS)
    return {"wall": wall, "cpu": (after - before) / runs,
            "inside": (inside_after - inside) / runs if inside is not None and inside_after is not None else None}


def basic_import_ms(config):
    """Import time of ansible.module_utils.basic in a container, from a kept AnsiballZ file of one module run."""
    host = next(iter(HOSTS))
    env = dict(ansible_env(config), ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_PIPELINING="0")
    subprocess.run(["ansible", "-i", host + ",", "-c", "community.docker.docker", "all", "-m", "ansible.builtin.command",
                    "-a", "true"], env=env, capture_output=True, check=True)
    found = subprocess.run(["docker", "exec", host, "sh", "-c", "ls -t /root/.ansible/tmp/*/AnsiballZ_command.py | head -n 1"],
                           capture_output=True, text=True, check=True).stdout.strip()
    times = subprocess.run(["docker", "exec", host, "python3", "-X", "importtime", found],
                           capture_output=True, text=True, check=False).stderr
    match = re.search(r"import time:\s+\d+ \|\s+(\d+) \|\s+ansible\.module_utils\.basic$", times, re.M)
    return int(match.group(1)) / 1000 if match else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=35, help="module runs a host in each playbook")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="sm120-taskcost.")
    config, playbook = os.path.join(work, "ansible.cfg"), os.path.join(work, "tasks.yml")
    open(config, "w").close()
    with open(playbook, "w") as handle:
        handle.write(PLAYBOOK % args.tasks)
    ids = []
    try:
        for name, image in HOSTS.items():
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
            ids.append(subprocess.run(["docker", "run", "-d", "--name", name, image, "sleep", "infinity"],
                                      capture_output=True, text=True, check=True).stdout.strip())
        results = {connection: [] for connection in CONNECTIONS}
        for number in range(1, args.rounds + 1):
            for connection in CONNECTIONS:
                figures = run_round(connection, playbook, config, ids, args.tasks)
                results[connection].append(figures)
                print("round %d %-29s wall %5.1f s  machine CPU %.3f s a module run%s" % (
                    number, connection, figures["wall"], figures["cpu"],
                    ", %.3f s of it inside the containers" % figures["inside"] if figures["inside"] is not None else ""))
        medians = {}
        for connection, rounds in results.items():
            inside = [r["inside"] for r in rounds if r["inside"] is not None]
            medians[connection] = statistics.median(r["cpu"] for r in rounds)
            print("%-29s median machine CPU %.3f s a module run (rounds %s)%s" % (
                connection, medians[connection], ", ".join("%.3f" % r["cpu"] for r in rounds),
                "; inside the containers %.3f s" % statistics.median(inside) if inside else ""))
        print("ratio docker_api / docker: %.2f" % (medians[CONNECTIONS[1]] / medians[CONNECTIONS[0]]))
        imported = basic_import_ms(config)
        print("import of ansible.module_utils.basic in %s, from the module's zip: %s" % (
            next(iter(HOSTS)), "%.0f ms" % imported if imported is not None else "not found in -X importtime"))
    finally:
        subprocess.run(["docker", "rm", "-f"] + list(HOSTS), capture_output=True, check=False)


if __name__ == "__main__":
    main()

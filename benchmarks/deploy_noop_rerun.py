# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The no-op rerun of the whole deploy on fleets of 2 and 6 container hosts, side by side in one run.

What it measures: a rerun of `playbooks/deploy.yml` on hosts it has already deployed, where nothing is to
change (changed=0 on every host, checked), for each fleet size and each batch setting, the fleets' reruns
alternating round by round so that a slower minute of the machine falls on both. Printed per fleet and
setting: the wall time, the wall time per host, the controller's CPU seconds per host (ansible-playbook, its
forks and the docker CLI they start: less moved than wall time by what else the machine runs) and the tasks
per host (ok + skipped in the play recap); then the ratio of the per-host costs of the larger fleet to the
smaller. Below 1, a host costs less as hosts are added.

The hosts are systemd containers from the Debian 12 image scripts/setup.sh builds, prepared as the molecule
scenarios prepare theirs (molecule/resources/playbooks/prepare_gpu_host.yml: the nvidia-smi stand-in for the
GPUs, the real SGLang 0.5.23 wheel, the stand-in model server for the 400 GB model), with the local
inventory's group_vars and no experiment, so the rerun is the deploy's own cost: preflight, driver, install,
patches, service and the smoke test's measurement, which runs on every deploy.

Batch settings (--serial): "default" is the deploy's own, one canary host and then a quarter of the fleet at a
time ([1, "25%"]); "100%" is the whole fleet in one batch (-e sm120_rollout_serial=100%).

The smoke test (--smoke): "reuse" is the deploy's own, where a host whose server runs on unchanged takes its last
kept measurement (smoke_test_reuse, plugins/plugin_utils/measurement_reuse.py); "measure" measures it again, as every
rerun did before (-e smoke_test_reuse=false). With both, the ratio of their costs is printed per fleet.

Unchanged phases (--phases): "skip" is the deploy's own, where a phase whose inputs, files and units are as its last
run left them is skipped (sm120_skip_unchanged, module sm120.sglang.phase_stamp); "run" runs every phase, as every
rerun did before (-e sm120_skip_unchanged=false). With both, the ratio of their costs is printed per fleet.

    bash scripts/setup.sh && .venv/bin/python benchmarks/deploy_noop_rerun.py

Takes 15 to 25 minutes on 2 cores: the first deploy of 8 hosts, then the reruns. The containers are
sm120-bench-1 .. sm120-bench-N on the Docker network sm120-bench, removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE = "localhost/sm120-systemd:bookworm"
sys.path.insert(0, os.path.join(ROOT, "molecule", "resources"))
# The test hosts' options, one file (molecule/resources/container.yml).
import container_options  # noqa: E402  pylint: disable=wrong-import-position
NETWORK = "sm120-bench"
PREFIX = "sm120-bench-"
RECAP = re.compile(r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
                   r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)"
                   r"\s+ignored=(?P<ignored>\d+)", re.MULTILINE)
SERIAL = {"default": [], "100%": ["-e", "sm120_rollout_serial=100%"]}
SMOKE = {"reuse": [], "measure": ["-e", "smoke_test_reuse=false"]}
PHASES = {"skip": [], "run": ["-e", "sm120_skip_unchanged=false"]}


def fail(message):
    sys.exit("deploy_noop_rerun: %s" % message)


def sh(argv, **kwargs):
    return subprocess.run(argv, check=False, text=True, capture_output=True, **kwargs)


def start_hosts(names):
    if sh(["docker", "image", "inspect", IMAGE]).returncode != 0:
        fail("no image %s: run bash scripts/setup.sh first, it builds it" % IMAGE)
    if sh(["docker", "network", "inspect", NETWORK]).returncode != 0:
        sh(["docker", "network", "create", NETWORK])
    for name in names:
        sh(["docker", "rm", "-f", name])
        started = sh(["docker", "run", "-d", "--name", name, "--hostname", name, "--network", NETWORK,
                      *container_options.docker_run(IMAGE)])
        if started.returncode != 0:
            fail("docker run %s failed: %s" % (name, started.stderr.strip()))
    for name in names:
        state = ""
        for _attempt in range(60):
            state = sh(["docker", "exec", name, "systemctl", "is-system-running"]).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(1)
        else:
            fail("systemd in %s did not come up (state %r)" % (name, state))


def remove_hosts(names):
    for name in names:
        sh(["docker", "rm", "-f", name])


def write_inventory(directory, names):
    """A fleet of plain hosts: the local inventory's group_vars, SGLang 0.5.23, no gate and no tuning option."""
    os.makedirs(directory)
    shutil.copytree(os.path.join(ROOT, "inventories", "local", "group_vars"), os.path.join(directory, "group_vars"))
    lines = ["---", "all:", "  children:", "    gpu_hosts:", "      hosts:"]
    for name in names:
        lines += ["        %s:" % name, "          sglang_wheel_venvs: {/opt/sglang: \"0.5.23\"}"]
    lines += ["  vars:", "    ansible_connection: community.docker.docker",
              "    ansible_python_interpreter: /usr/bin/python3", ""]
    with open(os.path.join(directory, "hosts.yml"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines))
    return directory


def playbook(inventory, path, extra, reports, log):
    """Run one playbook; its wall time, the controller's CPU seconds and the recap per host."""
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(["ansible-playbook", "-i", inventory, path, "-e", "smoke_test_report_dir=%s" % reports]
                          + extra, cwd=ROOT, env=env, text=True, capture_output=True, check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(done.stdout + done.stderr)
    recap = {m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"}
             for m in RECAP.finditer(done.stdout)}
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.returncode, wall, cpu, recap


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", default="2,6", help="fleet sizes, comma-separated (2,6)")
    parser.add_argument("--serial", default="default,100%", help="batch settings: default, 100%% (both)")
    parser.add_argument("--rounds", type=int, default=2, help="reruns per fleet and setting, alternating (2)")
    parser.add_argument("--smoke", default="reuse", help="the smoke test: reuse, measure (reuse)")
    parser.add_argument("--phases", default="skip", help="unchanged phases: skip, run (skip)")
    parser.add_argument("--keep", action="store_true", help="leave the containers running")
    args = parser.parse_args()
    try:
        sizes = sorted({int(size) for size in args.hosts.split(",")})
    except ValueError:
        fail("--hosts takes fleet sizes such as 2,6, got %r" % args.hosts)
    chosen = {name: [value.strip() for value in getattr(args, name).split(",")] for name in ("serial", "smoke", "phases")}
    unknown = [value for name, table in (("serial", SERIAL), ("smoke", SMOKE), ("phases", PHASES))
               for value in chosen[name] if value not in table]
    if unknown or not sizes or sizes[0] < 1 or args.rounds < 1:
        fail("--serial takes default and 100%%, --smoke reuse and measure, --phases skip and run, --hosts sizes of 1 or "
             "more, --rounds 1 or more; got %r %r %r %r %r" % (args.serial, args.smoke, args.phases, args.hosts,
                                                               args.rounds))
    if not shutil.which("ansible-playbook"):
        fail("no ansible-playbook: run bash scripts/setup.sh and use .venv/bin/python")

    work = tempfile.mkdtemp(prefix="sm120-noop-rerun.")
    log = os.path.join(work, "ansible.log")
    fleets = {size: ["%s%d-%d" % (PREFIX, size, index) for index in range(1, size + 1)] for size in sizes}
    every = [name for names in fleets.values() for name in names]
    deploy = os.path.join(ROOT, "playbooks", "deploy.yml")
    prepare = os.path.join(ROOT, "molecule", "resources", "playbooks", "prepare_gpu_host.yml")
    print("work directory %s (the ansible output: %s)" % (work, log), flush=True)
    # Each setting: (batches, smoke test, unchanged phases).
    settings = [(serial, smoke, phases) for serial in chosen["serial"] for smoke in chosen["smoke"]
                for phases in chosen["phases"]]
    results = {(size, setting): [] for size in sizes for setting in settings}
    try:
        start_hosts(every)
        inventories = {size: write_inventory(os.path.join(work, "fleet-%d" % size), names)
                       for size, names in fleets.items()}
        for size in sizes:
            for path, extra in ((prepare, []), (deploy, SERIAL["100%"])):
                rc, wall = playbook(inventories[size], path, extra, os.path.join(work, "reports"), log)[:2]
                if rc != 0:
                    fail("%s on the fleet of %d failed (rc %d): see %s" % (os.path.basename(path), size, rc, log))
                print("fleet of %d: %s in %.0f s" % (size, os.path.basename(path), wall), flush=True)
        for round_index in range(args.rounds):
            for setting in settings:
                serial, smoke, phases = setting
                order = sizes if round_index % 2 == 0 else list(reversed(sizes))
                for size in order:
                    rc, wall, cpu, recap = playbook(inventories[size], deploy,
                                                    SERIAL[serial] + SMOKE[smoke] + PHASES[phases],
                                                    os.path.join(work, "reports"), log)
                    changed = sum(host["changed"] for host in recap.values())
                    if rc != 0 or sorted(recap) != sorted(fleets[size]) or changed:
                        fail("the rerun on the fleet of %d (%s, %s, %s) was no no-op: rc %d, changed %d, hosts %s; see "
                             "%s" % (size, serial, smoke, phases, rc, changed, sorted(recap), log))
                    tasks = statistics.mean(host["ok"] + host["skipped"] for host in recap.values())
                    results[(size, setting)].append((wall, cpu, tasks))
                    print("round %d, fleet of %d, serial %s, smoke %s, phases %s: %.1f s wall, %.1f s controller CPU, "
                          "%.0f tasks per host" % (round_index + 1, size, serial, smoke, phases, wall, cpu, tasks),
                          flush=True)
    finally:
        if not args.keep:
            remove_hosts(every)

    print("\n| hosts | batches | smoke test | unchanged phases | wall s | wall s per host | controller CPU s "
          "| controller CPU s per host | tasks per host | changed |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    whole = {}
    for setting in settings:
        for size in sizes:
            runs = results[(size, setting)]
            wall = statistics.median(run[0] for run in runs)
            cpu = statistics.median(run[1] for run in runs)
            tasks = statistics.median(run[2] for run in runs)
            whole[(size,) + setting] = (wall, cpu)
            print("| %d | %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.0f | 0 |" % (
                (size,) + setting + (wall, wall / size, cpu, cpu / size, tasks)))
    print()
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        for setting in settings:
            (large_wall, large_cpu), (small_wall, small_cpu) = whole[(large,) + setting], whole[(small,) + setting]
            print("batches %s, smoke %s, phases %s: per host, %d hosts cost %.2fx the wall time and %.2fx the "
                  "controller CPU of %d hosts" % (setting + (large, (large_wall / large) / (small_wall / small),
                                                             (large_cpu / large) / (small_cpu / small), small)))
    # One choice against the other, the rest the same: (name, index in a setting, this, against, what it is).
    for name, index, this, other, words in (
            ("smoke", 1, "reuse", "measure", "reusing the kept measurement costs %.2fx the wall time and %.2fx the "
                                             "controller CPU of measuring again"),
            ("phases", 2, "skip", "run", "skipping unchanged phases costs %.2fx the wall time and %.2fx the controller "
                                         "CPU of running them")):
        if this not in chosen[name] or other not in chosen[name]:
            continue
        for setting in settings:
            if setting[index] != this:
                continue
            against = setting[:index] + (other,) + setting[index + 1:]
            for size in sizes:
                mine, theirs = whole[(size,) + setting], whole[(size,) + against]
                print("fleet of %d, %s: %s" % (size, ", ".join(part for i, part in enumerate(setting) if i != index),
                                               words % (mine[0] / theirs[0], mine[1] / theirs[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller killed in the middle of a rolling deploy, again and again: each rerun must converge.

A test with real processes, run by hand (each trial is a partial rollout and a full one, a minute or two on two
cores; CI's 30 minutes have no room for twenty): against the fleet scenario's hosts (three GPU hosts behind the real
SGLang router on a fourth, over SSH), made by

    .venv/bin/molecule converge -s fleet
    .venv/bin/python tests/faults/controller_kill.py --trials 20
    .venv/bin/molecule destroy -s fleet

Each trial starts ``ansible-playbook playbooks/deploy.yml`` with a changed service environment (``-e round=N``), so
that every host is taken out of the router, restarted, measured and put back, batch by batch (canary first). It
kills the controller's whole process group at a random task of that rollout, as a closed laptop (SIGKILL) or a
dropped SSH session (SIGHUP) would, and notes where: which task, and whether a host was out of the router then.
With ``--while-out`` the kill comes only at a task where the whole rollout had a host out of the router (between
its drain and its restore: its restart, its health wait, its smoke test).
Then it reruns the same deploy to the end and checks what a user relies on:

- the rerun succeeds (the deploy lock of the killed run is taken over, not a reason to stop);
- every GPU host's unit is active with the new environment and answers /health;
- the router lists every GPU host as a worker, none left out, none twice;
- no host keeps a deploy lock;
- every file the controller keeps (verdicts, baselines, reports) parses, no temporary file is left beside them, and
  no baseline or verdict that existed before the trial is gone.

What stands in here: the GPU hosts are containers and their server is the stand-in of molecule/resources (no GPU
and no model can exist here); ansible-playbook, SSH, systemd and the router are real. Prints one line per trial
and a table at the end; exits 1 when any trial broke a rule.
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# molecule/fleet/molecule.yml: the hosts and their addresses on the scenario's network.
GPU_ADDRESSES = {"sm120-fleet-1": "172.28.7.11", "sm120-fleet-2": "172.28.7.12", "sm120-fleet-3": "172.28.7.13"}
GPU_HOSTS = tuple(GPU_ADDRESSES)
WORKER_URL = "http://%s:30000"
ROUTER = "sm120-fleet-router"
ROUTER_URL = "http://172.28.7.20:30000"
API_KEY = "fleet-key"
LOCK = "/var/lib/sm120-sglang/deploy.lock"
UNIT = "sglang-glm-5-nvfp4.service"  # sglang_service_profile's default
TASK = re.compile(r"^TASK \[(?P<name>[^\]]*)\]")
DRAIN = "Remove the worker from the router"
RESTORE = "Add the worker to the router"
SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGHUP": signal.SIGHUP}


def ephemeral_dir(scenario):
    """Molecule's directory of a scenario of this project, as molecule (26) names it."""
    from molecule.text import checksum  # pylint: disable=import-outside-toplevel
    if os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY"):
        return os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]
    return os.path.join(os.path.expanduser("~"), ".ansible", "tmp",
                        "molecule.%s.%s" % (checksum(os.path.basename(ROOT), 4), scenario))


def scenario_dir(scenario):
    """The scenario's molecule directory, or exit naming the command that makes it: molecule keeps the directory
    after a destroy, and its state.yml says whether the hosts are there and converged."""
    ephemeral = ephemeral_dir(scenario)
    state = os.path.join(ephemeral, "state.yml")
    converged = False
    if os.path.isfile(state):
        with open(state, encoding="utf-8") as handle:
            converged = bool(re.search(r"^converged: true$", handle.read(), re.M))
    if not converged:
        sys.exit("%s has no converged hosts: run `.venv/bin/molecule converge -s %s` first." % (ephemeral, scenario))
    return ephemeral


def report(record, json_path=None):
    """Print a fault script's record, write it where asked; the exit status: 1 when it names a problem."""
    print(json.dumps(record, indent=1))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=1)
    return 1 if record["problems"] else 0


def controller_env(ephemeral):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": os.path.join(ephemeral, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".collections"),
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "MOLECULE_EPHEMERAL_DIRECTORY": ephemeral,
    })
    return env


def deploy_argv(ephemeral, round_no):
    return [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"),
            "-i", os.path.join(ephemeral, "inventory"), os.path.join(ROOT, "playbooks", "deploy.yml"),
            "--skip-tags", "driver", "-e", "round=%s" % round_no]


def default_sighup():
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def run_killed(argv, env, kill_at_task, signame, log):
    """Start the deploy in a process group of its own; kill the group when task number kill_at_task starts."""
    started = time.monotonic()
    # With SIGHUP's default action: started in the background, this process may have inherited it ignored.
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=default_sighup)
    watch, where = RouterWatch(), None
    for line in proc.stdout:
        log.write(line)
        if watch.feed(line) and watch.tasks == kill_at_task:
            where = {"task": watch.tasks, "name": watch.current, "out_of_router": sorted(watch.drained),
                     "after_s": round(time.monotonic() - started, 1)}
            os.killpg(proc.pid, SIGNALS[signame])
            break
    proc.wait()
    rest = proc.stdout.read() if where else ""
    log.write(rest)
    return watch.tasks, where, proc.returncode


class RouterWatch:
    """Reads ansible-playbook's output line by line: the tasks begun, the current one, and the hosts out of the router
    (drained, not yet restored) as each task begins."""

    HOST = re.compile(r"^(?:changed|ok): \[(?P<host>[^\]\s]+)")

    def __init__(self):
        self.tasks, self.current, self.drained = 0, "", set()

    def feed(self, line):
        """True where the line begins a task."""
        match = TASK.match(line)
        if match:
            self.tasks, self.current = self.tasks + 1, match.group("name")
            return True
        done = self.HOST.match(line)
        if done and self.current.endswith(DRAIN):
            self.drained.add(done.group("host"))
        elif done and self.current.endswith(RESTORE):
            self.drained.discard(done.group("host"))
        return False


def out_of_router_tasks(output):
    """The task numbers of a whole rollout's output at whose start a host was out of the router (drained, not yet
    restored): where --while-out draws its kill points."""
    watch = RouterWatch()
    return [watch.tasks for line in output.splitlines() if watch.feed(line) and watch.drained]


def run_full(argv, env, log):
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)
    log.write(proc.stdout)
    tasks = sum(1 for line in proc.stdout.splitlines() if TASK.match(line))
    return proc.returncode, tasks, proc.stdout


def on_host(host, command):
    proc = subprocess.run(["docker", "exec", host, "sh", "-c", command], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    return proc.returncode, proc.stdout.strip()


def router_workers():
    request = urllib.request.Request(ROUTER_URL + "/workers", headers={"Authorization": "Bearer " + API_KEY})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer).get("workers", [])


def controller_files(ephemeral):
    """Every file the controller keeps: path -> its bytes."""
    files = {}
    for top in ("reports",):
        for dirpath, _dirnames, filenames in os.walk(os.path.join(ephemeral, top)):
            for filename in filenames:
                path = os.path.join(dirpath, filename)
                with open(path, "rb") as handle:
                    files[os.path.relpath(path, ephemeral)] = handle.read()
    return files


def check_files(before, after):
    problems = []
    for path, data in sorted(after.items()):
        name = os.path.basename(path)
        if name.startswith(".ansible_tmp") or name.endswith((".tmp", ".partial")) or name.startswith("tmp"):
            problems.append("a temporary file is left on the controller: %s" % path)
        elif path.endswith(".json"):
            try:
                json.loads(data)
            except ValueError as error:
                problems.append("%s does not parse (%s): half-written" % (path, error))
        elif path.endswith(".jsonl"):
            for number, line in enumerate(data.splitlines(), 1):
                try:
                    json.loads(line)
                except ValueError as error:
                    problems.append("%s line %d does not parse (%s)" % (path, number, error))
    for path in sorted(before):
        keeps = ("verdicts.json" in path or "/baselines/" in path)
        if keeps and path not in after:
            problems.append("%s existed before the trial and is gone" % path)
    verdicts = [p for p in before if p.endswith("verdicts.json")]
    for path in verdicts:
        if path in after:
            old, new = json.loads(before[path]), json.loads(after[path])
            lost = sorted(set(old) - set(new)) if isinstance(old, dict) and isinstance(new, dict) else []
            if lost:
                problems.append("%s lost its entries %s" % (path, lost))
    return problems


def check_hosts(round_no):
    problems = []
    for host in GPU_HOSTS + (ROUTER,):
        rc, _out = on_host(host, "test ! -e %s" % LOCK)
        if rc != 0:
            problems.append("%s still has a deploy lock at %s" % (host, LOCK))
    for host in GPU_HOSTS:
        rc, out = on_host(host, "systemctl is-active %s" % UNIT)
        if out != "active":
            problems.append("%s: %s is %s" % (host, UNIT, out or rc))
        # The running server's own environment, not only the unit's file.
        rc, out = on_host(host, "tr '\\0' '\\n' </proc/$(systemctl show -p MainPID --value %s)/environ" % UNIT)
        if "SGLANG_STANDIN_ROUND=%s" % round_no not in out.split():
            problems.append("%s does not run the environment of round %s" % (host, round_no))
        try:
            with urllib.request.urlopen(WORKER_URL % GPU_ADDRESSES[host] + "/health", timeout=10) as answer:
                status = answer.status
        except OSError as error:
            status = error
        if status != 200:
            problems.append("%s: /health answered %s" % (host, status))
    try:
        urls = sorted(worker.get("url", "") for worker in router_workers())
    except OSError as error:
        return problems + ["the router did not list its workers: %s" % error]
    want = sorted(WORKER_URL % address for address in GPU_ADDRESSES.values())
    named = sorted(re.sub(r"/+$", "", url) for url in urls)
    if named != want:
        problems.append("the router's workers are %s, not every GPU host once (%s)" % (named, want))
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="for the kill points (default: from the clock)")
    parser.add_argument("--scenario", default="fleet")
    parser.add_argument("--log", default="/tmp/sm120-controller-kill.log")
    parser.add_argument("--json", default=None, help="write every trial's record here")
    parser.add_argument("--while-out", action="store_true",
                        help="kill only at tasks where the whole rollout had a host out of the router")
    args = parser.parse_args(argv)
    ephemeral = scenario_dir(args.scenario)
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    env = controller_env(ephemeral)
    records = []
    with open(args.log, "w", encoding="utf-8") as log:
        base_round = 1000 + rng.randrange(1000)
        # The rollout's length in tasks, from one full run (also the state the first trial starts from).
        log.write("=== the rollout measured whole, round %d\n" % base_round)
        started = time.monotonic()
        rc, total, out = run_full(deploy_argv(ephemeral, base_round), env, log)
        windows = out_of_router_tasks(out)
        print("seed %d; a whole rollout: %d tasks, %.0f s, rc %d; a host out of the router at %d of them" % (
            seed, total, time.monotonic() - started, rc, len(windows)), flush=True)
        if rc != 0:
            sys.exit("the rollout failed before any kill (rc %d): see %s" % (rc, args.log))
        if args.while_out and not windows:
            sys.exit("the rollout took no host out of the router: is router_hosts empty? see %s" % args.log)
        # A trial whose run ended before its kill point (a rerun may have fewer tasks) kills nothing: it is reported
        # and not counted, so that --trials kills are made.
        trial = 0
        while sum(1 for record in records if record["killed_at"]) < args.trials:
            trial += 1
            round_no = base_round + trial
            signame = ("SIGKILL", "SIGHUP")[trial % 2]
            kill_at = rng.choice(windows) if args.while_out else rng.randint(2, total)
            before = controller_files(ephemeral)
            log.write("=== trial %d: round %d, %s at task %d\n" % (trial, round_no, signame, kill_at))
            seen, where, killed_rc = run_killed(deploy_argv(ephemeral, round_no), env, kill_at, signame, log)
            log.write("=== trial %d: rerun\n" % trial)
            started = time.monotonic()
            rerun_rc, _tasks, out = run_full(deploy_argv(ephemeral, round_no), env, log)
            rerun_s = time.monotonic() - started
            problems = [] if rerun_rc == 0 else ["the rerun failed (rc %d): %s" % (rerun_rc, out[-1500:])]
            problems += check_hosts(round_no) + check_files(before, controller_files(ephemeral))
            took_over = bool(re.search(r"TASK \[[^\]]*Say whose lock was taken over[^\n]*\n[^\n]*ok:", out))
            record = {"trial": trial, "signal": signame, "killed_at": where, "killed_rc": killed_rc,
                      "tasks_seen": seen, "rerun_rc": rerun_rc, "rerun_s": round(rerun_s, 1),
                      "lock_taken_over": took_over, "problems": problems}
            records.append(record)
            spot = where or {"task": seen, "name": "(the run ended first)", "out_of_router": []}
            print("trial %2d  %-7s task %3d/%d %-60.60s out of router: %-14s rerun rc %d %4.0f s  %s" % (
                trial, signame, spot["task"], total, spot["name"], ",".join(spot["out_of_router"]) or "-",
                rerun_rc, rerun_s, "ok" if not problems else "BROKEN: " + "; ".join(problems)), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"seed": seed, "tasks": total, "trials": records}, handle, indent=1)
    broken = [r for r in records if r["problems"]]
    drained = sum(1 for r in records if r["killed_at"] and r["killed_at"]["out_of_router"])
    print("%d trials (seed %d), %d of them killed: %d with a host out of the router at the kill; %d broke a rule"
          % (len(records), seed, sum(1 for r in records if r["killed_at"]), drained, len(broken)))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

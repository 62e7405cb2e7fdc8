# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A GPU host that stops answering in the middle of a rolling deploy, with a client going through the router.

Run by hand against the fleet scenario's hosts, as tests/faults/controller_kill.py is:

    .venv/bin/molecule converge -s fleet
    .venv/bin/python tests/faults/dead_host.py
    .venv/bin/molecule destroy -s fleet

A rolling deploy restarts every server (``-e round=N``), batch by batch: sm120-fleet-1 (the canary), then
sm120-fleet-2, then sm120-fleet-3. When sm120-fleet-2's batch begins, while it is still a worker of the router,
the host is cut off the network (``docker network disconnect``: no answer at all, as a host that lost power or its
link). A client sends one completion at a time through the router the whole time. Checks:

- the rollout stops at that host, naming it unreachable, within --stop-within seconds; sm120-fleet-3 is not
  touched (its batch never starts);
- the router keeps serving from the others: of the client's requests sent after the router's health check had time
  to notice (--notice seconds after the cut), none fails;
- once the host is back on the network, a rerun of the same deploy completes, and every check of
  controller_kill.py holds (units, environment, /health, the router's workers, locks, controller files).

What stands in: the hosts are containers and their server the stand-in of molecule/resources; ansible-playbook,
SSH, systemd and the router are real. Exits 1 when a check fails.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import controller_kill as fleet  # noqa: E402  pylint: disable=wrong-import-position

NETWORK = "sm120-fleet"
VICTIM = "sm120-fleet-2"
UNTOUCHED = "sm120-fleet-3"
BATCH = re.compile(r"^PLAY \[Deploy, batch by batch\]")


def rollout_with_a_dead_host(argv, env, log, stop_within):
    """Run the deploy; cut VICTIM off the network at the first task of its batch. Returns (rc, output, cut_at)."""
    proc = subprocess.Popen(argv, cwd=fleet.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    batches, cut_at, lines, watchdog = 0, None, [], None
    timed_out = []

    def give_up():
        timed_out.append(True)
        os.killpg(proc.pid, signal.SIGKILL)

    for line in proc.stdout:
        log.write(line)
        lines.append(line)
        if BATCH.match(line):
            batches += 1
        if cut_at is None and batches == 2 and fleet.TASK.match(line):
            subprocess.run(["docker", "network", "disconnect", "--force", NETWORK, VICTIM], check=True)
            cut_at = time.time()
            # A hung run prints nothing: a timer, not the next line, ends the wait.
            watchdog = threading.Timer(stop_within, give_up)
            watchdog.start()
            log.write("=== %s cut off %s at %s\n" % (VICTIM, NETWORK, time.strftime("%H:%M:%S")))
    proc.wait()
    if watchdog:
        watchdog.cancel()
    if timed_out:
        log.write("=== the rollout did not stop within %d s of the cut: killed\n" % stop_within)
    return proc.returncode, "".join(lines), cut_at, bool(timed_out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 3)[2])
    parser.add_argument("--scenario", default="fleet")
    parser.add_argument("--stop-within", type=int, default=300,
                        help="seconds the rollout may take to stop after the cut (default 300)")
    parser.add_argument("--notice", type=float, default=10.0,
                        help="seconds the router may take to stop routing to the dead host (default 10)")
    parser.add_argument("--log", default="/tmp/sm120-dead-host.log")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    ephemeral = fleet.scenario_dir(args.scenario)
    env = fleet.controller_env(ephemeral)
    round_no = 3000 + int(time.time()) % 1000
    client_dir = os.path.join(ephemeral, "dead-host-client")
    os.makedirs(client_dir, exist_ok=True)
    stop_file, result_file = os.path.join(client_dir, "stop"), os.path.join(client_dir, "result.json")
    for path in (stop_file, result_file):
        if os.path.exists(path):
            os.remove(path)
    client = subprocess.Popen([sys.executable, os.path.join(fleet.ROOT, "molecule", "fleet", "router_client.py"),
                               fleet.ROUTER_URL, fleet.API_KEY, stop_file, result_file, "--log-every-request"])
    problems, record = [], {"round": round_no, "victim": VICTIM}
    with open(args.log, "w", encoding="utf-8") as log:
        started = time.monotonic()
        deploy = fleet.deploy_argv(ephemeral, round_no)
        rc, out, cut_at, hung = rollout_with_a_dead_host(deploy, env, log, args.stop_within)
        stopped_at = time.time()
        record.update({"rollout_rc": rc, "rollout_s": round(time.monotonic() - started, 1), "hung": hung,
                       "stopped_after_cut_s": round(stopped_at - cut_at, 1) if cut_at else None})
        if hung:
            problems.append("the rollout still ran %d s after %s stopped answering" % (args.stop_within, VICTIM))
        if cut_at is None:
            problems.append("the rollout never reached %s's batch" % VICTIM)
        named = re.search(r"(?:fatal|UNREACHABLE).{0,40}\[%s\]|\[%s\].{0,40}UNREACHABLE" % (VICTIM, VICTIM), out)
        recap = re.search(r"%s\s+:\s+ok=\d+\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)" % VICTIM, out)
        record["named"] = bool(named)
        if rc == 0 or not named or not recap or recap.group(1) == "0" and recap.group(2) == "0":
            problems.append("the rollout did not stop naming %s (rc %s)" % (VICTIM, rc))
        if re.search(r"\[%s\]" % UNTOUCHED, out.split("PLAY [Deploy, batch by batch]", 3)[-1]) and out.count(
                "PLAY [Deploy, batch by batch]") >= 3:
            problems.append("%s's batch ran after the dead host" % UNTOUCHED)
        # The client through the router, while the host is dead and the others serve.
        time.sleep(max(0.0, args.notice + 5 - (time.time() - (cut_at or time.time()))))
        with open(stop_file, "w", encoding="utf-8"):
            pass
        client.wait(timeout=120)
        with open(result_file, encoding="utf-8") as handle:
            seen = json.load(handle)
        after = [r for r in seen.get("requests", []) if cut_at and r["sent"] > cut_at + args.notice]
        failed_after = [r for r in after if not r["ok"]]
        during = [r for r in seen.get("requests", []) if cut_at and cut_at <= r["sent"] <= cut_at + args.notice]
        record.update({"client_ok": seen["ok"], "client_failed": seen["failed"],
                       "failed_within_notice": sum(1 for r in during if not r["ok"]),
                       "sent_after_notice": len(after), "failed_after_notice": len(failed_after)})
        if not after:
            problems.append("the client sent nothing after the router's notice time")
        if failed_after:
            problems.append("%d requests through the router failed after it had %s s to notice: %s"
                            % (len(failed_after), args.notice, failed_after[:3]))
        # Back on the network, a rerun completes.
        subprocess.run(["docker", "network", "connect", "--ip", fleet.GPU_ADDRESSES[VICTIM], NETWORK, VICTIM],
                       check=True)
        log.write("=== %s back on %s; the rerun\n" % (VICTIM, NETWORK))
        rerun_rc, _tasks, rerun_out = fleet.run_full(fleet.deploy_argv(ephemeral, round_no), env, log)
        record["rerun_rc"] = rerun_rc
        if rerun_rc != 0:
            problems.append("the rerun failed (rc %d): %s" % (rerun_rc, rerun_out[-1500:]))
        problems += fleet.check_hosts(round_no)
    record["problems"] = problems
    return fleet.report(record, args.json)


if __name__ == "__main__":
    sys.exit(main())

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model's source host dying in the middle of the spread: the rerun resumes from what was verified.

Run by hand against the model scenario's hosts (three GPU hosts and a stand-in Hugging Face Hub; no model of
410 GB and no hub can be reached here), as the other scripts of tests/faults are:

    .venv/bin/molecule converge -s model
    .venv/bin/python tests/faults/model_source_dies.py
    .venv/bin/molecule destroy -s model

``deploy.yml --tags model`` puts a model into a new directory on every host, in the default batches: the canary
(sm120-model-1) fetches it from the hub, then sm120-model-2 takes it from sm120-model-1 over rsync. Once
sm120-model-2 has taken its first file, sm120-model-1 is cut off the network (``docker network disconnect``: its
share stops answering, as a source host that died). Checks:

- the run fails on sm120-model-2 naming the source, what came and what did not, and nothing is moved into the
  model directory there (only the .partial one);
- what it had taken and verified is kept in the .partial directory;
- with the source back, a rerun completes: the model is in place on every host, the same bytes as the source's,
  and each file kept before the rerun is the same file (same inode: not taken again).

Then the controller killed in the middle of the spread (SIGKILL of ``ansible-playbook``'s process group once
sm120-model-2 has taken its first file, into yet another directory): the rerun completes on every host, and no
share is left open on the source afterwards.

Prints a JSON record; exits 1 when a check fails.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import controller_kill as fleet  # noqa: E402  pylint: disable=wrong-import-position

NETWORK = "sm120-model"
SOURCE, SOURCE_ADDRESS = "sm120-model-1", "172.28.8.11"
TAKER = "sm120-model-2"
HOSTS = ("sm120-model-1", "sm120-model-2", "sm120-model-3")
TAKEN = re.compile(r"^changed: \[%s\] => \(item=(?P<file>\S+)" % TAKER)


def files_of(host, directory):
    """path -> (inode, sha256) of every file under directory on host, but the hf CLI's download records
    (.cache/huggingface, which it keeps in the directory it downloads to, on the source alone)."""
    rc, out = fleet.on_host(host, "cd %s 2>/dev/null && find . -path ./.cache -prune -o -type f -printf '%%i %%P\\n' | "
                            "while read -r inode path; "
                            "do echo \"$inode $(sha256sum \"$path\" | cut -c1-64) $path\"; done" % directory)
    found = {}
    for line in out.splitlines() if rc == 0 else []:
        inode, digest, path = line.split(" ", 2)
        found[path] = (inode, digest)
    return found


SHARE_UNIT = "sm120-model-share.service"  # roles/sglang_service/vars/main.yml


def model_argv(ephemeral, model):
    return [os.path.join(fleet.ROOT, ".venv", "bin", "ansible-playbook"), "-i", os.path.join(ephemeral, "inventory"),
            os.path.join(fleet.ROOT, "playbooks", "deploy.yml"), "--tags", "model",
            "-e", "sglang_service_model_path=%s" % model]


def same_bytes_everywhere(model):
    """The problems of the hosts' copies of model against the source's."""
    problems = []
    source = {path: digest for path, (_inode, digest) in files_of(SOURCE, model).items()}
    for host in HOSTS:
        there = {path: digest for path, (_inode, digest) in files_of(host, model).items()}
        if not there or there != source:
            problems.append("%s does not hold the source's bytes at %s" % (host, model))
        if fleet.on_host(host, "test -e %s.partial" % model)[0] == 0:
            problems.append("%s still has %s.partial" % (host, model))
    return problems


def controller_killed_mid_spread(ephemeral, env, log):
    """Kill the controller once TAKER has taken a file; rerun; the record of what was found."""
    model = "/srv/models/killed-%d" % (int(time.time()) % 100000)
    argv = model_argv(ephemeral, model)
    proc = subprocess.Popen(argv, cwd=fleet.ROOT, env=env, stdout=subprocess.PIPE,  # pylint: disable=consider-using-with
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    killed = None
    for line in proc.stdout:
        log.write(line)
        taken = TAKEN.match(line)
        if taken:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = taken.group("file")
            log.write("=== the controller killed once %s had taken %s\n" % (TAKER, killed))
            break
    proc.wait()
    record = {"model": model, "killed_after": killed,
              "share_left_open": fleet.on_host(SOURCE, "systemctl is-active %s" % SHARE_UNIT)[1] == "active"}
    log.write("=== the rerun after the kill\n")
    rerun_rc, _tasks, out = fleet.run_full(argv, env, log)
    record["rerun_rc"] = rerun_rc
    problems = [] if killed else ["%s never took a file: the controller was not killed mid-spread" % TAKER]
    if rerun_rc != 0:
        failure = re.search(r"fatal: \[[^\]]+\][^\n]*\n?[^\n]*", out)
        problems.append("the rerun after the kill failed (rc %d): %s" % (rerun_rc, failure.group(0)[:600] if failure
                                                                         else out[-800:]))
    problems += same_bytes_everywhere(model)
    if fleet.on_host(SOURCE, "systemctl is-active %s" % SHARE_UNIT)[1] == "active":
        problems.append("%s is still sharing the model after the rerun (%s active)" % (SOURCE, SHARE_UNIT))
    record["problems"] = problems
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 3)[2])
    parser.add_argument("--scenario", default="model")
    parser.add_argument("--log", default="/tmp/sm120-model-source-dies.log")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    ephemeral = fleet.scenario_dir(args.scenario)
    env = fleet.controller_env(ephemeral)
    model = "/srv/models/source-dies-%d" % (int(time.time()) % 100000)
    argv = model_argv(ephemeral, model)
    problems, record = [], {"model": model}
    with open(args.log, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(argv, cwd=fleet.ROOT, env=env, stdout=subprocess.PIPE,  # pylint: disable=consider-using-with
                                stderr=subprocess.STDOUT, text=True)
        cut, out = None, []
        for line in proc.stdout:
            log.write(line)
            out.append(line)
            taken = TAKEN.match(line)
            if taken and cut is None:
                subprocess.run(["docker", "network", "disconnect", "--force", NETWORK, SOURCE], check=True)
                cut = taken.group("file")
                log.write("=== %s cut off %s once %s had taken %s\n" % (SOURCE, NETWORK, TAKER, cut))
        proc.wait()
        output = "".join(out)
        record.update({"first_run_rc": proc.returncode, "cut_after": cut})
        try:
            if cut is None:
                problems.append("%s never took a file from %s: nothing was cut" % (TAKER, SOURCE))
            if proc.returncode == 0:
                problems.append("the run succeeded although its source died")
            recap = re.search(r"%s\s+:\s+ok=\d+\s+changed=\d+\s+unreachable=\d+\s+failed=(\d+)" % TAKER, output)
            if not recap or recap.group(1) == "0":
                problems.append("%s did not fail" % TAKER)
            failure = re.search(r"%s took \d+ of \d+ files from %s \([^)]*\) and could not take .*? another host that has the model\." % (TAKER, SOURCE),
                                output)
            record["failure"] = failure.group(0) if failure else None
            if not failure:
                problems.append("the failure does not say what %s took from %s and what not" % (TAKER, SOURCE))
            in_place = fleet.on_host(TAKER, "test -e %s" % model)[0] == 0
            kept = files_of(TAKER, model + ".partial")
            source = files_of(SOURCE, model)
            verified = sorted(path for path, (_inode, digest) in kept.items()
                              if path in source and source[path][1] == digest)
            record.update({"in_place_after_failure": in_place, "kept": sorted(kept), "kept_verified": verified})
            if in_place:
                problems.append("%s has %s in place after a failed transfer" % (TAKER, model))
            if cut not in verified:
                problems.append("%s, taken before the cut, is not kept verified in %s.partial: %s"
                                % (cut, model, sorted(kept)))
        finally:
            subprocess.run(["docker", "network", "connect", "--ip", SOURCE_ADDRESS, NETWORK, SOURCE], check=True)
        log.write("=== %s back on %s; the rerun\n" % (SOURCE, NETWORK))
        rerun_rc, _tasks, _out = fleet.run_full(argv, env, log)
        record["rerun_rc"] = rerun_rc
        if rerun_rc != 0:
            problems.append("the rerun failed (rc %d): see %s" % (rerun_rc, args.log))
        problems += same_bytes_everywhere(model)
        after = files_of(TAKER, model)
        taken_again = sorted(path for path in verified if after.get(path, (None,))[0] != kept[path][0])
        record["taken_again_of_the_kept"] = taken_again
        if taken_again:
            problems.append("the rerun took again what was verified: %s" % taken_again)
        killed = controller_killed_mid_spread(ephemeral, env, log)
    record["controller_killed_mid_spread"] = killed
    record["problems"] = problems + killed["problems"]
    return fleet.report(record, args.json)


if __name__ == "__main__":
    sys.exit(main())

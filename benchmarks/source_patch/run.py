"""source_patch against ansible.builtin.replace/lineinfile, side by side in one run.

The same three fusion-gate edits of SGLang 0.5.9's real communicator.py, on the
same container host (a local systemd container standing in for a GPU host),
once by one sm120.sglang.source_patch task and once by the equivalent
replace/lineinfile tasks. Each variant runs as its own ansible-playbook, fresh
file each round, alternating, ROUNDS times: the apply, then the no-op rerun.
Prints median wall times and the ratio builtin/source_patch (>1: source_patch
is faster), and checks both produce the same bytes.

    bash scripts/setup.sh && .venv/bin/python benchmarks/source_patch/run.py [ROUNDS]
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "molecule", "resources"))
# The test hosts' options, one file (molecule/resources/container.yml).
import container_options  # noqa: E402  pylint: disable=wrong-import-position
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
HOST = "sm120-bench-source-patch"
IMAGE = "localhost/sm120-systemd:bookworm"
RELEASE = "0.5.9"
COMMUNICATOR = "sglang/srt/layers/communicator.py"


def sh(*argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs).stdout


def real_communicator():
    cache = os.path.join(ROOT, ".cache", "wheels")
    os.makedirs(cache, exist_ok=True)
    wheel = os.path.join(cache, "sglang-%s-py3-none-any.whl" % RELEASE)
    if not os.path.exists(wheel):
        sh(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", cache, "sglang==%s" % RELEASE)
    return zipfile.ZipFile(wheel).read(COMMUNICATOR)


def fusion_edits():
    """The fusion gate's communicator.py edits for the release, from the collection's release data."""
    sys.path.insert(0, os.path.join(ROOT, ".collections"))
    from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases

    entry = sglang_releases.gate_entry(sglang_releases.load(), "flashinfer_allreduce_fusion", RELEASE)
    return next(file_entry for file_entry in entry["files"] if file_entry["path"] == COMMUNICATOR)["edits"]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ["PATH"], ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_FORCE_COLOR="0")
    subprocess.run(["docker", "rm", "-f", HOST], capture_output=True, check=False)
    sh("docker", "run", "-d", "--name", HOST, *container_options.docker_run(IMAGE))
    try:
        with tempfile.TemporaryDirectory() as work:
            source = os.path.join(work, "communicator.py")
            with open(source, "wb") as handle:
                handle.write(real_communicator())
            inventory = os.path.join(work, "hosts.yml")
            with open(inventory, "w") as handle:
                yaml.safe_dump({"all": {"children": {"bench": {"hosts": {HOST: {}}, "vars": {
                    "ansible_connection": "community.docker.docker",
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "bench_edits": fusion_edits()}}}}}, handle)
            times = {("source_patch", "apply"): [], ("source_patch", "rerun"): [],
                     ("builtin", "apply"): [], ("builtin", "rerun"): []}

            def playbook(variant):
                started = time.perf_counter()
                out = sh("ansible-playbook", "-i", inventory, os.path.join(HERE, "apply_with_%s.yml" % variant), env=env)
                return time.perf_counter() - started, out

            for _round in range(rounds):
                for variant in ("source_patch", "builtin"):
                    sh("docker", "exec", HOST, "mkdir", "-p", "/srv/bench/%s" % variant)
                    sh("docker", "cp", source, "%s:/srv/bench/%s/communicator.py" % (HOST, variant))
                    elapsed, out = playbook(variant)
                    assert "changed=" in out and "changed=0" not in out, out
                    times[(variant, "apply")].append(elapsed)
                    elapsed, out = playbook(variant)
                    assert "changed=0" in out, out
                    times[(variant, "rerun")].append(elapsed)
            sums = sh("docker", "exec", HOST, "sha256sum", "/srv/bench/source_patch/communicator.py",
                      "/srv/bench/builtin/communicator.py").split()
            same = sums[0] == sums[2]
    finally:
        subprocess.run(["docker", "rm", "-f", HOST], capture_output=True, check=False)

    print("SGLang %s %s, 3 edits, %d rounds, median wall time of one ansible-playbook run" % (RELEASE, COMMUNICATOR, rounds))
    print("%-10s %14s %14s %10s" % ("step", "source_patch", "replace+lineinfile", "ratio"))
    for step in ("apply", "rerun"):
        ours = statistics.median(times[("source_patch", step)])
        theirs = statistics.median(times[("builtin", step)])
        print("%-10s %13.3fs %17.3fs %9.2fx" % (step, ours, theirs, theirs / ours))
    print("same bytes from both: %s" % ("yes" if same else "NO"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-GPU harness on the H200 host: the collection in front of a real SGLang server, measured.

Run from the repository root on the device machine, the same command in every call:

    python3 benchmarks/real_gpu/host.py go --budget 560

The first call starts the whole run in the background (a session of its own, so it outlives the call while
the machine stays warm) and follows it for --budget seconds; each later call follows it further; the call in
which it ends packs the results into $OUT. A call that finds a fresh machine starts again from the beginning.
Every call also leaves what is there so far in $OUT, so a machine lost mid-run still gives its partial results.

The phases, each timed, each logged; one that fails is recorded and the phases that need it are skipped:

  setup        unpack .real-gpu/site.tar.xz (benchmarks/real_gpu/build_carry.py) into /opt/sm120-real/site; a
               python wrapper that puts it on the path (the service's "venv"); systemctl and journalctl from
               systemd_standin.py where the host has no systemd. Before it, ``go`` copies the checkout to
               /opt/sm120-real/collections/ansible_collections/sm120/sglang, the collection sm120.sglang as
               installed, and the run is that copy's: the device tool lays the checkout anew at every call
  model        make_model.py: the Llama of random weights and its tokenizer
  deploy       ansible-playbook playbooks/deploy.yml --tags preflight,service,smoke against inventory/ (local
               connection): the preflight reads the GPU, sglang_service renders and starts the profile
               llama-1b-random, the smoke test measures its loads
  compare      compare_clients.py: serving_benchmark and sglang.bench_serving side by side, /metrics the third
  cause        trace_gpu.py: the cause verdict against a fine NVML trace, underfed and saturated
  crash        a start whose server dies after loading (--mem-fraction-static 0.01): the playbook's time to fail,
               against its health timeout (not in a plain run: --only model,crash)
  parity       the parity prompts at temperature 0, before and after a restart of one configuration
  noise        A/A: SM120_REAL_NOISE_ROUNDS (4) rounds of every load with the smoke test's own measurement, raw
               timings kept, a restart of the same configuration, as many rounds again (noise.py; not in a plain
               run: --only ...,noise)
  captures     the host's P2P facts as gpu_facts reads them (nvidia-smi topo -p2p, -q -d MEMORY, lspci -vvv, the
               kernel command line, IOMMU groups, uvm_disable_hmm, the driver's params, ASPM) in results/captures
               (not in a plain run: --only captures,...)
  drift        drift.py: the deployed server for minutes at the highest loads, plain, flushed and two-client runs,
               then a start with --disable-radix-cache, nvidia-smi and /metrics recorded beside every run (not in a
               plain run: --only model,deploy,drift; benchmarks/drift_causes.py reads it)
  experiments  the same playbook with two tuning options: the smoke test decides them on real restarts
  rerun        the experiments' playbook again, its phases chosen by --skip-tags rather than named: nothing
               changed, so the smoke test takes the measurement the experiments phase kept (smoke_test_reuse)
  speculative  speculative decoding on the real server, each start measured by the smoke test: without it, with
               --max-running-requests left to SGLang (which resets it to 48), and with it at the highest load;
               also steps-4, --num-continuous-decode-steps 4 without drafting; /server_info of each start (not in
               a plain run: --only ...,speculative)
  glm5         GLM-5's architecture (glm5_arch.py): a scaled-down GlmMoeDsaForCausalLM of random weights started by
               SGLang once per start SM120_REAL_GLM5_STARTS names (the profile's flags, MTP steps, MoE runners), each
               given SM120_REAL_GLM5_LIMIT s to answer: the start-up timeline, /server_info, the profile's loads
               measured (not in a plain run: --only glm5)
  summary      summary.md from the results

Results go to /var/tmp/sm120-real/results (then $OUT/results.tar.gz, $OUT/summary.md, $OUT/harness.log).

For a short session, variables narrow a run: SM120_REAL_DEPLOY_TAGS (the deploy's tags, e.g.
``preflight,service`` to start the server without the smoke test), SM120_REAL_COMPARE_LOADS (the loads the
clients are compared at, e.g. ``c64``), SM120_REAL_COMPARE_REPEATS (rounds a load, 3 unless set) and
SM120_REAL_COMPARE_TOOLS (compare_clients.py's --tools), SM120_REAL_SPECULATIVE_STARTS (the speculative phase's
starts, e.g. ``spec-unset,spec-off``), SM120_REAL_SMOKE_REPEATS (the smoke test's rounds a load, the inventory's 3
unless set), SM120_REAL_TUNING (the tuning options the experiments and rerun phases add, comma-separated, e.g. the
steps of the stepped knob ``continuous_decode_steps_2,continuous_decode_steps_4,continuous_decode_steps_8``;
``cuda_graph_max_bs_128,max_running_requests_64`` unless set). Another variable picks the model:
SM120_REAL_PROFILE=llama-8b-random makes and serves a 5.8 B Llama (32 layers, hidden 4,096), whose decode the GPU
limits rather than the server's host side; SM120_REAL_PROFILE=glm5-arch-random GLM-5's architecture scaled down
(glm5_arch.py) at the production profile's flags and loads, so that the deploy and the experiments (e.g.
SM120_REAL_TUNING=mtp_nextn_1_2,mtp_nextn_2_3,mtp_nextn_3_4) run on the architecture users deploy:

    SM120_REAL_DEPLOY_TAGS=preflight,service SM120_REAL_COMPARE_LOADS=c64 \
        python3 benchmarks/real_gpu/host.py go --only model,deploy,compare --budget 330

``--rehearse`` runs the same phases on a machine without a GPU (a container here, with no systemd either)
before device minutes are spent on them: the server is the molecule stand-in
(molecule/resources/standin_server/sglang_standin.py) on a model directory with a config.json alone, the carried
packages are unpacked (sglang_facts reads their versions) but not imported, the preflight (no GPU) and compare
and cause, which need SGLang and a GPU, are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from summarize import accept_lengths

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
HOME = Path("/opt/sm120-real")
SITE = HOME / "site"
PYTHON = HOME / "bin" / "python"
# The run never reads the checkout it was started from: the device tool lays the working tree anew at every call,
# and a playbook that reads a role, a task file or a link of the checkout in that moment dies inside Ansible (the
# experiments phase of a4cfbf0 did: KeyError in play.role_cache, as the role's path through the checkout's
# .collections link no longer resolved; docs/evidence/real-gpu-harness-relaid-checkout.md). ``go`` copies the
# checkout to COLLECTION, an installed collection as ansible-galaxy would leave it (a plain folder, no links), and
# the run in the background is that copy's host.py: its REPO is COLLECTION. CHECKOUT is where ``go`` was called,
# read only for the carried archive, before the run needs anything else.
COLLECTIONS = HOME / "collections"
COLLECTION = COLLECTIONS / "ansible_collections" / "sm120" / "sglang"
CHECKOUT = Path(os.environ.get("SM120_REAL_CHECKOUT") or REPO)
# What the copy leaves out: the carried archive (read from CHECKOUT), VCS data, local caches and builds.
SNAPSHOT_SKIPS = (".git", ".real-gpu", ".collections", ".venv", ".cache", ".whl", ".ansible", ".ee", "reports",
                  "__pycache__", ".gl")
# The harness's profiles (inventory/group_vars/gpu_hosts.yml): the shape make_model.py gives each model, and the
# requests a run of the clients' comparison sends at each load (6 to 20 s a run: on the first harness run, loads of
# 2 to 13 s spread by up to 34 % from one run to the next). The 1.1 B model is limited by the server's host side on
# an H200, the 5.8 B one by the GPU (docs/evidence/real-sglang-h200.md).
PROFILES = {
    "llama-1b-random": {"shape": [], "compare_requests": "c1=16,c16=256,c64=512,c256=768"},
    "llama-8b-random": {"shape": ["--layers", "32", "--hidden", "4096"],
                        "compare_requests": "c1=6,c16=128,c64=384,c256=768"},
    # GLM-5's architecture (issue 37), made by glm5_arch.py (the scaled GlmMoeDsaForCausalLM with its NextN layer,
    # random weights through --load-format dummy) and served at the production profile's flags and loads.
    "glm5-arch-random": {"maker": "glm5_arch.py", "compare_requests": "low=16,high=128"},
}
PROFILE = os.environ.get("SM120_REAL_PROFILE", "llama-1b-random")
if PROFILE not in PROFILES:
    sys.exit("SM120_REAL_PROFILE=%s is not a profile of the harness: use one of %s" % (PROFILE, ", ".join(PROFILES)))
MODEL = HOME / "models" / PROFILE
WORK = Path(os.environ.get("SM120_REAL_WORK", "/var/tmp/sm120-real"))
RESULTS = WORK / "results"
LOG = WORK / "harness.log"
PID = WORK / "harness.pid"
DONE = WORK / "done"
INVENTORY = HERE / "inventory"
URL = "http://127.0.0.1:30000"
UNIT = "sglang-%s.service" % PROFILE
TUNING = [name for name in os.environ.get("SM120_REAL_TUNING", "cuda_graph_max_bs_128,max_running_requests_64")
          .split(",") if name]
PHASES = ("setup", "captures", "model", "crash", "deploy", "compare", "cause", "parity", "experiments", "rerun",
          "noise", "drift", "speculative", "glm5", "summary")
# Phases a run without --only leaves out (each costs server starts, or minutes, the others do not need).
OPT_IN = ("captures", "crash", "noise", "drift", "speculative", "glm5")
REHEARSAL_SKIPS = ("compare", "cause", "glm5")
REHEARSE = os.environ.get("SM120_REAL_REHEARSE") == "1"
NEEDS = {"model": "setup", "deploy": "model", "compare": "deploy", "cause": "deploy", "parity": "deploy",
         "experiments": "deploy", "rerun": "experiments", "speculative": "model", "crash": "model",
         "noise": "deploy", "drift": "deploy", "glm5": "setup"}
# The noise phase (issue 36): A/A rounds of the smoke test's own measurement on the deployed server, then a restart
# of the same configuration and as many rounds again (benchmarks/real_gpu/noise.py, benchmarks/noise_floor.py).
NOISE_ROUNDS = os.environ.get("SM120_REAL_NOISE_ROUNDS", "4")
# The drift phase (issue 50, item 1): the deployed server measured for minutes at the highest loads, the segments of
# drift.py's schedule, with the GPU's and the server's telemetry beside every run; then a start with
# --disable-radix-cache and its own schedule (empty: none).
DRIFT_LOADS = os.environ.get("SM120_REAL_DRIFT_LOADS", "c256,c64")
DRIFT_SCHEDULE = os.environ.get("SM120_REAL_DRIFT_SCHEDULE", "plain:210,flush:210,plain:90,clients:90")
DRIFT_NORADIX = os.environ.get("SM120_REAL_DRIFT_NORADIX", "plain:120")
# Speculative decoding (issue 17): the random Llama has no MTP head, so the 1.1 B one drafts for it. STANDALONE is
# SGLang's EAGLE worker with a draft model of its own, the worker MTP runs with the model's own head; 3 steps, top-1,
# 4 draft tokens as the GLM-5 option (data/experiments.yml mtp_nextn_3_4). SGLang 0.5.16 resets
# --max-running-requests to 48 for it when unset (arg_groups/speculative_hook.py, _handle_eagle_family).
DRAFT = HOME / "models" / "llama-1b-random"
SPECULATIVE = {"--speculative-algorithm": "STANDALONE", "--speculative-draft-model-path": str(DRAFT),
               "--speculative-num-steps": 3, "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": 4}
# The speculative starts first: the fifth run measured the start without twice and lost both speculative ones.
# steps-4: data/experiments.yml's continuous_decode_steps_4 (four decode steps between scheduling rounds), which
# SGLang's help says may raise throughput and time to first token; against spec-off, the same server without it.
SPECULATIVE_STARTS = (("spec-unset", SPECULATIVE), ("spec-256", dict(SPECULATIVE, **{"--max-running-requests": 256})),
                      ("steps-4", {"--num-continuous-decode-steps": 4}), ("spec-off", {}))
# What SGLang's EAGLE worker imports when it captures the draft's CUDA graphs (eagle_worker_v2._capture_cuda_graphs
# of 0.5.16): checked in seconds before the first start, which otherwise dies minutes in (the sixth run's did).
SPECULATIVE_IMPORTS = ("import deep_gemm; "
                       "from sglang.srt.layers.attention.dsa_backend import DeepseekSparseAttnBackend; "
                       "from sglang.srt.layers.attention.deepseek_v4_backend import DeepseekV4AttnBackend; "
                       "from sglang.srt.layers.attention.flashmla_backend import FlashMLABackend; "
                       "import sglang.srt.speculative.standalone_worker_v2")


def log(message):
    line = "%s %s" % (time.strftime("%H:%M:%S"), message)
    print(line, flush=True)


def run(argv, name, env=None, timeout=1800, check=True):
    """A command with its output in results/NAME.log; its seconds and code in the log line."""
    began = time.monotonic()
    with open(RESULTS / (name + ".log"), "ab") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, timeout=timeout,
                              check=False)
    seconds = time.monotonic() - began
    log("  %s: exit %d in %.1f s" % (name, done.returncode, seconds))
    if check and done.returncode != 0:
        raise RuntimeError("%s exited with %d; see results/%s.log" % (name, done.returncode, name))
    return seconds


def tool_env():
    env = dict(os.environ, PYTHONPATH="%s:%s" % (SITE, COLLECTIONS), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", LC_ALL="C.UTF-8", LANG="C.UTF-8", PYTHONUNBUFFERED="1")
    return env


def ansible_env():
    # The collection is COLLECTION alone: the config's ./.collections would be the checkout's.
    return dict(tool_env(), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
                ANSIBLE_FORCE_COLOR="0",
                ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_LOCAL_TEMP=str(WORK / "ansible-tmp"),
                ANSIBLE_HOME=str(WORK / "ansible-home"))


# ------------------------------------------------------------------ phases

def phase_setup():
    archive = CHECKOUT / ".real-gpu" / "site.tar.xz"
    if not archive.exists():
        raise RuntimeError("%s is missing: run benchmarks/real_gpu/build_carry.py here and carry .real-gpu" % archive)
    HOME.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    if archive and not (SITE / "sglang").exists():
        shutil.rmtree(SITE, ignore_errors=True)
        with tarfile.open(archive) as tar:
            tar.extractall(HOME, filter="fully_trusted") if hasattr(tarfile, "fully_trusted_filter") \
                else tar.extractall(HOME)
        log("  unpacked %s in %.1f s" % (archive.name, time.monotonic() - began))
    # The service's interpreter: the host's python3 with the carried packages first on its path, and the
    # variables that find CUDA and the driver, which a unit's clean environment would not have.
    keep = {name: os.environ[name] for name in ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")
            if name in os.environ}
    lines = ["#!/bin/sh", "# The real-GPU harness's SGLang environment (benchmarks/real_gpu/host.py)."]
    lines += ["export %s='%s'" % (name, value.replace("'", "")) for name, value in sorted(keep.items())]
    lines += ["export PYTHONPATH='%s'${PYTHONPATH:+:$PYTHONPATH}" % SITE, 'exec %s "$@"' % sys.executable]
    PYTHON.parent.mkdir(parents=True, exist_ok=True)
    PYTHON.write_text("\n".join(lines) + "\n")
    PYTHON.chmod(0o755)
    for path in (HOME, HOME / "bin"):
        path.chmod(0o755)
    if not Path("/run/systemd/system").is_dir():
        for program in ("systemctl", "journalctl"):
            path = Path("/usr/local/bin") / program
            path.write_text("#!/bin/sh\n# systemd stands in here: benchmarks/real_gpu/systemd_standin.py\n"
                            'exec %s %s %s "$@"\n' % (sys.executable, HERE / "systemd_standin.py", program))
            path.chmod(0o755)
        log("  no systemd here: systemctl and journalctl are benchmarks/real_gpu/systemd_standin.py")
    open_python_to_the_service_user()
    if REHEARSE:
        return
    versions = subprocess.run(
        [str(PYTHON), "-c", "import importlib.metadata as m, torch, sgl_kernel, sglang, transformers;"
         "print({n: m.version(n) for n in ('sglang', 'sglang-kernel', 'flashinfer-python', 'torch', 'transformers',"
         "'tokenizers', 'ansible-core')}, torch.cuda.get_device_name(0), torch.version.cuda)"],
        capture_output=True, text=True, timeout=300, check=False)
    (RESULTS / "versions.txt").write_text(versions.stdout + versions.stderr[-3000:])
    if versions.returncode != 0:
        raise RuntimeError("the carried packages do not import: %s" % versions.stderr[-1500:])
    log("  " + versions.stdout.strip())
    nvidia = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=False)
    (RESULTS / "nvidia-smi.txt").write_text(nvidia.stdout)


def open_python_to_the_service_user():
    """The server runs as the service user, not root: the host's Python, and every folder above it, must be
    readable to another user (a rehearsal's Python lives under /root, mode 700)."""
    module = "sys" if REHEARSE else "torch"
    # As nobody from the exec on: a probe that drops its privileges after the interpreter started proves nothing
    # about the interpreter's own path (a rehearsal's passed so, and its server then could not exec).
    probe = subprocess.run([str(PYTHON), "-c", "import " + module], capture_output=True, text=True, check=False,
                           user=65534, group=65534, extra_groups=[])
    if probe.returncode == 0:
        return
    executable = Path(sys.executable).resolve()
    log("  %s is not readable to other users (%s): opening it" % (executable, probe.stderr.strip()[-200:]))
    for folder in executable.parents[:-1]:
        subprocess.run(["chmod", "o+x", str(folder)], check=False, capture_output=True)
    subprocess.run(["chmod", "-R", "o+rX", str(executable.parent.parent)], check=False, capture_output=True)


def phase_model():
    glm5 = PROFILES[PROFILE].get("maker") == "glm5_arch.py"
    if REHEARSE:
        MODEL.mkdir(parents=True, exist_ok=True)
        if glm5:
            from glm5_arch import config, weight_index
            made = dict(config(), vocab_size=32000)
            (MODEL / "model.safetensors.index.json").write_text(json.dumps(weight_index(made)))
        else:
            made = {"architectures": ["LlamaForCausalLM"], "vocab_size": 32000}
        (MODEL / "config.json").write_text(json.dumps(made))
        return
    if glm5:
        # config.json, the tokenizer and the NextN layer's index (glm5_arch.py make says why each).
        run([str(PYTHON), str(HERE / "glm5_arch.py"), "make", str(MODEL)], "model", env=tool_env())
        return
    run([str(PYTHON), str(HERE / "make_model.py"), str(MODEL)] + PROFILES[PROFILE]["shape"], "model", env=tool_env())


def unit_times():
    try:
        return json.loads(Path("/run/systemd-standin/%s.json" % UNIT).read_text())
    except (OSError, ValueError):
        return {}


class Readiness:
    """What /health and /v1/models answer, every 0.5 s, while a playbook runs: each change, timed."""

    def __init__(self):
        import threading
        self.changes, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    @staticmethod
    def status(path):
        try:
            with urllib.request.urlopen(URL + path, timeout=2) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return "refused"

    def loop(self):
        last = None
        while not self.stop.is_set():
            now = (self.status("/health"), self.status("/v1/models"))
            if now != last:
                self.changes.append({"at": time.time(), "health": now[0], "models": now[1]})
                last = now
            self.stop.wait(0.5)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


# The phases a rerun leaves out, so that it runs the deploy's preflight, service and smoke test without naming the
# smoke test (--tags smoke asks it to measure again).
RERUN_SKIPS = "driver,sglang,patches,router"


def playbook(name, host_vars, report_dir=None, skip_tags=None, tags=None):
    """deploy.yml with ``host_vars`` in the inventory's host_vars, not as extra vars: an extra var outranks the
    configuration the experiments role switches to for each experiment (the first harness run measured one
    configuration four times that way; the experiments role now refuses it). ``skip_tags``: the phases chosen by what is
    left out instead of by name."""
    # The preflight reads the real GPU (gpu_facts): the smoke test keeps its verdicts per GPU model and topology.
    tags = tags or os.environ.get("SM120_REAL_DEPLOY_TAGS") or "preflight,service,smoke"
    if REHEARSE:
        host_vars = dict(host_vars, sglang_service_launcher=[
            str(PYTHON), str(REPO / "molecule/resources/standin_server/sglang_standin.py")])
        tags = ",".join(tag for tag in tags.split(",") if tag != "preflight") or "service"
        skip_tags = skip_tags and skip_tags + ",preflight"
    inventory = WORK / ("inventory-" + name)
    shutil.rmtree(inventory, ignore_errors=True)
    shutil.copytree(INVENTORY, inventory)
    (inventory / "host_vars").mkdir(exist_ok=True)
    host_vars = dict(host_vars, sglang_service_profile=PROFILE, sglang_service_model_path=str(MODEL))
    if os.environ.get("SM120_REAL_SMOKE_REPEATS"):
        host_vars["smoke_test_repeats"] = int(os.environ["SM120_REAL_SMOKE_REPEATS"])
    if report_dir:
        # Its own reports, baselines and verdicts: nothing a start before it stored is compared against it.
        host_vars["smoke_test_report_dir"] = str(report_dir)
    (inventory / "host_vars" / "h200.yml").write_text(json.dumps(host_vars, indent=1) + "\n")
    argv = [str(PYTHON), "-m", "ansible", "playbook", "-i", str(inventory), "playbooks/deploy.yml"] + (
        ["--skip-tags", skip_tags] if skip_tags else ["--tags", tags])
    with Readiness() as readiness:
        seconds = run(argv, name, env=ansible_env(), timeout=3000, check=False)
    times = unit_times()
    record = {"seconds": round(seconds, 1), "unit": times, "readiness": readiness.changes}
    if times.get("started") and times.get("active_at"):
        record["last_start_to_active_s"] = round(times["active_at"] - times["started"], 1)
    (RESULTS / (name + ".json")).write_text(json.dumps(record, indent=1))
    reports = Path(report_dir or WORK / "reports")
    if reports.exists():
        shutil.copytree(reports, RESULTS / reports.name, dirs_exist_ok=True)
    text = (RESULTS / (name + ".log")).read_text(errors="replace")
    if "PLAY RECAP" not in text or " failed=0" not in text.split("PLAY RECAP")[-1]:
        raise RuntimeError("ansible-playbook (%s) failed; see results/%s.log" % (name, name))


def phase_deploy():
    playbook("deploy", {"sglang_service_tuning": []})


def phase_compare():
    run([str(PYTHON), str(HERE / "compare_clients.py"), "--url", URL, "--model", PROFILE,
         "--tokenizer", str(MODEL), "--inventory", str(INVENTORY), "--profile", PROFILE,
         "--repeats", os.environ.get("SM120_REAL_COMPARE_REPEATS", "3"),
         "--requests", PROFILES[PROFILE]["compare_requests"], "--loads", os.environ.get("SM120_REAL_COMPARE_LOADS", ""),
         "--tools", os.environ.get("SM120_REAL_COMPARE_TOOLS", "serving_benchmark,bench_serving"),
         "--out", str(RESULTS / "compare.jsonl")], "compare", env=tool_env(), timeout=1500)


def phase_cause():
    vocab_size = json.loads((MODEL / "config.json").read_text())["vocab_size"]
    run([str(PYTHON), str(HERE / "trace_gpu.py"), "--url", URL, "--model", PROFILE,
         "--vocab-size", str(vocab_size), "--out", str(RESULTS / "cause.json")], "cause", env=tool_env(), timeout=900)


PARITY_PROMPTS = ["The capital of France is", "Write the next number: 2, 4, 8, 16,",
                  "Translate to German: the GPU is fast.", "def fibonacci(n):"]


def parity(label):
    texts = []
    for prompt in PARITY_PROMPTS:
        body = json.dumps({"model": PROFILE, "prompt": prompt, "max_tokens": 16, "temperature": 0}).encode()
        request = urllib.request.Request(URL + "/v1/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            texts.append(json.loads(response.read())["choices"][0]["text"])
    return {"label": label, "at": time.time(), "texts": texts}


def wait_healthy(limit=900):
    began = time.monotonic()
    while time.monotonic() - began < limit:
        try:
            with urllib.request.urlopen(URL + "/health", timeout=5) as response:
                if response.status == 200:
                    return time.monotonic() - began
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError("/health did not answer 200 within %d s" % limit)


def phase_parity():
    """Two restarts of one configuration, asked the parity prompts after each; and each answered twice."""
    records = [parity("first start, run 1"), parity("first start, run 2")]
    began = time.monotonic()
    subprocess.run(["systemctl", "restart", UNIT], check=True, timeout=900)
    healthy = wait_healthy()
    restart = time.monotonic() - began
    records += [parity("after restart, run 1"), parity("after restart, run 2")]
    result = {"restart_s": round(restart, 1), "health_wait_s": round(healthy, 1), "unit": unit_times(),
              "records": records,
              "same_within_a_start": [records[0]["texts"] == records[1]["texts"],
                                      records[2]["texts"] == records[3]["texts"]],
              "same_across_restart": [a == b for a, b in zip(records[0]["texts"], records[2]["texts"])]}
    (RESULTS / "parity.json").write_text(json.dumps(result, indent=1))
    log("  parity across a restart: %s; restart %.1f s" % (result["same_across_restart"], restart))


def noise_rounds():
    # The server start the rounds are of: its unit's start time, the same for rounds of one process in two calls.
    start = int(unit_times().get("started") or time.time())
    run([str(PYTHON), str(HERE / "noise.py"), "--url", URL, "--model", PROFILE, "--tokenizer", str(MODEL),
         "--inventory", str(INVENTORY), "--profile", PROFILE, "--rounds", NOISE_ROUNDS, "--start", str(start),
         "--out", str(RESULTS / "noise.jsonl")], "noise", env=tool_env(), timeout=1500)


def phase_noise():
    """A/A: rounds of every load on the server as deployed, a restart of the same configuration, rounds again."""
    noise_rounds()
    began = time.monotonic()
    subprocess.run(["systemctl", "restart", UNIT], check=True, timeout=900)
    healthy = wait_healthy()
    log("  noise: restarted in %.1f s (health %.1f s)" % (time.monotonic() - began, healthy))
    noise_rounds()


def drift(label, schedule):
    run([str(PYTHON), str(HERE / "drift.py"), "--url", URL, "--model", PROFILE, "--tokenizer", str(MODEL),
         "--inventory", str(INVENTORY), "--profile", PROFILE, "--loads", DRIFT_LOADS, "--schedule", schedule,
         "--label", label, "--out", str(RESULTS / "drift")], "drift-" + label, env=tool_env(), timeout=3600)


def phase_drift():
    """One server's drift over minutes (drift.py), then a start without the radix cache, measured the same way."""
    drift("radix", DRIFT_SCHEDULE)
    if DRIFT_NORADIX:
        playbook("deploy-noradix",
                 {"sglang_service_tuning": [], "sglang_service_extra_args": {"--disable-radix-cache": True}},
                 tags="preflight,service")
        drift("noradix", DRIFT_NORADIX)


# What the host says of its GPUs' P2P prerequisites (issue 49), as gpu_facts reads them: the lent machine's own
# output, kept beside the composed 8-GPU fixtures of tests/unit.
CAPTURES = (("topo-m.txt", "nvidia-smi topo -m"), ("topo-p2p-r.txt", "nvidia-smi topo -p2p r"),
            ("topo-p2p-w.txt", "nvidia-smi topo -p2p w"), ("q-memory.txt", "nvidia-smi -q -d MEMORY"),
            ("q.txt", "nvidia-smi -q"), ("lspci-vvv.txt", "lspci -vvv"), ("cmdline.txt", "cat /proc/cmdline"),
            ("iommu-groups.txt", "grep . /sys/kernel/iommu_groups/*/type"),
            ("uvm-disable-hmm.txt", "cat /sys/module/nvidia_uvm/parameters/uvm_disable_hmm"),
            ("nvidia-params.txt", "cat /proc/driver/nvidia/params"),
            ("aspm-policy.txt", "cat /sys/module/pcie_aspm/parameters/policy"),
            ("gpu-sysfs-path.txt", "for d in /sys/bus/pci/devices/*; do [ \"$(cat $d/vendor)\" = 0x10de ] && "
                                   "readlink -f $d; done"),
            ("driver-version.txt", "cat /proc/driver/nvidia/version"), ("uname.txt", "uname -a"))


def phase_captures():
    folder = RESULTS / "captures"
    folder.mkdir(parents=True, exist_ok=True)
    for name, command in CAPTURES:
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60, check=False)
        stderr = ("# stderr:\n" + done.stderr) if done.stderr else ""
        (folder / name).write_text("$ %s\n# exit %d\n%s%s" % (command, done.returncode, done.stdout, stderr))
    log("  captures: %d commands in results/captures" % len(CAPTURES))


# The GLM-5 architecture (issue 37): glm5_arch.py makes a scaled-down GlmMoeDsaForCausalLM config and starts SGLang
# on it with random weights, once per start SM120_REAL_GLM5_STARTS names (its --starts default unless set), each
# given SM120_REAL_GLM5_LIMIT seconds to answer (its --limit default, 240, unless set).
GLM5_MODEL = HOME / "models" / "glm-5-arch"


def phase_glm5():
    # The GPU to itself: a server the deploy left running held 67 of the H100's 80 GB, and the first real start
    # found 11.7 GB for GLM-5's weights and KV cache.
    subprocess.run(["systemctl", "stop", UNIT], check=False, timeout=120)
    run([str(PYTHON), str(HERE / "glm5_arch.py"), "make", str(GLM5_MODEL), "--nvfp4"], "glm5-make", env=tool_env())
    starts = os.environ.get("SM120_REAL_GLM5_STARTS")
    limit = os.environ.get("SM120_REAL_GLM5_LIMIT")
    run([str(PYTHON), str(HERE / "glm5_arch.py"), "probe", "--model", str(GLM5_MODEL),
         "--out", str(RESULTS / "glm5.jsonl"), "--logs", str(RESULTS / "glm5")]
        + (["--starts", starts] if starts else []) + (["--limit", limit] if limit else []),
        "glm5", env=tool_env(), timeout=3000)


def phase_experiments():
    playbook("experiments", {"sglang_service_tuning": TUNING})


def phase_rerun():
    playbook("rerun", {"sglang_service_tuning": TUNING}, skip_tags=RERUN_SKIPS)


def server_info():
    try:
        with urllib.request.urlopen(URL + "/server_info", timeout=10) as response:
            return json.loads(response.read())
    except (OSError, ValueError) as exc:
        return {"error": str(exc)}


def speculative_starts(chosen):
    """The starts SM120_REAL_SPECULATIVE_STARTS names, in its order (all of them when it is empty)."""
    starts = dict(SPECULATIVE_STARTS)
    names = [name.strip() for name in chosen.split(",") if name.strip()] or list(starts)
    unknown = [name for name in names if name not in starts]
    if unknown:
        raise ValueError("SM120_REAL_SPECULATIVE_STARTS names %s, not a start of the speculative phase: use %s"
                         % (", ".join(unknown), ", ".join(starts)))
    return [(name, starts[name]) for name in names]


def cap_is_the_finding(extra, playbook_log):
    """Whether a failed speculative start failed as it should: speculative decoding with --max-running-requests left
    to SGLang is capped at 48, below the loads of 64 and 256, and the smoke test fails such a start naming the cap
    (plugin_utils/experiments.py cap_misses) once it has measured and reported it. That failure is the start's
    finding, not the harness's; any other failure, or this one where the bound was given, is not."""
    unset = "--speculative-algorithm" in extra and "--max-running-requests" not in extra
    return unset and "the server at most 48" in playbook_log


def phase_speculative():
    starts = speculative_starts(os.environ.get("SM120_REAL_SPECULATIVE_STARTS", ""))
    # The draft model and the EAGLE worker's imports only where a start drafts.
    if not REHEARSE and any("--speculative-algorithm" in extra for _name, extra in starts):
        if not (DRAFT / "config.json").exists():
            run([str(PYTHON), str(HERE / "make_model.py"), str(DRAFT)] + PROFILES["llama-1b-random"]["shape"],
                "draft", env=tool_env())
        run([str(PYTHON), "-c", SPECULATIVE_IMPORTS], "speculative-imports", env=tool_env())
    failed = []
    for name, extra in starts:
        try:
            # A start that fails is refused within 7 minutes, not the inventory's 15 (the role waits on /health).
            playbook(name, {"sglang_service_tuning": [], "sglang_service_extra_args": extra,
                            "sglang_service_health_timeout": 420},
                     report_dir=WORK / ("reports-" + name))
        except RuntimeError as exc:
            if cap_is_the_finding(extra, (RESULTS / (name + ".log")).read_text(errors="replace")):
                log("  %s: the smoke test failed the start on SGLang's own cap of 48, as it should" % name)
            else:
                failed.append(str(exc))
            if keep_server_log():
                shutil.copy(RESULTS / "server.log", RESULTS / (name + "-server.log"))
        info = server_info()
        keep = {key: info.get(key) for key in ("max_running_requests", "max_total_num_tokens", "speculative_algorithm",
                                               "speculative_num_steps", "speculative_num_draft_tokens", "error")}
        keep["internal_states"] = info.get("internal_states")
        (RESULTS / (name + "-server-info.json")).write_text(json.dumps(keep, indent=1, default=str))
        log("  %s: /server_info max_running_requests %s, max_total_num_tokens %s, accept length %s" % (
            name, keep["max_running_requests"], keep["max_total_num_tokens"], accept_lengths(keep)))
    if failed:
        raise RuntimeError("; ".join(failed))


# A start whose server dies (issue 18): SGLang loads the weights, then finds no room for the KV cache in 1 % of the
# GPU's memory and exits. The role's health wait is to fail the play as the unit fails, not at its timeout (the
# sixth run's first try polled its whole 420 s after the server had died). The stand-in of a rehearsal takes no
# --mem-fraction-static; it is told to exit at start instead.
CRASH_ARGS = {"--mem-fraction-static": 0.01}
CRASH_TIMEOUT = 240


def phase_crash():
    host_vars = {"sglang_service_tuning": [], "sglang_service_extra_args": CRASH_ARGS,
                 "sglang_service_health_timeout": CRASH_TIMEOUT}
    if REHEARSE:
        host_vars["sglang_service_env"] = {"SGLANG_STANDIN_FAIL_AT_START": "1"}
    try:
        playbook("crash", host_vars, report_dir=WORK / "reports-crash")
    except RuntimeError:
        pass
    else:
        raise RuntimeError("the start with %s served: it was to die" % CRASH_ARGS)
    if keep_server_log():
        shutil.copy(RESULTS / "server.log", RESULTS / "crash-server.log")
    record = json.loads((RESULTS / "crash.json").read_text())
    text = (RESULTS / "crash.log").read_text(errors="replace")
    said = [line.strip() for line in text.splitlines() if "did not serve" in line]
    record.update(health_timeout_s=CRASH_TIMEOUT, failure=said[:3])
    (RESULTS / "crash.json").write_text(json.dumps(record, indent=1))
    log("  crash: the playbook ended in %.1f s (health timeout %d s): %s" % (
        record["seconds"], CRASH_TIMEOUT, said[0][:300] if said else "no 'did not serve' in its log"))
    if not said:
        raise RuntimeError("the crashed start's playbook failed without the health wait's 'did not serve'; "
                           "see results/crash.log")


def phase_summary():
    keep_server_log()
    run([sys.executable, str(HERE / "summarize.py"), str(RESULTS)], "summary", check=False)


# ------------------------------------------------------------------ the run and the calls

# A tracked file of the checkout and the checkout itself, watched while the run goes on: what the device tool's
# next call does to them is in results/checkout-watch.jsonl (the evidence that the run must not read the checkout).
WATCHED = ("roles/smoke_test/tasks/measure.yml", "benchmarks/real_gpu/host.py", ".")


def checkout_state(checkout):
    """Each watched path's (inode, mtime) or None where it is missing, and the realpath of the role's folder."""
    state = {}
    for name in WATCHED:
        try:
            st = os.lstat(Path(checkout) / name)
            state[name] = [st.st_ino, round(st.st_mtime, 3)]
        except OSError:
            state[name] = None
    state["realpath roles/smoke_test"] = os.path.realpath(Path(checkout) / "roles" / "smoke_test")
    return state


def watch_checkout(stop, every=0.25):
    """Logs each change of checkout_state(CHECKOUT) with its time, until ``stop`` is set."""
    last = checkout_state(CHECKOUT)
    with open(RESULTS / "checkout-watch.jsonl", "a") as out:
        out.write(json.dumps({"at": time.time(), "checkout": str(CHECKOUT), "state": last}) + "\n")
        out.flush()
        while not stop.wait(every):
            now = checkout_state(CHECKOUT)
            if now != last:
                changed = sorted(name for name in now if now[name] != last.get(name))
                out.write(json.dumps({"at": time.time(), "changed": changed, "state": now}) + "\n")
                out.flush()
                log("  the checkout changed under the run: %s" % ", ".join(changed))
                last = now


def run_all(only=None):
    import threading
    RESULTS.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    watcher = threading.Thread(target=watch_checkout, args=(stop,), daemon=True)
    watcher.start()
    status = {}
    for name in PHASES:
        if ((only and name not in only and name != "summary") or (not only and name in OPT_IN)
                or (REHEARSE and name in REHEARSAL_SKIPS)):
            continue
        need = NEEDS.get(name)
        if need and status.get(need, {}).get("ok") is False:
            status[name] = {"ok": False, "skipped": "%s failed" % need}
            log("phase %s: skipped (%s failed)" % (name, need))
            continue
        log("phase %s" % name)
        began = time.monotonic()
        try:
            globals()["phase_" + name]()
            status[name] = {"ok": True}
        except Exception as exc:  # every phase's failure is recorded, and the run goes on where it can
            status[name] = {"ok": False, "error": str(exc)[-2000:]}
            log("phase %s FAILED: %s" % (name, str(exc)[-500:]))
        status[name]["seconds"] = round(time.monotonic() - began, 1)
        (RESULTS / "phases.json").write_text(json.dumps(status, indent=1))
    stop.set()
    watcher.join(timeout=5)
    log("done")
    DONE.write_text(json.dumps(status))


def running():
    """The pid of the run under way, or None. The pid must still be the run's (host.py run): in a container the pid of
    a run that ended is soon another process's, the server's say, and a later go --only then took the run for under
    way and started nothing."""
    try:
        pid = int(PID.read_text())
        command = Path("/proc/%d/cmdline" % pid).read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if any(part.endswith(b"host.py") for part in command) and b"run" in command else None


def snapshot(checkout, collection):
    """The checkout copied to ``collection``, a plain folder (links copied as links, none made): what the run reads
    from then on, whatever the device tool does to the checkout at its next call. Returns the copy's size in files."""
    checkout, collection = Path(checkout).resolve(), Path(collection)
    if collection == checkout or checkout in collection.parents:
        raise ValueError("the snapshot %s would be inside the checkout %s it copies" % (collection, checkout))
    if collection.is_symlink():
        collection.unlink()
    shutil.rmtree(collection, ignore_errors=True)
    collection.parent.mkdir(parents=True, exist_ok=True)
    partial = collection.with_name(collection.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(checkout, partial, symlinks=True, ignore=shutil.ignore_patterns(*SNAPSHOT_SKIPS))
    partial.rename(collection)
    return sum(len(files) for _root, _dirs, files in os.walk(collection))


def start(only):
    WORK.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    files = snapshot(REPO, COLLECTION)
    log("  the checkout %s copied to %s (%d files, %.1f s): the run reads the copy" % (
        REPO, COLLECTION, files, time.monotonic() - began))
    argv = [sys.executable, str(COLLECTION / "benchmarks" / "real_gpu" / "host.py"), "run"] + (
        ["--only", ",".join(only)] if only else [])
    env = dict(os.environ, SM120_REAL_CHECKOUT=str(REPO))
    with open(LOG, "ab") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, cwd=COLLECTION, env=env)
    PID.write_text(str(child.pid))
    return child.pid


def keep_server_log():
    """The end of the server's log in the results: a start that does not answer says why there, even when the
    machine is lost before the run ends (the fifth run lost two such starts without it)."""
    server_log = Path("/var/log/systemd-standin") / (UNIT + ".log")
    if not server_log.exists() or not RESULTS.exists():
        return False
    with open(server_log, "rb") as handle:
        handle.seek(max(0, server_log.stat().st_size - 4_000_000))
        (RESULTS / "server.log").write_bytes(handle.read())
    return True


def collect():
    out = os.environ.get("OUT")
    if not out:
        return
    out = Path(out)
    keep_server_log()
    with tarfile.open(out / "results.tar.gz", "w:gz") as tar:
        tar.add(RESULTS, arcname="results")
    for name in ("summary.md", "phases.json"):
        if (RESULTS / name).exists():
            shutil.copy(RESULTS / name, out / name)
    if LOG.exists():
        shutil.copy(LOG, out / "harness.log")


def go(budget, only):
    began = time.monotonic()
    if DONE.exists() and only and not running():
        DONE.unlink()
        log("starting phases %s again (pid %d)" % (",".join(only), start(only)))
    elif DONE.exists():
        log("the run had ended before this call")
    elif running():
        log("following the run that is under way (pid %d)" % running())
    else:
        log("starting the run (pid %d)" % start(only))
    position = 0
    while True:
        if LOG.exists():
            with open(LOG, "rb") as handle:
                handle.seek(position)
                chunk = handle.read()
                position += len(chunk)
            sys.stdout.write(chunk.decode(errors="replace"))
            sys.stdout.flush()
        if DONE.exists() or not running():
            break
        if time.monotonic() - began > budget:
            log("budget of this call spent; the run goes on: call again within 30 s to follow it")
            break
        time.sleep(3)
    if not DONE.exists() and not running():
        log("the run is not under way and did not end: see harness.log")
    collect()
    if DONE.exists() and (RESULTS / "summary.md").exists():
        sys.stdout.write((RESULTS / "summary.md").read_text())
    return 0


def tuning_options():
    """The tuning options of the checkout's data/experiments.yml (those SM120_REAL_TUNING may name)."""
    import yaml
    with open(HERE.parent.parent / "data" / "experiments.yml") as handle:
        return set(yaml.safe_load(handle)["options"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["go", "run"])
    parser.add_argument("--budget", type=float, default=560, help="seconds this call follows the run")
    parser.add_argument("--only", default="", help="comma-separated phases (setup always runs first)")
    parser.add_argument("--rehearse", action="store_true",
                        help="without a GPU: the stand-in server, no compare or cause (see above)")
    args = parser.parse_args(argv)
    if args.rehearse:
        os.environ["SM120_REAL_REHEARSE"] = "1"
        global REHEARSE
        REHEARSE = True
    only = [name for name in args.only.split(",") if name]
    unknown = [name for name in only if name not in PHASES]
    if unknown:
        parser.error("--only names %s, not a phase: use %s" % (", ".join(unknown), ", ".join(PHASES)))
    try:
        speculative_starts(os.environ.get("SM120_REAL_SPECULATIVE_STARTS", ""))
    except ValueError as exc:
        parser.error(str(exc))
    if not (os.environ.get("SM120_REAL_SMOKE_REPEATS") or "3").isdigit():
        parser.error("SM120_REAL_SMOKE_REPEATS=%s is not a whole number of rounds (e.g. 2)"
                     % os.environ["SM120_REAL_SMOKE_REPEATS"])
    options = tuning_options()
    unknown = [name for name in TUNING if name not in options]
    if unknown:
        parser.error("SM120_REAL_TUNING names %s, not a tuning option of data/experiments.yml: use %s"
                     % (", ".join(unknown), ", ".join(sorted(options))))
    if only and "setup" not in only:
        only.insert(0, "setup")
    if args.command == "run":
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        run_all(only)
        return 0
    return go(args.budget, only)


if __name__ == "__main__":
    sys.exit(main())

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the GPUs of the stand-in server do: which gates are live, how fast it generates, what it draws.

Stands in for 8 RTX PRO 6000 GPUs running GLM-5-NVFP4 (see sglang_standin.py):
the gates it sees live, the effect each has (SGLANG_STANDIN_EFFECTS, by default
the measured fusion regression), and the per-GPU power draw it writes for the
nvidia-smi stand-in. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import sys
import tempfile
import threading

# ---------------------------------------------------------------------------
# The fusion gate's measured regression, all in this one place. The FlashInfer allreduce-fusion
# gate (roles/sm120_patches, gate flashinfer_allreduce_fusion) on GLM-5-NVFP4,
# 8x RTX PRO 6000, PCIe only, TP 8: output throughput fell from about 3,740 to
# 236 tok/s and each GPU to 125 W of its 600 W limit, because the TRT-LLM
# communication kernels behind the fusion are not built for PCIe SM120.
UNPATCHED_OUTPUT_TOK_S = 3740.0
FUSION_PATCHED_OUTPUT_TOK_S = 236.0
FUSION_SLOWDOWN = UNPATCHED_OUTPUT_TOK_S / FUSION_PATCHED_OUTPUT_TOK_S  # about 15.85
# Per-GPU draw in watts. The article's unpatched run drew only about 250 W, the
# underfeeding that started the hunt; the stand-in's healthy server draws 0.8 of
# the limit, so a power-fraction threshold tells healthy from collapsed at once.
LOAD_W = 480.0
FUSION_LOAD_W = 125.0
IDLE_W = 60.0
# GPU utilisation (NVML's share of time a kernel ran) in percent. Healthy decoding keeps the SMs busy;
# the fusion's TRT-LLM kernels spin on flags the peers set late, so the SMs stay busy at 125 W: a
# spin-wait, not a lack of work (near 100 % busy at 125-140 W, ../shared/research; the H200 spinning
# on a flag held 100 % at 125-137 W, docs/evidence/h200-cause-verdicts.md). Idle: nothing runs.
LOAD_UTIL_PCT = 96.0
FUSION_UTIL_PCT = 100.0
IDLE_UTIL_PCT = 0.0

FUSION_FILES = (os.path.join("sglang", "srt", "layers", "communicator.py"),
                os.path.join("sglang", "srt", "layers", "layer_boundary", "residual", "add_norm.py"))
# The fusion condition once SM120 is let in; releases 0.5.8 to 0.5.23 ship
# "(_is_sm90_supported or _is_sm100_supported)".
FUSION_CONDITION_WITH_SM120 = re.compile(
    r"\(\s*_is_sm90_supported\s+or\s+_is_sm100_supported\s+or\s+_is_sm120_supported\s*\)\s*and\s+_is_flashinfer_available")
FUSION_FLAGS = ("--enable-flashinfer-allreduce-fusion", "--flashinfer-allreduce-fusion-backend")
CUSTOM_AR_FILE = os.path.join("sglang", "srt", "distributed", "device_communicators", "custom_all_reduce.py")
CUSTOM_AR_WITH_SM120 = re.compile(r"if self\.world_size == 2 or self\.full_nvlink or is_sm120_supported\(\):")
# The cutlass MoE runner on NVFP4 from SGLang 0.5.16: the real server raises while it builds the model
# (layers/quantization/modelopt_quant.py:2452 of 0.5.16, data/experiments.yml's moe_runner_cutlass).
CUTLASS_NVFP4_ERROR = "NotImplementedError: moe_runner_backend=cutlass is not supported for NVFP4 MoE"
# Before 0.5.16 it runs, at a speed that differs by the requests running. No one has published the cutlass and
# flashinfer_cutlass MoE runners side by side on SM120; the one published comparison of two NVFP4 MoE backends of
# SGLang by concurrency (sglang pull 31470, on SM100, flashinfer_trtllm_routed against MegaMoE: the other 23 % slower
# at concurrency 32, 11 % at 128, even at 1,024, where decoding saturates and the MoE is no longer the bottleneck)
# gives the shape, and which backend is the slower one at low concurrency is this stand-in's assumption.
CUTLASS_MOE_BY_RUNNING = ((32, 1 / 1.23), (128, 1 / 1.11), (1024, 1.0))
DEFAULT_EFFECTS = {"flashinfer_allreduce_fusion": {"speed": 1 / FUSION_SLOWDOWN, "load_w": FUSION_LOAD_W,
                                                   "util_pct": FUSION_UTIL_PCT},
                   "moe_runner_cutlass": {"flags": {"--moe-runner-backend": "cutlass", "--quantization": "modelopt_fp4"},
                                          "raises_from": "0.5.16", "raises": CUTLASS_NVFP4_ERROR,
                                          "speed_by_running": CUTLASS_MOE_BY_RUNNING}}
POWER_FILE = "/var/lib/sglang/standin-power-draw"
# Where the nvidia-smi stand-in keeps the power limits set with -pl (molecule/resources/nvidia-smi).
NVIDIA_SMI_STATE = "/run/nvidia-smi-standin"


def sglang_package_dir():
    """Where the SGLang of this interpreter lives, as the real server imports it; None without one."""
    try:
        from importlib import metadata
        return str(metadata.distribution("sglang").locate_file(""))
    except Exception:  # no SGLang for this interpreter: nothing is gated
        return None


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def live_gates(package_dir, argv, environ):
    """{gate: why} for the gates a real server would run with, from its source, command line and environment."""
    live = {}
    if package_dir:
        for relative in FUSION_FILES:
            source = _read(os.path.join(package_dir, relative))
            if source and FUSION_CONDITION_WITH_SM120.search(source):
                flag = next((word for word in argv if word.split("=", 1)[0] in FUSION_FLAGS), None)
                if flag:
                    live["flashinfer_allreduce_fusion"] = "%s lets SM120 in and %s asks for it" % (relative, flag)
        source = _read(os.path.join(package_dir, CUSTOM_AR_FILE))
        if source and CUSTOM_AR_WITH_SM120.search(source):
            live["custom_allreduce_pcie"] = "should_custom_ar in %s lets SM120 in" % CUSTOM_AR_FILE
    if environ.get("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE") == "1":
        live["pcie_ipc_allreduce"] = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1"
    return live


def _flag_value(argv, flag):
    """The value the command line gives flag (the last one wins, as argparse takes it); True for a bare switch."""
    value = None
    for index, word in enumerate(argv):
        name, equals, given = word.partition("=")
        if name == flag:
            value = given if equals else (argv[index + 1] if index + 1 < len(argv) and not
                                          argv[index + 1].startswith("--") else True)
    return value


def live_options(chosen, argv, environ):
    """{experiment: why} for the tuning options of the effects whose environment and flags the server has."""
    live = {}
    for name, effect in sorted((chosen or {}).items()):
        env, flags = effect.get("env") or {}, effect.get("flags") or {}
        if not env and not flags:
            continue
        if all(environ.get(variable) == str(value) for variable, value in env.items()) and all(
                str(_flag_value(argv, flag)) == str(value) for flag, value in flags.items()):
            live[name] = " ".join(["%s=%s" % item for item in sorted(env.items())]
                                  + ["%s %s" % item for item in sorted(flags.items())])
    return live


def sglang_release():
    """The version of the SGLang this interpreter imports, as pip installed it; None without one."""
    try:
        from importlib import metadata
        return metadata.version("sglang")
    except Exception:  # no SGLang for this interpreter
        return None


def live_releases(chosen, release):
    """{effect: why} for the effects that name the installed SGLang release ("release": "0.5.22"): a release that
    is slower or faster on these GPUs, for the upgrade canary."""
    return {name: "SGLang %s is installed" % release for name, effect in sorted((chosen or {}).items())
            if release and str(effect.get("release", "")) == str(release)}


def effects(environ):
    """experiment -> effect: SGLANG_STANDIN_EFFECTS over the default (the measured fusion regression).

    An effect has speed (factor on tokens/s), speed_above ({in_flight, speed}), speed_by_running ([[running,
    factor], ...]), load_w and util_pct (what the GPUs
    draw and how busy they are under load), wrong_output (true: garbled text), accept_length (the mean accepted
    tokens per step /server_info reports while speculative decoding is asked for, and the tokens a step yields) with
    step_cost ([[running, factor], ...], what a drafting step costs by the requests running, draft_step_cost where
    unset); a tuning option's effect also says
    what makes it live: env (variable -> value) and flags (flag -> value) the server must have; an effect that
    names a release ("release": "0.5.22") is live where that SGLang release is installed.
    """
    chosen = dict(DEFAULT_EFFECTS)
    chosen.update(json.loads(environ.get("SGLANG_STANDIN_EFFECTS") or "{}"))
    return chosen


# What a speculative step costs against a plain decode step, by the requests running, measured: a real SGLang 0.5.16
# on an H200 (docs/evidence/real-sglang-h200.md, seventh run; benchmarks/real_gpu/decode_log.py over
# docs/evidence/real-sglang-h200/2026-12-04-crash-speculative/server-decode-machine-1.log), its decode log's
# generation rate with STANDALONE drafting (4 draft tokens) over the rate without, on the same machine in one run,
# at accept length 1.00 (every drafted token rejected, so the ratio is the step's cost alone): 0.39 with 1 request
# running, 0.27 with 16, 0.065 with 256 (0.06-0.07 on two machines). Every running request drafts and verifies its
# draft tokens each step, so a step costs more the larger the batch.
DRAFT_STEP_COST = ((1, 0.39), (16, 0.27), (256, 0.065))
# What a step of speculative decoding with the model's own MTP (NextN) head costs, by its draft steps and the requests
# running, measured at accept length 1.00 (random weights: every draft rejected, so the ratio is the cost alone) on
# GLM-5's architecture (benchmarks/real_gpu/glm5_arch.py: GlmMoeDsaForCausalLM at GLM-5's head sizes, 6 layers, its
# one NextN layer) served by SGLang 0.5.16 on an H100 (docs/evidence/real-sglang-glm5-arch-h100-2026-12-06.md):
# 1 step, the experiments role's own verdict through the collection, two runs a side, --max-running-requests 64:
# 0.751 of the plain rate at 4 running (937.6 against 1,249.2 output tok/s) and 0.773 at 64 (6,207.8 against
# 8,031.8); 3 steps, glm5_arch.py probe, one run: 0.549 at 4 (687.2 against 1,250.8). Unlike a draft model of its own
# (DRAFT_STEP_COST), the head's draft costs about the same share of a step whatever the batch. 2 steps was not
# measured: the mean of 1 and 3 at the same running count. On the real model the draft's one layer is 1/78 of the
# target's depth, not 1/6, so these are the dearer end; the published gain of 3 steps (x1.41 at 64 streams with
# accept lengths of 2.19-2.80 on 8 RTX PRO 6000) asks a step cost of 0.50 to 0.64, which 0.549 is within.
MTP_STEP_COST = {1: ((4, 0.751), (64, 0.773)), 3: ((4, 0.549),)}


def step_cost(points, in_flight):
    """The rate of a speculative step over a plain one with in_flight requests running: the points ((running,
    factor), ...) joined by straight lines over log(running), flat beyond the first and the last."""
    points = sorted((float(running), float(factor)) for running, factor in points)
    running = max(1.0, float(in_flight))
    if running <= points[0][0]:
        return points[0][1]
    for (low, low_factor), (high, high_factor) in zip(points, points[1:]):
        if running <= high:
            share = (math.log(running) - math.log(low)) / (math.log(high) - math.log(low))
            return low_factor + share * (high_factor - low_factor)
    return points[-1][1]


def draft_step_cost(flags, in_flight):
    """The measured cost of a speculative step where an effect sets none: MTP_STEP_COST for the model's own head
    (--speculative-algorithm NEXTN or EAGLE with no draft model) by its draft steps (--speculative-num-steps, else the
    draft tokens less one); 2 steps the mean of 1 and 3; a draft model of its own, or steps not measured,
    DRAFT_STEP_COST."""
    algorithm = str(flags.get("--speculative-algorithm", "")).upper()
    if algorithm not in ("NEXTN", "EAGLE") or flags.get("--speculative-draft-model-path"):
        return step_cost(DRAFT_STEP_COST, in_flight)
    steps = flags.get("--speculative-num-steps")
    if steps is None and flags.get("--speculative-num-draft-tokens") is not None:
        steps = int(flags["--speculative-num-draft-tokens"]) - 1
    steps = int(steps) if steps is not None else None
    if steps in MTP_STEP_COST:
        return step_cost(MTP_STEP_COST[steps], in_flight)
    if steps == 2:
        return (step_cost(MTP_STEP_COST[1], in_flight) + step_cost(MTP_STEP_COST[3], in_flight)) / 2
    return step_cost(DRAFT_STEP_COST, in_flight)


def speed_of(effect, in_flight=1):
    """One live experiment's factor on the rate: its speed, or speed_above's once more requests are in flight;
    speculative decoding's (an effect with an accept_length) is the tokens each step yields times what the step
    costs at the requests running: accept_length x step_cost(step_cost points, or the measured draft_step_cost).

    speed_above: {"in_flight": N, "speed": factor} plays an experiment that helps
    at low concurrency and hurts at high (or the other way round); speed_by_running ([[running, factor], ...],
    joined as step_cost joins its points) one whose factor moves with the requests running, a MoE backend's.
    """
    above = effect.get("speed_above") or {}
    if above and in_flight > int(above.get("in_flight", 0)):
        return float(above.get("speed", 1.0))
    speed = float(effect.get("speed", 1.0))
    if effect.get("speed_by_running"):
        speed *= step_cost(effect["speed_by_running"], in_flight)
    if "accept_length" in effect:
        speed *= float(effect["accept_length"]) * (step_cost(effect["step_cost"], in_flight) if effect.get("step_cost")
                                                   else draft_step_cost(effect.get("flags") or {}, in_flight))
    return speed


# The noise of a real server's rate, as measured (docs/evidence/real-sglang-h100-2026-12-05.md: a 5.8 B Llama on an
# H100, SGLang 0.5.16, 10 runs a load over three starts): the run-to-run coefficient of variation by requests
# running. It is not the client's counting (the steady window and the server's own counter spread as much) but
# slow swings of the whole server (the card power-capped at high load), so it is one factor shared by every
# request for a period, not a draw per request, whose 256 draws would average away in a run.
H100_RUN_NOISE = ((1, 0.006), (16, 0.008), (64, 0.045), (256, 0.106))


def shared_noise(points, in_flight, now, period, seed):
    """The factor every request starting at ``now`` gets: a normal draw per ``period`` seconds (the same for every
    request of that period, whatever its load), scaled to the coefficient of variation the points ((running, cv),
    ...) give at ``in_flight`` requests running, joined as step_cost joins its points."""
    draw = random.Random("%s-%d" % (seed, int(now // period))).gauss(0.0, 1.0)
    return max(0.05, 1.0 + draw * step_cost(points, in_flight))


def tokens_per_second(live=(), chosen=None, in_flight=1, noise=0.0, rng=None):
    """The one place the generation rate is decided (per request, at the requests in flight when it starts).

    noise: the relative standard deviation of a request's rate (SGLANG_STANDIN_NOISE), drawn from rng.
    """
    rate = float(os.environ.get("SGLANG_STANDIN_TOKENS_PER_SECOND", "400"))
    knee = float(os.environ.get("SGLANG_STANDIN_POWER_KNEE_W") or 0)
    if knee:
        rate *= power_factor(power_limit_w(), knee)
    for gate in live:
        rate *= speed_of((chosen or DEFAULT_EFFECTS).get(gate, {}), in_flight)
    if noise and rng is not None:
        rate *= max(0.05, rng.gauss(1.0, noise))
    return rate


def power_limit_w(state_dir=NVIDIA_SMI_STATE):
    """The lowest power limit set on the GPUs with the nvidia-smi stand-in's -pl; None where none was set."""
    try:
        names = os.listdir(state_dir)
    except OSError:
        return None
    limits = []
    for name in names:
        if name.startswith("power-limit-"):
            try:
                with open(os.path.join(state_dir, name)) as state:
                    limits.append(float(state.read().strip()))
            except (OSError, ValueError):
                continue
    return min(limits) if limits else None


def power_factor(limit_w, knee_w):
    """A card's speed under a power limit: the same down to the knee, then falling as the cube of the limit (on
    RTX PRO 6000 cards 500 W gave the tok/s of 600 W, 450 W 2.4 % less, 300 W 23 % less in one published sweep,
    ../shared/research/launch-knobs-2026-12.md). No knee (SGLANG_STANDIN_POWER_KNEE_W unset): no effect."""
    if not knee_w or limit_w is None or limit_w >= knee_w:
        return 1.0
    return (limit_w / knee_w) ** 3


def cold_factor(started_before, cold_requests, factor):
    """The rate factor of a request that ``started_before`` others preceded since the server started: ``factor``
    for the first ``cold_requests`` (SGLANG_STANDIN_COLD_REQUESTS, SGLANG_STANDIN_COLD_FACTOR), 1 after. A real
    SGLang 0.5.16 on an H200 served its first run after each of 4 starts 17 to 20 % slower than the next two
    (docs/evidence/real-sglang-h200.md): 0.82 of the rate for the 12 requests (8 measured, 4 warm-up) of that run."""
    return float(factor) if started_before < int(cold_requests) else 1.0


def wrong_output(live=(), chosen=None):
    """Whether a live experiment garbles the output (as FP8 KV cache does on SM120): a wrong-output mode."""
    return any((chosen or DEFAULT_EFFECTS).get(name, {}).get("wrong_output") for name in live)


def _load_effect(live, chosen):
    """The effect of the live gate that sets the load figures (the lowest draw), {} when none sets a draw."""
    chosen = chosen or DEFAULT_EFFECTS
    setting = [chosen[gate] for gate in live if "load_w" in chosen.get(gate, {})]
    return min(setting, key=lambda effect: float(effect["load_w"])) if setting else {}


def accept_length(live=(), chosen=None):
    """Mean accepted tokens per speculative step, what /server_info reports with speculative decoding on: the
    highest accept_length of a live effect (an MTP option's), None where no live effect sets one."""
    chosen = chosen or DEFAULT_EFFECTS
    lengths = [float(chosen[name]["accept_length"]) for name in live if "accept_length" in chosen.get(name, {})]
    return max(lengths) if lengths else None


def _release_key(release):
    return tuple(int(part) for part in re.findall(r"\d+", str(release))[:3])


def start_error(live=(), chosen=None, release=None):
    """The error a live effect makes the server raise at start-up on the installed release: its "raises" where the
    release is "raises_from" or later (a backend a release cannot run), None otherwise or without a release."""
    chosen = chosen or DEFAULT_EFFECTS
    for name in sorted(live):
        effect = chosen.get(name, {})
        if effect.get("raises") and release and _release_key(release) >= _release_key(effect.get("raises_from", "0")):
            return "%s (%s on SGLang %s)" % (effect["raises"], name, release)
    return None


def first_token_hold_s(live=(), chosen=None):
    """How long a request's first token waits after the request starts, in seconds: the longest first_token_hold_ms
    of a live effect, 0 where none sets one. The tokens after it keep the request's pace from its start (those due
    meanwhile follow at once), so a hold shorter than the request delays its first token and not its end: the
    signature of --num-continuous-decode-steps, whose decode steps run on while a new request waits for its prefill
    (SGLang's help: more throughput, later first tokens)."""
    chosen = chosen or DEFAULT_EFFECTS
    holds = [float(chosen[name]["first_token_hold_ms"]) for name in live if "first_token_hold_ms" in chosen.get(name, {})]
    return max(holds) / 1000.0 if holds else 0.0


def first_token_due(started, index, interval, hold_s):
    """When token ``index`` (0 first) of a request started at ``started`` is due: on the request's pace, the first not
    before the hold."""
    due = started + (index + 1) * interval
    return max(due, started + hold_s) if index == 0 else due


def load_watts(live=(), chosen=None):
    """Per-GPU draw while a request is generating: the lowest a live gate sets, else the healthy draw."""
    return float(_load_effect(live, chosen).get("load_w", LOAD_W))


def load_util_pct(live=(), chosen=None):
    """GPU utilisation while a request is generating: that of the live gate that sets the draw, else the healthy one."""
    return float(_load_effect(live, chosen).get("util_pct", LOAD_UTIL_PCT))


class PowerDraw:
    """The per-GPU draw and utilisation the stand-in emulates, kept in a file for the nvidia-smi stand-in.

    The file holds two numbers: watts, then utilisation in percent.
    """

    def __init__(self, path, load_w, load_util_pct=LOAD_UTIL_PCT):
        self.path = path
        self.load_w = load_w
        self.load_util_pct = load_util_pct
        self.in_flight = 0
        self.closed = False
        self.warned = False
        self.lock = threading.Lock()

    def start(self):
        with self.lock:
            self._write(IDLE_W, IDLE_UTIL_PCT)

    def close(self):
        with self.lock:
            self._write(IDLE_W, IDLE_UTIL_PCT)
            self.closed = True

    @contextlib.contextmanager
    def generating(self):
        with self.lock:
            self.in_flight += 1
            if self.in_flight == 1:
                self._write(self.load_w, self.load_util_pct)
        try:
            yield
        finally:
            with self.lock:
                self.in_flight -= 1
                if self.in_flight == 0:
                    self._write(IDLE_W, IDLE_UTIL_PCT)

    def _write(self, watts, util_pct):
        # Atomic, so nvidia-smi never reads half a number: a temp file beside the target, then os.replace().
        if self.closed:
            return
        temp = None
        try:
            handle, temp = tempfile.mkstemp(prefix=".standin-power-draw.", dir=os.path.dirname(self.path) or ".")
            with os.fdopen(handle, "w") as stream:
                stream.write("%.2f %.0f\n" % (watts, util_pct))
            # Readable by whoever runs nvidia-smi, not only the service user.
            os.chmod(temp, 0o644)
            os.replace(temp, self.path)
        except OSError as exc:
            if temp:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
            if not self.warned:
                self.warned = True
                sys.stderr.write("sglang_standin: cannot write the power draw to %s (%s); nvidia-smi keeps its "
                                 "captured numbers\n" % (self.path, exc))

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for ``python -m sglang.launch_server`` in tests.

The real server this stands in for serves GLM-5-NVFP4, which needs 8 SM120 GPUs
(RTX PRO 6000 Blackwell) and about 410 GB of weights: neither exists on the test
machines. This script takes the same command line the sglang_service role's unit
passes (flags it does not use are accepted and ignored), and answers the HTTP
the collection relies on the way SGLang 0.5.9 does:

- refuses connections while it "loads" (``--standin-load`` or SGLANG_STANDIN_LOAD,
  default 0.5 s), then ``/health`` answers 503 during a warm-up delay
  (``--standin-warmup`` or SGLANG_STANDIN_WARMUP, default 3 s) and 200 after,
  while ``/v1/models`` answers 200 from the moment it listens. The real SGLang
  0.5.16 of docs/evidence/real-sglang-h200.md refused for 55 to 135 s (imports,
  weights, CUDA graphs), then answered /v1/models 200 and /health 503 for 2 to
  13 s (its own warm-up generation), then /health 200; on GLM-5's architecture
  (docs/evidence/real-sglang-glm5-arch-h100-2026-12-06.md) it refused for 49 to
  56 s a restart and 160 s a machine's first start (120 s of it compiling as it
  captured the CUDA graphs), then /health 503 for 4.0 s (10.0 s the first start);
- with ``--enable-metrics``, ``/metrics`` in Prometheus' text format under SGLang's
  names and labels (``sglang:prompt_tokens_total{engine_type="unified",model_name=...}``,
  ``sglang:generation_tokens_total``, ``sglang:num_requests_total``, the
  ``sglang:time_to_first_token_seconds`` and ``sglang:e2e_request_latency_seconds``
  histograms, ``sglang:inter_token_latency_seconds`` (the real server's bucket edges),
  the gauges ``sglang:num_running_reqs`` and ``sglang:num_queue_reqs`` (requests waiting
  for a place under --max-running-requests), and ``sglang:cached_tokens_total``: the
  prompt tokens a radix cache would have served, the longest prefix a prompt shares
  with an earlier one, at most all but its last token, as the real server counted
  255 for a repeated prompt of 256); without it 404, as SGLang mounts /metrics only
  then;
- ``/v1/completions`` and ``/v1/chat/completions``, streaming (SSE, with a usage
  chunk when ``stream_options.include_usage``) and not, generating
  ``max_tokens`` tokens at SGLANG_STANDIN_TOKENS_PER_SECOND per request (slower
  under a power limit below SGLANG_STANDIN_POWER_KNEE_W, where set: the limit the
  nvidia-smi stand-in was given with -pl; sglang_standin_gpu.power_factor), and
  stopping earlier at an end-of-sequence unless ``ignore_eos``; the first
  SGLANG_STANDIN_COLD_REQUESTS requests after a start (default 0) at
  SGLANG_STANDIN_COLD_FACTOR of that rate (default 0.82), as the real server's
  first run after a start was 17 to 20 % slow;
- ``/server_info`` with the ``--speculative-algorithm`` asked for and, once it has
  served a request with a live effect's ``accept_length``, SGLang's
  ``internal_states[0].avg_spec_accept_length`` (what bench_serving and
  serving_benchmark report as the accept length), and ``max_running_requests``:
  the one asked for, else 48 with speculative decoding on (SGLang 0.5.16 resets
  it so for every algorithm, arg_groups/speculative_hook.py), else null, as the
  real 0.5.16 server answered without it (docs/evidence/real-sglang-h200.md,
  fifth run). That many requests decode at once; the rest wait their turn, in
  their time to first token, as in SGLang's waiting queue;
- with ``--api-key``, or an ``api-key`` in the ``--config`` file (server
  arguments as YAML; this stand-in reads the JSON form the service role writes),
  everything but ``/health*`` and ``/metrics`` wants ``Authorization: Bearer <key>``
  (SGLang's rule, sglang/srt/utils/auth.py).

With ``--nnodes N --node-rank R --dist-init-addr HOST:PORT`` it is one node of a model across hosts
(sglang_standin_nodes.py): rank 0 serves once every other rank has joined it at that address (/health 503
until then), a node of rank 1 or more joins rank 0 and answers /health alone; flags SGLang would refuse
(a rank outside 0..N-1, no address) make it exit 2.

SGLANG_STANDIN_FAIL_AT_START=1 makes it exit 1 at once with a message on
stderr, as a launch that cannot load its model does.

The text a prompt gets at temperature 0 is the same within one start, and its last
part (past SGLANG_STANDIN_STABLE_SHARE of it, default 0.6) may differ between two
starts (SGLANG_STANDIN_START_SEED, else a random 0 or 1 at start): the real server
changed 3 of 4 parity outputs after a restart of one configuration, each after its
first 41 to 74 %, two variants alternating (near-tied logits of random weights).
Asked with ``logprobs`` it gives the top two a step (logprobs()): the word where
two starts part is a near-tie (SGLANG_STANDIN_TIE_MARGIN nats, default 0.02),
every other word sure.

It also plays what the gates of data/sglang_releases.yml do to a real server on
the GPUs, so that the smoke test's experiments have something to measure. Like the
real server, it runs with the SGLang venv's interpreter and sees only what that
server would see: the installed SGLang's source, its own command line and its
environment. A gate is live for it when

- flashinfer_allreduce_fusion: the fusion condition of the installed SGLang
  (layers/communicator.py up to 0.5.20, layers/layer_boundary/residual/add_norm.py
  from 0.5.21) lets SM120 in, and the command line asks for the fusion
  (--enable-flashinfer-allreduce-fusion or --flashinfer-allreduce-fusion-backend);
- custom_allreduce_pcie: should_custom_ar in custom_all_reduce.py lets SM120 in;
- pcie_ipc_allreduce: SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1 in its environment.

What a live gate does comes from SGLANG_STANDIN_EFFECTS, a JSON object experiment ->
{"speed": factor on tokens/s, "speed_above": {"in_flight": N, "speed": factor
once more than N requests are in flight}, "load_w": per-GPU draw under load,
"util_pct": GPU utilisation under load, "wrong_output": true for garbled text,
"accept_length": speculative decoding's mean accepted tokens per step, its rate
that many times the rate of a step's cost by the requests running, "step_cost":
[[running, factor], ...] (by default the cost measured on a real server:
sglang_standin_gpu.MTP_STEP_COST for the model's own head by its draft steps,
DRAFT_STEP_COST for a draft model of its own), "first_token_hold_ms": the first token of
each request not before that long after it starts, the rest on their pace
(more throughput with later first tokens, sglang_standin_gpu.first_token_hold_s),
"raises" and "raises_from": the error the server exits with at start-up where
that release or a later one is installed (by default the cutlass MoE runner on
NVFP4 from 0.5.16, as the real one raises NotImplementedError)};
a tuning option's effect also names what makes it live, "env" (variable ->
value) and "flags" (flag -> value) on the server; an effect naming a "release"
is live where that SGLang release is installed (a release slower on these GPUs). By default the fusion gate
plays the regression measured when it was first tried (GLM-5-NVFP4 on 8x RTX
PRO 6000: about 3,740 -> 236 output tok/s, the GPUs at 125 W of 600 W, busy: a
spin-wait) and the others change nothing. SGLANG_STANDIN_NOISE is the relative
standard deviation of each request's rate; SGLANG_STANDIN_RUN_NOISE ("h100" or
[[running, cv], ...]) the real server's run-to-run noise by requests running, a
factor shared by every request for SGLANG_STANDIN_NOISE_PERIOD_S (5), and
SGLANG_STANDIN_START_DRIFT a factor drawn at each start (the shape measured on a
real H100: sglang_standin_gpu.H100_RUN_NOISE); the warm-up is
the start-up delay a restart costs. stderr says what it found, and why.

- It writes the power draw (watts) and utilisation (percent) it emulates for each GPU (all alike), two numbers, to
  SGLANG_STANDIN_POWER_FILE (default /var/lib/sglang/standin-power-draw, in the
  service's WorkingDirectory, which the service user owns): the load draw while
  at least one generation request is in flight (480 W, 0.8 of the 600 W limit,
  at 96 % utilisation, or the live gates' figures), the idle ones (60 W, 0 %) otherwise, at start and at
  exit (SIGTERM, SIGINT). Each write is a temp file in the same directory and os.replace().

How the two stand-ins cooperate: the nvidia-smi stand-in
(molecule/resources/nvidia-smi/nvidia_smi_standin.py, /usr/bin/nvidia-smi in the
containers) reports that file's number as every GPU's ``power.draw`` when the
file exists, so serving_benchmark's power sampling, which runs nvidia-smi while
the load runs, sees the GPUs fall from 0.8 to about 0.2 of their limit exactly
when the throughput collapses. Without the file it reports the capture's idle
numbers, as before.

Standard library only: the unit runs it as ``/usr/bin/python3 sglang_standin.py``
(no shebang: ansible-test allows only ``#!/usr/bin/env python`` here, which
Debian does not have).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Beside this file (the unit runs it as a script, so its directory is on sys.path).
import sglang_standin_nodes as nodes
from sglang_standin_gpu import (
    DEFAULT_EFFECTS,
    H100_RUN_NOISE,
    IDLE_W,
    POWER_FILE,
    PowerDraw,
    accept_length,
    effects,
    first_token_due,
    first_token_hold_s,
    live_gates,
    live_options,
    live_releases,
    load_util_pct,
    start_error,
    load_watts,
    sglang_package_dir,
    sglang_release,
    cold_factor,
    shared_noise,
    tokens_per_second,
    wrong_output,
)

FAIL_AT_START_MESSAGE = "sglang_standin: failing at start on purpose (SGLANG_STANDIN_FAIL_AT_START=1)"

# Tokens generated before a natural end-of-sequence when ignore_eos is false.
EOS_AFTER_TOKENS = 24
# SGLang's default when a completion request names no max_tokens.
DEFAULT_MAX_TOKENS = 16
# The words it generates: chosen by the prompt, so the same prompt at temperature 0 gets the same text and
# another prompt another one (the smoke test's parity check compares them); a wrong-output experiment garbles them,
# as FP8 KV cache garbles GLM-5 on SM120.
VOCABULARY = (" the", " of", " GPU", " token", " model", " Paris", " is", " a", " fast", " kernel", " and", " cache")
GARBLED = " !!"
# The logprob margins of its top two tokens a step (a completion asked with logprobs): where two starts part (the
# first word past the stable share) a near-tie, elsewhere a token it is sure of, and so is a garbling server of its
# garbage. SGLANG_STANDIN_TIE_MARGIN sets the near-tie's (nats). The real margins at such a part are not measured yet
# (benchmarks/real_gpu/glm5_arch.py asks the parity prompts with logprobs for that): 0.02 is assumed, a near-flat
# random-weight logit pair, well inside experiments_parity_tie_nats.
SURE_MARGIN = 3.0
TIE_MARGIN = 0.02


# The --config file's keys this stand-in reads, each the flag of that name (as SGLang reads the file).
CONFIG_KEYS = ("api-key", "speculative-algorithm", "max-running-requests")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--model-path", "--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--served-model-name")
    parser.add_argument("--api-key")
    parser.add_argument("--config")
    parser.add_argument("--context-length", type=int)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--dist-init-addr")
    parser.add_argument("--standin-warmup", type=float,
                        default=float(os.environ.get("SGLANG_STANDIN_WARMUP", "3")))
    parser.add_argument("--standin-load", type=float, default=float(os.environ.get("SGLANG_STANDIN_LOAD", "0.5")))
    parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--speculative-algorithm")
    parser.add_argument("--max-running-requests", type=int)
    args, ignored = parser.parse_known_args(argv)
    if args.config:
        # SGLang merges the file's arguments under the command line's, as --<key> <value>.
        with open(args.config, encoding="utf-8") as handle:
            config = json.load(handle)
        for key in CONFIG_KEYS:
            dest = key.replace("-", "_")
            if getattr(args, dest) is None and config.get(key) is not None:
                setattr(args, dest, config[key])
    return args, ignored


# What SGLang 0.5.16 sets --max-running-requests to when speculative decoding is on and it is unset (every handler
# of arg_groups/speculative_hook.py: EAGLE, NEXTN, STANDALONE, NGRAM, ...).
SPECULATIVE_MAX_RUNNING = 48


def max_running_requests(asked, speculative):
    """The requests decoded at once: those asked for, else 48 with speculative decoding, else no limit (None)."""
    if asked is not None:
        return asked
    return SPECULATIVE_MAX_RUNNING if speculative else None


class Standin:
    def __init__(self, args, live=(), chosen=None, power_file=POWER_FILE):
        self.model = args.served_model_name or args.model_path
        self.api_key = args.api_key
        self.context_length = args.context_length or 202752
        self.ready = threading.Event()
        # A model across hosts (rank 0): set while every other rank is joined.
        self.nodes_joined = None
        self.created = int(time.time())
        self.live = sorted(live)
        self.chosen = chosen or DEFAULT_EFFECTS
        self.power = PowerDraw(power_file, load_watts(self.live, self.chosen), load_util_pct(self.live, self.chosen))
        self.garbled = wrong_output(self.live, self.chosen)
        self.noise = float(os.environ.get("SGLANG_STANDIN_NOISE", "0") or 0)
        self.rng = random.Random()
        # The real noise's shape (sglang_standin_gpu.H100_RUN_NOISE): a factor shared by every request for
        # SGLANG_STANDIN_NOISE_PERIOD_S, its size by the requests running (SGLANG_STANDIN_RUN_NOISE: "h100", or
        # [[running, cv], ...] as JSON), and one factor drawn at each start (SGLANG_STANDIN_START_DRIFT, a relative
        # standard deviation): a restart of one configuration serves at another speed, as a real one did.
        shape = os.environ.get("SGLANG_STANDIN_RUN_NOISE", "")
        self.run_noise = H100_RUN_NOISE if shape == "h100" else json.loads(shape) if shape else None
        self.noise_period = float(os.environ.get("SGLANG_STANDIN_NOISE_PERIOD_S", "5") or 5)
        self.noise_seed = self.rng.random()
        drift = float(os.environ.get("SGLANG_STANDIN_START_DRIFT", "0") or 0)
        self.start_factor = max(0.05, self.rng.gauss(1.0, drift))
        seed = os.environ.get("SGLANG_STANDIN_START_SEED")
        self.start_seed = int(seed) if seed not in (None, "") else random.randrange(2)
        self.stable_share = float(os.environ.get("SGLANG_STANDIN_STABLE_SHARE", "0.6"))
        self.metrics = Metrics(self.model) if getattr(args, "enable_metrics", False) else None
        # A cold start: the first requests after a start run slower (off unless asked for; see cold_factor).
        self.cold_requests = int(os.environ.get("SGLANG_STANDIN_COLD_REQUESTS", "0") or 0)
        self.cold_factor = float(os.environ.get("SGLANG_STANDIN_COLD_FACTOR", "0.82") or 0.82)
        self.requests_started = 0
        self.count_lock = threading.Lock()
        self.speculative = getattr(args, "speculative_algorithm", None)
        self.accept_length = accept_length(self.live, self.chosen)
        self.first_token_hold = first_token_hold_s(self.live, self.chosen)
        asked = getattr(args, "max_running_requests", None)
        self.max_running = max_running_requests(int(asked) if asked is not None else None, self.speculative)
        self.slots = threading.Semaphore(self.max_running) if self.max_running else None

    def running_slot(self):
        """A place among the requests decoded at once, waited for where they are limited."""
        return self.slots if self.slots is not None else contextlib.nullcontext()

    def serving(self):
        return self.ready.is_set() and (self.nodes_joined is None or self.nodes_joined.is_set())

    def tokens_per_second(self, in_flight=1):
        rate = tokens_per_second(self.live, self.chosen, in_flight, self.noise, self.rng) * self.start_factor
        if self.run_noise:
            rate *= shared_noise(self.run_noise, in_flight, time.time(), self.noise_period, self.noise_seed)
        return rate

    def request_rate(self, in_flight=1):
        """The rate of a request starting now, counted among those since the start (the cold ones are slower)."""
        with self.count_lock:
            before = self.requests_started
            self.requests_started += 1
        return self.tokens_per_second(in_flight) * cold_factor(before, self.cold_requests, self.cold_factor)

    def words(self, body, count):
        """The text of a completion: count words picked by the prompt, or garbled ones."""
        if self.garbled:
            return [GARBLED] * count
        seed, stable = self.word_seed(body, count)
        return [VOCABULARY[(seed + index * 7 + (self.start_seed * 5 if index >= stable else 0)) % len(VOCABULARY)]
                for index in range(count)]

    def word_seed(self, body, count):
        """What picks a completion's words: the prompt's seed, and the first word two starts may differ at."""
        return sum(ord(char) for char in prompt_text(body)), int(round(count * self.stable_share))

    def logprobs(self, body, count):
        """OpenAI's completions ``logprobs`` of the words(): each token and the two most likely a step, the margin
        between them a near-tie where two starts part and SURE_MARGIN elsewhere."""
        chosen = self.words(body, count)
        seed, stable = self.word_seed(body, count)
        tie = float(os.environ.get("SGLANG_STANDIN_TIE_MARGIN", TIE_MARGIN))
        top = []
        for index, word in enumerate(chosen):
            if not self.garbled and index == stable:
                other, margin = VOCABULARY[(seed + index * 7 + (1 - self.start_seed) * 5) % len(VOCABULARY)], tie
            else:
                other, margin = VOCABULARY[(seed + index * 7 + 3) % len(VOCABULARY)], SURE_MARGIN
            top.append({word: -0.05, other: round(-0.05 - margin, 4)})
        return {"tokens": chosen, "token_logprobs": [-0.05] * len(chosen), "top_logprobs": top,
                "text_offset": [-1] * len(chosen)}

    def server_info(self):
        """/server_info in the part the collection reads (SGLang's managers/scheduler.py): the speculative algorithm
        asked for and, once it has decoded requests, internal_states[0].avg_spec_accept_length."""
        state = {"last_gen_throughput": 0.0}
        if self.speculative and self.accept_length and self.requests_started:
            state["avg_spec_accept_length"] = self.accept_length
        return {"model_path": self.model, "speculative_algorithm": self.speculative,
                "max_running_requests": self.max_running, "internal_states": [state], "version": "stand-in"}

    def tokens_for(self, body):
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_MAX_TOKENS
        max_tokens = max(0, int(max_tokens))
        if body.get("ignore_eos"):
            return max_tokens, "length"
        if max_tokens > EOS_AFTER_TOKENS:
            return EOS_AFTER_TOKENS, "stop"
        return max_tokens, "length"


class Metrics:
    """SGLang's request counters and histograms (sglang/srt/observability/metrics_collector.py), as the real
    0.5.16 server names and labels them in /metrics."""

    BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, float("inf"))
    # The real 0.5.16 server's edges for the time between tokens (docs/evidence/real-sglang-h200/2026-12-03-8b).
    ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2,
                   0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, float("inf"))

    def __init__(self, model):
        self.labels = 'engine_type="unified",model_name="%s"' % model
        self.lock = threading.Lock()
        self.counters = {"sglang:prompt_tokens_total": 0, "sglang:generation_tokens_total": 0,
                         "sglang:num_requests_total": 0, "sglang:cached_tokens_total": 0}
        self.prefix_cache = PrefixCache()
        self.histograms = {name: [0.0, 0, [0] * len(self.BUCKETS)] for name in
                           ("sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds")}
        self.itl = [0.0, 0, [0] * len(self.ITL_BUCKETS)]
        self.running = 0
        self.queued = 0

    def request_queued(self):
        """A request waits for a place among those decoded at once (--max-running-requests), as in SGLang's queue."""
        with self.lock:
            self.queued += 1

    def request_started(self, was_queued=False):
        with self.lock:
            self.running += 1
            self.queued -= 1 if was_queued else 0

    def request_done(self, prompt, generated, ttft, e2e, words=()):
        with self.lock:
            self.running -= 1
            self.counters["sglang:prompt_tokens_total"] += prompt
            self.counters["sglang:cached_tokens_total"] += self.prefix_cache.served(words)
            self.counters["sglang:generation_tokens_total"] += generated
            self.counters["sglang:num_requests_total"] += 1
            for name, value in (("sglang:time_to_first_token_seconds", ttft),
                                ("sglang:e2e_request_latency_seconds", e2e)):
                histogram = self.histograms[name]
                histogram[0] += value
                histogram[1] += 1
                for index, bound in enumerate(self.BUCKETS):
                    if value <= bound:
                        histogram[2][index] += 1
            # Each gap between two tokens, as SGLang observes them; the stand-in paces them evenly, so each is the
            # request's decode time over its gaps.
            if generated > 1:
                gap, gaps = (e2e - ttft) / (generated - 1), generated - 1
                self.itl[0] += gap * gaps
                self.itl[1] += gaps
                for index, bound in enumerate(self.ITL_BUCKETS):
                    if gap <= bound:
                        self.itl[2][index] += gaps

    def text(self):
        lines = []
        with self.lock:
            for name, value in self.counters.items():
                # SGLang labels the cache's counter by where the tokens were held too.
                labels = ('cache_source="device",' if name == "sglang:cached_tokens_total" else "") + self.labels
                lines += ["# TYPE %s counter" % name[:-len("_total")], "%s{%s} %s" % (name, labels, float(value))]
            for name, (total, count, buckets) in self.histograms.items():
                lines.append("# TYPE %s histogram" % name)
                for bound, hits in zip(self.BUCKETS, buckets):
                    edge = "+Inf" if bound == float("inf") else bound
                    lines.append('%s_bucket{%s,le="%s"} %s' % (name, self.labels, edge, float(hits)))
                lines += ["%s_count{%s} %s" % (name, self.labels, float(count)),
                          "%s_sum{%s} %s" % (name, self.labels, total)]
            total, count, buckets = self.itl
            lines.append("# TYPE sglang:inter_token_latency_seconds histogram")
            for bound, hits in zip(self.ITL_BUCKETS, buckets):
                edge = "+Inf" if bound == float("inf") else bound
                lines.append('sglang:inter_token_latency_seconds_bucket{%s,le="%s"} %s' % (self.labels, edge, float(hits)))
            lines += ["sglang:inter_token_latency_seconds_count{%s} %s" % (self.labels, float(count)),
                      "sglang:inter_token_latency_seconds_sum{%s} %s" % (self.labels, total)]
            for name, value in (("sglang:num_running_reqs", self.running), ("sglang:num_queue_reqs", self.queued)):
                lines += ["# TYPE %s gauge" % name,
                          '%s{%s,moe_ep_rank="0",pp_rank="0",tp_rank="0"} %s' % (name, self.labels, float(value))]
        return "\n".join(lines) + "\n"


class PrefixCache:
    """SGLang's radix cache as its ``sglang:cached_tokens_total`` counts it: of each prompt, the longest prefix an
    earlier prompt began with, all but its last token at most (the real 0.5.16 counted 255 of a repeated 256-token
    prompt). It holds up to ``capacity`` tokens and then forgets everything at once, where the real one evicts its
    least recently used leaves: enough to show a client whose prompts repeat (bench_serving's random-ids did, 11 to
    15 % of its prompt tokens at c256 on the real server, docs/evidence/real-sglang-h200.md)."""

    def __init__(self, capacity=200000):
        self.capacity = capacity
        self.root = {}
        self.size = 0

    def served(self, tokens):
        """Tokens of this prompt the cache held; the prompt is held from then on."""
        node, matched = self.root, 0
        for token in tokens:
            if token not in node:
                break
            node, matched = node[token], matched + 1
        hit = min(matched, max(0, len(tokens) - 1))
        if self.size + len(tokens) - matched > self.capacity:
            node, self.size, matched = {}, 0, 0
            self.root = node
        for token in tokens[matched:]:
            node = node.setdefault(token, {})
            self.size += 1
        return hit


def prompt_text(body):
    if "messages" in body:
        return " ".join(str(message.get("content", "")) for message in body["messages"])
    prompt = body.get("prompt", "")
    return " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)


def prompt_tokens(body):
    return max(1, len(prompt_text(body).split()))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog is 5: a client opening 8 or more connections at once would see SYNs
    # dropped and retried a second later. SGLang's uvicorn listens with a backlog of 2048.
    request_queue_size = 2048


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sglang-standin"
    # Each token is its own small write, sent at once, as uvicorn (TCP_NODELAY) sends SGLang's: with Nagle's
    # algorithm a token would wait for the client's delayed ACK, about 40 ms.
    disable_nagle_algorithm = True
    standin = None  # set in main()

    def log_message(self, format, *args):
        if self.path.startswith("/health"):
            return  # polled every second or so while the server starts
        sys.stderr.write("sglang_standin: %s %s\n" % (self.address_string(), format % args))

    # ------------------------------------------------------------ plumbing
    def _send_json(self, status, payload):
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _authorized(self):
        if not self.standin.api_key:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _space, token = header.partition(" ")
        if scheme.lower() == "bearer" and token == self.standin.api_key:
            return True
        self._send_json(401, {"error": "Unauthorized"})
        return False

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, payload):
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self._chunk(("data: %s\n\n" % text).encode("utf-8"))

    # ------------------------------------------------------------ routes
    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path.startswith("/health"):
            self._send_empty(200 if self.standin.serving() else 503)
        elif path == "/metrics" and self.standin.metrics is not None:
            data = self.standin.metrics.text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif path == "/server_info":
            if self._authorized():
                self._send_json(200, self.standin.server_info())
        elif path == "/v1/models":
            if self._authorized():
                self._send_json(200, {"object": "list", "data": [{
                    "id": self.standin.model, "object": "model", "created": self.standin.created,
                    "owned_by": "sglang", "root": self.standin.model,
                    "max_model_len": self.standin.context_length}]})
        else:
            self._send_json(404, {"detail": "Not Found"})

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path not in ("/v1/completions", "/v1/chat/completions"):
            self._send_json(404, {"detail": "Not Found"})
            return
        if not self._authorized():
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            self._send_json(400, {"object": "error", "message": "invalid JSON: %s" % exc, "code": 400})
            return
        # Requests that arrive during the warm-up wait for it, as SGLang queues them.
        self.standin.ready.wait()
        if self.standin.nodes_joined is not None:
            self.standin.nodes_joined.wait()
        chat = path == "/v1/chat/completions"
        metrics = self.standin.metrics
        self.arrived, self.first_token_at = time.monotonic(), None
        # Beyond --max-running-requests a request waits, its time to first token running.
        if metrics is not None:
            metrics.request_queued()
        with self.standin.running_slot():
            if metrics is not None:
                metrics.request_started(was_queued=True)
            try:
                if body.get("stream"):
                    self._stream(body, chat)
                else:
                    self._complete(body, chat)
            finally:
                if metrics is not None:
                    done = time.monotonic()
                    count = self.standin.tokens_for(body)[0]
                    metrics.request_done(prompt_tokens(body), count, (self.first_token_at or done) - self.arrived,
                                         done - self.arrived, prompt_text(body).split())

    # ------------------------------------------------------------ generation
    def _generate(self, body, count):
        """Yield count tokens, paced at tokens_per_second() for the requests in flight as this one starts."""
        interval = 1.0 / self.standin.request_rate(self.standin.power.in_flight)
        started = time.monotonic()
        for index, word in enumerate(self.standin.words(body, count)):
            delay = first_token_due(started, index, interval, self.standin.first_token_hold) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if index == 0:
                self.first_token_at = time.monotonic()
            yield word

    def _usage(self, body, completion):
        prompt = prompt_tokens(body)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _complete(self, body, chat):
        count, finish = self.standin.tokens_for(body)
        with self.standin.power.generating():
            text = "".join(self._generate(body, count))
        rid = uuid.uuid4().hex
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish,
                      "logprobs": self.standin.logprobs(body, count) if body.get("logprobs") else None}
            kind = "text_completion"
        self._send_json(200, {"id": rid, "object": kind, "created": int(time.time()), "model": self.standin.model,
                              "choices": [choice], "usage": self._usage(body, count)})

    def _stream(self, body, chat):
        count, finish = self.standin.tokens_for(body)
        rid = uuid.uuid4().hex
        kind = "chat.completion.chunk" if chat else "text_completion"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(choice_fields, **extra):
            choice = dict({"index": 0, "finish_reason": None}, **choice_fields)
            payload = {"id": rid, "object": kind, "created": int(time.time()), "model": self.standin.model,
                       "choices": [choice]}
            payload.update(extra)
            self._event(payload)

        if chat:
            event({"delta": {"role": "assistant", "content": ""}})
        with self.standin.power.generating():
            for token in self._generate(body, count):
                event({"delta": {"content": token}} if chat else {"text": token, "logprobs": None})
        event({"delta": {}, "finish_reason": finish} if chat else {"text": "", "finish_reason": finish})
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({"id": rid, "object": kind, "created": int(time.time()), "model": self.standin.model,
                         "choices": [], "usage": self._usage(body, count)})
        self._event("[DONE]")
        self._chunk(b"")


class FollowerHandler(BaseHTTPRequestHandler):
    """A node of rank 1 or more: SGLang's dummy health server, nothing else."""

    protocol_version = "HTTP/1.1"
    server_version = "sglang-standin"

    def log_message(self, format, *args):
        if not self.path.startswith(("/health", "/ping")):
            sys.stderr.write("sglang_standin: %s %s\n" % (self.address_string(), format % args))

    def _answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self._answer(200 if self.path.split("?", 1)[0] in ("/health", "/health_generate", "/ping") else 404)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._answer(404)


def follow(args, address):
    """A node of rank 1 or more: join rank 0, then answer /health alone until rank 0 goes away."""
    try:
        connection = nodes.join(address, args.node_rank, args.nnodes)
    except ValueError as exc:
        sys.stderr.write("sglang_standin: %s\n" % exc)
        return 1
    nodes.exit_when_closed(connection, address)
    if ":" in args.host:
        Server.address_family = socket.AF_INET6
    server = Server((args.host, args.port), FollowerHandler)
    sys.stderr.write("sglang_standin: node rank %d of %d, answering /health alone on %s:%d\n"
                     % (args.node_rank, args.nnodes, args.host, args.port))
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def main(argv):
    if os.environ.get("SGLANG_STANDIN_FAIL_AT_START") == "1":
        sys.stderr.write(FAIL_AT_START_MESSAGE + "\n")
        return 1
    args, ignored = parse_args(argv)
    if not os.path.isdir(args.model_path):
        sys.stderr.write("sglang_standin: --model-path %s is not a directory\n" % args.model_path)
        return 2
    try:
        address = nodes.plan(args.nnodes, args.node_rank, args.dist_init_addr)
    except ValueError as exc:
        sys.stderr.write("sglang_standin: %s\n" % exc)
        return 2
    if address is not None and args.node_rank > 0:
        return follow(args, address)
    package_dir = sglang_package_dir()
    chosen = effects(os.environ)
    live = dict(live_gates(package_dir, argv, os.environ), **live_options(chosen, argv, os.environ),
                **live_releases(chosen, sglang_release()))
    # A backend the installed release cannot run: the real server raises while it builds the model, and exits.
    raised = start_error(live, chosen, sglang_release())
    if raised:
        time.sleep(max(args.standin_load, 0.0))
        sys.stderr.write("Traceback (most recent call last):\n  (sglang_standin, building the model)\n%s\n" % raised)
        return 1
    standin = Standin(args, live, chosen, os.environ.get("SGLANG_STANDIN_POWER_FILE") or POWER_FILE)
    if address is not None:
        standin.nodes_joined = nodes.Rendezvous(address[1], args.nnodes).complete
    Handler.standin = standin
    if ":" in args.host:
        Server.address_family = socket.AF_INET6
    # Loading: nothing listens yet, as SGLang binds its port only once the weights and CUDA graphs are in.
    time.sleep(max(args.standin_load, 0.0))
    server = Server((args.host, args.port), Handler)
    sys.stderr.write("sglang_standin: SGLang in %s; live gates: %s; emulating %.1f tokens/s per request and %.0f W "
                     "per GPU under load, %.0f W idle, in %s\n"
                     % (package_dir or "(none for this interpreter)",
                        "; ".join("%s (%s)" % item for item in sorted(live.items())) or "none",
                        standin.tokens_per_second(), standin.power.load_w, IDLE_W, standin.power.path))
    sys.stderr.write("sglang_standin: standing in for sglang.launch_server, serving %s from %s on %s:%d "
                     "(load %.1f s, warm-up %.1f s, %.1f tokens/s per request); ignored flags: %s\n"
                     % (standin.model, args.model_path, args.host, args.port, args.standin_load, args.standin_warmup,
                        standin.tokens_per_second(), " ".join(ignored) or "none"))
    standin.power.start()
    # systemd stops the unit with SIGTERM, possibly mid-request: leave the GPUs reading idle, as real ones would.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    timer = threading.Timer(args.standin_warmup, standin.ready.set)
    timer.daemon = True
    timer.start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        standin.power.close()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

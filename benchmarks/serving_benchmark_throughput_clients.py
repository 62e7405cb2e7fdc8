# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two clients of serving_benchmark_throughput.py and how each one is measured.

serving_benchmark's run_benchmark (module_utils, power sampling off) and `python -m sglang.bench_serving`, each
run to completion as its own process pinned to the client core, against the stand-in server of
serving_benchmark_throughput_server.py; CpuWatch reads their CPU seconds from /proc every 10 ms, and
run_client() puts each tool's own figures next to the server's count and the CPU clock's.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from serving_benchmark_throughput_server import MODEL_NAME, TOKENS, VOCAB

REPO = Path(__file__).resolve().parent.parent
# The script whose internal modes (--serve, --client-serving-benchmark) the processes here run.
SCRIPT = Path(__file__).resolve().with_name("serving_benchmark_throughput.py")
# Outside the checkout: inside, `ansible-galaxy collection build` would pack it (build_ignore names only the
# top-level .venv) and the device tool would carry it.
BENCH_VENV = Path(os.environ.get("SM120_BENCH_VENV") or Path.home() / ".cache" / "sm120-sglang" / "bench-serving-venv")
CLIENT_CORE = 1


# ---------------------------------------------------------------- the two clients

def import_module_utils():
    """The collection's module_utils, through .collections (pytest.ini) or, without it, a temporary link."""
    collections = REPO / ".collections"
    if not (collections / "ansible_collections" / "sm120" / "sglang").exists():
        collections = Path(tempfile.mkdtemp(prefix="sm120-collections-"))
        (collections / "ansible_collections" / "sm120").mkdir(parents=True)
        (collections / "ansible_collections" / "sm120" / "sglang").symlink_to(REPO)
    sys.path.insert(0, str(collections))
    from ansible_collections.sm120.sglang.plugins.module_utils import serving_benchmark, serving_benchmark_power
    return serving_benchmark, serving_benchmark_power


def client_serving_benchmark(args):
    """One serving_benchmark run, as the module runs it (power sampling off: no GPU here); JSON on stdout.

    run_client() started it on its cores.
    """
    sb, sbp = import_module_utils()
    plan = sb.BenchmarkPlan(url=args.url, model=MODEL_NAME, concurrency=args.concurrency,
                            num_requests=args.num_prompts, num_warmup=args.warmup, input_tokens=args.input_len,
                            output_tokens=args.output_len, timeout=args.client_timeout)
    started = time.process_time()
    try:
        result = sb.run_benchmark(plan, sbp.PowerPlan(enabled=False))
    except sb.BenchmarkError as exc:
        result = dict(exc.result, failed=str(exc))
    result["process_cpu_s"] = time.process_time() - started
    print(json.dumps(result))


def make_assets(directory):
    """Runs in the bench venv: the word-level tokenizer and a ShareGPT-format file bench_serving's random dataset reads."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    directory = Path(directory)
    vocab = {"[UNK]": 0}
    vocab.update((word, number + 1) for number, word in enumerate(VOCAB))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]").save_pretrained(directory / "tokenizer")

    rng = random.Random(1)

    def words(low, high):
        return " ".join(rng.choice(VOCAB) for dummy in range(rng.randint(low, high)))

    conversations = [{"id": "stub-%d" % n, "conversations": [{"from": "human", "value": words(50, 400)},
                                                             {"from": "gpt", "value": words(50, 400)}]}
                     for n in range(4096)]
    (directory / "sharegpt.json").write_text(json.dumps(conversations))

    # The property the comparison rests on: the text the server streams re-tokenizes to one token per chunk.
    tokenizer = AutoTokenizer.from_pretrained(str(directory / "tokenizer"))
    streamed = "".join(json.loads(token) for token in TOKENS * 3)
    count = len(tokenizer.encode(streamed, add_special_tokens=False))
    if count != 3 * len(TOKENS) or tokenizer.num_special_tokens_to_add() != 0:
        raise SystemExit("test tokenizer does not count one token per streamed word: %d for %d"
                         % (count, 3 * len(TOKENS)))
    print(json.dumps({"tokenizer": str(directory / "tokenizer"), "dataset": str(directory / "sharegpt.json")}))


# ---------------------------------------------------------------- measuring them

class CpuWatch:
    """Samples utime+stime of some processes every 10 ms, so CPU seconds can be read for any time window."""

    def __init__(self, pids):
        self.pids = pids
        self.samples = []
        self.tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cpu(self, pid):
        try:
            with open("/proc/%d/stat" % pid) as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self.tick

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), [self._cpu(pid) for pid in self.pids]))
            self._stop.wait(0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def at(self, when, which):
        """CPU seconds of pids[which] at time ``when``, linearly between samples."""
        points = [(t, cpus[which]) for t, cpus in self.samples if cpus[which] is not None]
        if not points:
            raise ValueError("no CPU samples of process %d" % self.pids[which])
        # Before the first sample the process had barely started; after the last one it had exited (reaped
        # only once wait() returned), so its CPU time no longer grew.
        if when <= points[0][0]:
            return points[0][1]
        if when >= points[-1][0]:
            return points[-1][1]
        for (t0, c0), (t1, c1) in zip(points, points[1:]):
            if t0 <= when <= t1:
                return c0 + (c1 - c0) * (when - t0) / (t1 - t0) if t1 > t0 else c0
        return points[-1][1]


def pinned_to(cores):
    def pin():
        os.sched_setaffinity(0, cores)
    return pin


def local_env():
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", PYTHONUNBUFFERED="1")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(name, None)
    return env


class Server:
    """The stand-in server as its own process: decode steps every step_s (0: unpaced), or, given ttft_s or itl_s,
    each stream on its own clock (first token ttft_s after the request arrived, then one every itl_s)."""

    def __init__(self, step_s, lifetime_s, ttft_s=0.0, itl_s=0.0):
        self.proc = subprocess.Popen([sys.executable, str(SCRIPT), "--serve", "--step-s", repr(step_s),
                                      "--lifetime-s", str(lifetime_s), "--ttft-s", repr(ttft_s),
                                      "--itl-s", repr(itl_s)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=local_env())
        self.port = int(self.proc.stdout.readline())
        self.url = "http://127.0.0.1:%d" % self.port

    def stats(self):
        import urllib.request
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.url + "/stats", timeout=10) as answer:
            return json.loads(answer.read())

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measured(records, count):
    """The last ``count`` streamed requests the server saw (the warm-up ones come first)."""
    streamed = sorted((r for r in records if r["stream"]), key=lambda r: r["arrived"])
    return streamed[-count:]


def run_client(kind, server, args, workdir, assets, label, cores=frozenset({CLIENT_CORE})):
    """Run one client to completion on ``cores``; return its figures next to the server's and the CPU clock's.

    The row holds the tool's own result (``own``) and the server's records of the measured requests (``requests``).
    """
    if kind == "serving_benchmark":
        command = [sys.executable, str(SCRIPT), "--client-serving-benchmark", "--url", server.url]
        for name in ("concurrency", "num_prompts", "input_len", "output_len", "warmup", "client_timeout"):
            command += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    else:
        output_file = workdir / ("bench-serving-%s.jsonl" % label)
        command = [str(BENCH_VENV / "bin" / "python"), "-m", "sglang.bench_serving", "--backend", "sglang-oai",
                   "--base-url", server.url, "--model", assets["tokenizer"], "--served-model-name", MODEL_NAME,
                   "--tokenizer", assets["tokenizer"], "--dataset-name", "random", "--dataset-path", assets["dataset"],
                   "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
                   "--random-range-ratio", "1.0", "--num-prompts", str(args.num_prompts),
                   "--max-concurrency", str(args.concurrency), "--request-rate", "inf",
                   "--warmup-requests", str(args.warmup), "--disable-tqdm", "--seed", "1",
                   "--output-file", str(output_file)]
    log = workdir / ("%s-%s.log" % (kind, label))
    server.stats()  # clears the server's records
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=str(workdir), env=local_env(),
                                preexec_fn=pinned_to(set(cores)))
        with CpuWatch([proc.pid, server.proc.pid]) as watch:
            try:
                rc = proc.wait(args.client_timeout + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = "killed after %d s" % (args.client_timeout + 60)
    text = log.read_text()
    if rc != 0:
        return {"tool": kind, "label": label, "failed": "exit %s; log %s:\n%s" % (rc, log, text[-3000:])}
    if kind == "serving_benchmark":
        own = json.loads(text.strip().splitlines()[-1])
        if own.get("failed"):
            return {"tool": kind, "label": label, "failed": own["failed"]}
        duration, tok_s, tokens = own["duration_s"], own["output_tokens_per_s"], own["output_tokens_total"]
        detail = "token_count_source=%s, completed=%d, failed=%d" % (own["token_count_source"],
                                                                     own["completed_requests"], own["failed_requests"])
        retokenized = None
        ttft, itl = own["ttft_ms"]["p50"], own["itl_ms"]["p50"]
    else:
        own = json.loads(output_file.read_text().strip().splitlines()[-1])
        duration, tok_s, tokens = own["duration"], own["output_throughput"], own["total_output_tokens"]
        retokenized = own["total_output_tokens_retokenized"]
        detail = "completed=%d, retokenized=%d" % (own["completed"], retokenized)
        ttft, itl = own["median_ttft_ms"], own["median_itl_ms"]
    requests = measured(server.stats(), args.num_prompts)
    start = requests[0]["arrived"]
    end = start + duration
    client_cpu = watch.at(end, 0) - watch.at(start, 0)
    server_cpu = watch.at(end, 1) - watch.at(start, 1)
    server_tokens = sum(r["tokens"] for r in requests)
    firsts = [1000 * (r["first_token"] - r["arrived"]) for r in requests if r.get("first_token")]
    server_ttft = statistics.median(firsts) if firsts else float("nan")
    return {"tool": kind, "label": label, "duration_s": duration, "tok_s": tok_s, "tokens": tokens,
            "retokenized": retokenized, "server_tokens": server_tokens, "server_tok_s": server_tokens / duration,
            "client_cpu_s": client_cpu, "client_core": client_cpu / duration, "server_core": server_cpu / duration,
            "tok_per_cpu_s": server_tokens / client_cpu if client_cpu > 0 else float("nan"),
            "ttft_p50_ms": ttft, "itl_p50_ms": itl,
            "server_ttft_p50_ms": server_ttft, "detail": detail, "own": own, "requests": requests}

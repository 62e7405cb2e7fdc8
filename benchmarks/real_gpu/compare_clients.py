# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""serving_benchmark and sglang.bench_serving side by side on one real SGLang server, its /metrics the third witness.

At each load of the harness profile (inventory/group_vars/gpu_hosts.yml), ``--repeats`` rounds, the two tools
taking turns at going first: the collection's client (plugins/module_utils/serving_benchmark.run_benchmark, as
the module runs it, prompts of token ids, power sampled) and SGLang's own ``sglang.bench_serving`` (its
``run_benchmark`` in this process, ``--dataset-name random-ids``: the same requests, warm-up, lengths and
concurrency, its prompts sent as token ids too). Which endpoint bench_serving sends them to (``--bench-endpoint``):

- ``completions`` (the default): ``--backend sglang-oai``, /v1/completions, the endpoint serving_benchmark, users and
  the router use, with random-ids' token ids as the prompt. bench_serving keeps ids as ids only with
  ``--tokenize-prompt``, which it allows with its native backend alone, so this script has its random-ids dataset
  keep them (``RandomDataset.return_text`` false) rather than decode them to text: the first harness run's text came
  back from the server's tokeniser 10 to 15 % longer than bench_serving reported.
- ``generate``: ``--backend sglang --tokenize-prompt``, SGLang's native /generate with ``input_ids``; the second
  harness run's choice, where the server spent 18 to 37 % longer over the /v1/completions requests at c64 than over
  these (docs/evidence/real-sglang-h200.md), so the comparison was of endpoints as much as of clients.

bench_serving's random-ids prompts are runs of consecutive ids, which repeat within a run and across runs, and the
server's radix cache then serves them without prefill: ``--bench-prompts distinct`` (the default) draws their ids one
by one, as serving_benchmark does (see distinct_prompts).

Around every run the server's Prometheus counters are read (``--enable-metrics``): prompt and generation tokens and
requests it counted, and its own time-to-first-token histogram. One JSON line a run; then the medians and their
ratio per load.

    python3 compare_clients.py --url http://127.0.0.1:30000 --model NAME --tokenizer DIR --inventory DIR \
        --repeats 3 --requests c16=256,c64=512 --out compare.jsonl

``--requests`` lengthens a load's runs (requests a run, by load name): the profile's loads last 2 to 13 s on the
H200, so short that a run's first and last waves weigh on its rate.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark import BenchmarkPlan, run_benchmark
from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_power import PowerPlan

WARMUP = 4


def loads_of(inventory, profile_name=None):
    import yaml
    data = yaml.safe_load((Path(inventory) / "group_vars" / "gpu_hosts.yml").read_text())
    profile = data["sglang_service_profiles"][profile_name or data["sglang_service_profile"]]
    return sorted(profile["loads"].items(), key=lambda item: item[1]["concurrency"])


# ------------------------------------------------------------------ the server's counters

def metrics(url):
    """Counter and histogram sums of SGLang's /metrics: name -> value, summed over label sets."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _space, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        try:
            values[name] = values.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return values


def witness(before, after):
    def delta(name):
        return after.get(name, 0.0) - before.get(name, 0.0)

    ttft_count = delta("sglang:time_to_first_token_seconds_count")
    e2e_count = delta("sglang:e2e_request_latency_seconds_count")
    queue_count = delta("sglang:queue_time_seconds_count")
    return {
        "prompt_tokens": delta("sglang:prompt_tokens_total"),
        # Prompt tokens the radix cache served (no prefill): a client whose prompts repeat an earlier run's is
        # measured on less work. The third run found 17 % of all prompt tokens so served (real-sglang-h200.md).
        "cached_tokens": delta("sglang:cached_tokens_total"),
        "queue_mean_ms": round(1000 * delta("sglang:queue_time_seconds_sum") / queue_count, 2) if queue_count else None,
        # CPU seconds of the server's tokenizer and detokenizer processes (the OpenAI layer's side).
        "frontend_cpu_s": round(delta("sglang:process_cpu_seconds_total"), 2),
        "generation_tokens": delta("sglang:generation_tokens_total"),
        "requests": delta("sglang:num_requests_total"),
        "ttft_mean_ms": round(1000 * delta("sglang:time_to_first_token_seconds_sum") / ttft_count, 2)
        if ttft_count else None,
        "e2e_mean_ms": round(1000 * delta("sglang:e2e_request_latency_seconds_sum") / e2e_count, 2)
        if e2e_count else None,
    }


# ------------------------------------------------------------------ the two clients

USAGE_ASKED = b', "stream_options": {"include_usage": true}'


@contextlib.contextmanager
def without_usage_chunk():
    """serving_benchmark's requests without ``stream_options.include_usage``, as bench_serving sends them (whose
    parser cannot take the usage chunk's empty ``choices``, so the A/B goes this way): one difference between the
    two clients' requests tried alone. Output tokens are then counted from the stream's chunks."""
    from ansible_collections.sm120.sglang.plugins.module_utils import serving_benchmark as module
    original = module.build_request_body

    def body(plan, prompt):
        text = original(plan, prompt)
        if USAGE_ASKED not in text:
            raise RuntimeError("serving_benchmark's request body no longer asks for usage as %r: mend "
                               "compare_clients.without_usage_chunk" % USAGE_ASKED)
        return text.replace(USAGE_ASKED, b"", 1)

    module.build_request_body = body
    try:
        yield
    finally:
        module.build_request_body = original


TOOLS = ("serving_benchmark", "serving_benchmark_no_usage", "bench_serving")


def seed_of(tag):
    """bench_serving's seed for a run: a number of its own for each tag (zlib's CRC, the same in every process)."""
    import zlib
    return zlib.crc32(tag.encode())


def ours(url, model, load, vocab_size, tag):
    plan = BenchmarkPlan(url=url, model=model, concurrency=load["concurrency"], num_requests=load["num_requests"],
                         num_warmup=WARMUP, input_tokens=load["input_tokens"], output_tokens=load["output_tokens"],
                         timeout=600, run_tag=tag, vocab_size=vocab_size)
    result = run_benchmark(plan, PowerPlan(enabled=True, interval=0.5))
    return {"output_tok_s": result["output_tokens_per_s"], "duration_s": result["duration_s"],
            "ttft_ms": result["ttft_ms"], "itl_ms": result["itl_ms"], "input_tokens": result["input_tokens_total"],
            "output_tokens": result["output_tokens_total"], "completed": result["completed_requests"],
            "failed": result["failed_requests"], "power": result["power"]}


BENCH_ENDPOINTS = {"completions": ["--backend", "sglang-oai"], "generate": ["--backend", "sglang", "--tokenize-prompt"]}


def keep_ids_as_ids():
    """random-ids as token ids for any backend: bench_serving decodes them to text unless --tokenize-prompt, which
    it refuses for all but its native backend. The dataset is a dataclass; its return_text is the one switch."""
    import dataclasses
    from sglang.benchmark.datasets import random as random_dataset
    dataset = random_dataset.RandomDataset
    if getattr(dataset.from_args, "keeps_ids", False):
        return
    if "return_text" not in {field.name for field in dataclasses.fields(dataset)}:
        raise RuntimeError("sglang.benchmark.datasets.random.RandomDataset has no return_text field in this SGLang: "
                           "run with --bench-endpoint generate")
    original = dataset.from_args.__func__

    def from_args(cls, args):
        return dataclasses.replace(original(cls, args), return_text=False)

    from_args.keeps_ids = True
    dataset.from_args = classmethod(from_args)


def distinct_prompts(sample):
    """bench_serving's random-ids sampler with each prompt's ids drawn one by one, as serving_benchmark draws them.

    random-ids makes prompt i the consecutive ids ``offset_i + i + j`` (mod the vocabulary): a prompt is fixed by its
    first id, so with a vocabulary of V ids two prompts of a run are the same with odds of about n²/2V, and a prompt
    of an earlier run still in the server's radix cache is served without prefill. On the fourth harness run (vocab
    25,013) the server took 4 to 10 % of bench_serving's prompt tokens at c64 and 11 to 15 % at c256 from its cache,
    and 0.1 % of serving_benchmark's (docs/evidence/real-sglang-h200.md): the two tools were not sending the same
    work. The lengths, the count and the seeded generator (bench_serving's --seed) stay bench_serving's."""
    import numpy as np

    def sample_random_requests(*args, **kwargs):
        rows = sample(*args, **kwargs)
        tokenizer = kwargs.get("tokenizer")
        if kwargs.get("random_sample", True) or tokenizer is None:
            return rows
        for row in rows:
            if not isinstance(row.prompt, list):
                raise RuntimeError("bench_serving's random-ids prompt is %s, not token ids: run with the ids kept "
                                   "(keep_ids_as_ids) or --bench-prompts consecutive" % type(row.prompt).__name__)
            row.prompt = [int(token) for token in np.random.randint(0, tokenizer.vocab_size, size=len(row.prompt))]
        return rows

    sample_random_requests.distinct = True
    return sample_random_requests


def use_distinct_prompts():
    from sglang.benchmark.datasets import random as random_dataset
    if not getattr(random_dataset.sample_random_requests, "distinct", False):
        random_dataset.sample_random_requests = distinct_prompts(random_dataset.sample_random_requests)


def bench_serving_args(url, model, tokenizer, load, seed, records, endpoint="completions", prompts="distinct"):
    """bench_serving's own parser, as its command line would fill it."""
    from sglang.benchmark import serving
    if endpoint == "completions":
        keep_ids_as_ids()
    if prompts == "distinct":
        use_distinct_prompts()
    captured = {}
    original = serving.run_benchmark
    serving.run_benchmark = lambda args: captured.setdefault("args", args)
    argv = sys.argv
    sys.argv = ["bench_serving"] + BENCH_ENDPOINTS[endpoint] + [
        "--base-url", url, "--model", model, "--tokenizer", str(tokenizer), "--dataset-name", "random-ids",
        "--random-range-ratio", "1.0",
        "--random-input-len", str(load["input_tokens"]), "--random-output-len", str(load["output_tokens"]),
        "--num-prompts", str(load["num_requests"]), "--max-concurrency", str(load["concurrency"]),
        "--request-rate", "inf", "--warmup-requests", str(WARMUP), "--seed", str(seed),
        "--disable-tqdm", "--output-file", str(records)]
    try:
        serving.cli_main()
    finally:
        serving.run_benchmark = original
        sys.argv = argv
    return original, captured["args"]


def bench_serving(url, model, tokenizer, load, seed, records, endpoint, prompts):
    run, args = bench_serving_args(url, model, tokenizer, load, seed, records, endpoint, prompts)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = run(args)
    return {"output_tok_s": round(result["output_throughput"], 1), "duration_s": round(result["duration"], 3),
            "ttft_ms": {"mean": result["mean_ttft_ms"], "p50": result["median_ttft_ms"],
                        "p99": result["p99_ttft_ms"]},
            "itl_ms": {"mean": result["mean_itl_ms"], "p50": result["median_itl_ms"], "p99": result["p99_itl_ms"]},
            "input_tokens": result["total_input_tokens"], "output_tokens": result["total_output_tokens"],
            "completed": result["completed"], "failed": load["num_requests"] - result["completed"]}


# ------------------------------------------------------------------ the run

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", required=True, type=Path)
    parser.add_argument("--inventory", required=True, type=Path)
    parser.add_argument("--profile", default=None, help="the inventory's profile whose loads are run (its default)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tools", default="serving_benchmark,bench_serving",
                        help="the clients each round runs, in turn first: any of %s" % ", ".join(TOOLS))
    parser.add_argument("--bench-endpoint", choices=sorted(BENCH_ENDPOINTS), default="completions",
                        help="where bench_serving sends its token ids (see above)")
    parser.add_argument("--bench-prompts", choices=["distinct", "consecutive"], default="distinct",
                        help="bench_serving's random-ids prompts with their ids drawn one by one, as serving_benchmark "
                             "draws them (distinct), or as random-ids makes them (consecutive ids, which repeat: "
                             "see distinct_prompts)")
    parser.add_argument("--loads", default="", help="compare at these loads only, e.g. c64 (all when empty)")
    parser.add_argument("--requests", default="", help="requests a run by load name, e.g. c16=256,c64=512")
    parser.add_argument("--session", default=str(int(time.time())),
                        help="in every run's prompt tag and seed, so no invocation repeats another's prompts (now)")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    tools = [tool for tool in args.tools.split(",") if tool]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown or not tools:
        parser.error("--tools %s: use some of %s" % (",".join(unknown) or "(none)", ", ".join(TOOLS)))
    vocab_size = json.loads((args.tokenizer / "config.json").read_text())["vocab_size"]
    longer = {name: int(count) for name, count in (item.split("=") for item in args.requests.split(",") if item)}
    loads = [(name, dict(load, num_requests=longer.get(name, load["num_requests"])))
             for name, load in loads_of(args.inventory, args.profile)
             if not args.loads or name in args.loads.split(",")]
    rows = []
    with open(args.out, "a") as out:
        for name, load in loads:
            for repeat in range(args.repeats):
                # Each tool goes first in turn (two tools: alternately).
                shift = repeat % len(tools)
                for tool in tools[shift:] + tools[:shift]:
                    before = metrics(args.url)
                    began = time.time()
                    # Prompts of their own in every run of every invocation: bench_serving's random-ids draws from
                    # its seed, and a seed reused across loads or invocations sends an earlier run's prompts again,
                    # which the server's radix cache then serves without prefill.
                    tag = "%s-%s-%d" % (args.session, name, repeat)
                    if tool == "serving_benchmark":
                        figures = ours(args.url, args.model, load, vocab_size, "cmp-" + tag)
                    elif tool == "serving_benchmark_no_usage":
                        with without_usage_chunk():
                            figures = ours(args.url, args.model, load, vocab_size, "cmpnu-" + tag)
                    else:
                        figures = bench_serving(args.url, args.model, args.tokenizer, load, seed_of(tag),
                                                args.out.with_name("bench_serving.jsonl"), args.bench_endpoint,
                                                args.bench_prompts)
                    ended = time.time()
                    server = witness(before, metrics(args.url))
                    row = {"load": name, "concurrency": load["concurrency"], "repeat": repeat, "tool": tool, "tag": tag,
                           "num_requests": load["num_requests"], "bench_endpoint": args.bench_endpoint,
                           "bench_prompts": args.bench_prompts,
                           "began": began, "ended": ended, "client": figures, "server": server,
                           "asked_input_tokens": load["num_requests"] * load["input_tokens"]}
                    rows.append(row)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print("%-5s run %d %-26s %9.1f out tok/s  TTFT p50 %8.1f p99 %8.1f ms  input %d (server "
                          "counted %d with warm-up, %d from its cache)" % (
                              name, repeat + 1, tool, figures["output_tok_s"], figures["ttft_ms"]["p50"] or 0,
                              figures["ttft_ms"]["p99"] or 0, figures["input_tokens"], server["prompt_tokens"],
                              server["cached_tokens"]), flush=True)
    # What the server says of itself, for the stand-ins to answer the same (names, labels, fields).
    for path, name in (("/metrics", "metrics.txt"), ("/server_info", "server_info.json"),
                       ("/v1/models", "models.json"), ("/model_info", "model_info.json"), ("/health", "health.txt")):
        try:
            with urllib.request.urlopen(args.url + path, timeout=30) as response:
                args.out.with_name(name).write_bytes(response.read())
        except OSError as exc:
            args.out.with_name(name).write_text("%s: %s\n" % (path, exc))
    print("\nload   tool                        out tok/s (median)  ratio to bench_serving   TTFT p99 ms (median)")
    for name, _load in loads:
        medians = {}
        for tool in tools:
            runs = [r["client"] for r in rows if r["load"] == name and r["tool"] == tool]
            if runs:
                medians[tool] = (statistics.median(r["output_tok_s"] for r in runs),
                                 statistics.median(r["ttft_ms"]["p99"] or 0 for r in runs))
        for tool, (tok_s, ttft) in medians.items():
            ratio = "%.3f" % (tok_s / medians["bench_serving"][0]) if "bench_serving" in medians else "-"
            print("%-6s %-27s %18.1f  %22s   %8.1f" % (name, tool, tok_s, ratio, ttft))
    return 0


if __name__ == "__main__":
    sys.exit(main())

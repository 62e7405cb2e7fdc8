# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cause verdict on real inference, held against a fine NVML trace of the same run.

The smoke test's cause verdict (plugins/plugin_utils/cause_verdict.py) rests on serving_benchmark's power
sampler: one NVML reading of power, utilisation, SM clock and throttle reasons every 0.5 s. On a real server at
256 streams it once read "busy 0 %" while the GPU decoded 9,000 tok/s. This runs loads on the real server with
the sampler as the module runs it, and beside it a tracer of its own that reads NVML every 20 ms with a
timestamp, and NVML's own utilisation samples (nvmlDeviceGetSamples, the raw points its percentage is made of),
so that each verdict can be checked against what the GPU did, reading by reading:

  decode-c1     one stream of 256 in / 256 out: a 1 B model leaves an H200 idle between its small steps
  decode-c256   256 streams: the run that read "busy 0 %"
  prefill-c64   64 streams of 3,584 tokens in, 8 out: large GEMMs, the GPU saturated

    python3 trace_gpu.py --url http://127.0.0.1:30000 --model NAME --out cause.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark import BenchmarkPlan, run_benchmark
from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_power import PowerPlan
from ansible_collections.sm120.sglang.plugins.plugin_utils.cause_verdict import power_cause_verdicts

LOADS = {
    "decode-c1": dict(concurrency=1, num_requests=8, input_tokens=256, output_tokens=256),
    "decode-c256": dict(concurrency=256, num_requests=512, input_tokens=256, output_tokens=256),
    "prefill-c64": dict(concurrency=64, num_requests=384, input_tokens=3584, output_tokens=8),
}


class Tracer:
    """NVML every ``interval`` s on a thread: (t, util %, mem util %, W, SM MHz) of GPU 0; and its raw samples."""

    def __init__(self, interval=0.02):
        import pynvml
        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.interval = interval
        self.rows = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.samples_since = 0

    def loop(self):
        nvml, handle = self.nvml, self.handle
        while not self.stop_event.is_set():
            now = time.time()
            try:
                rates = nvml.nvmlDeviceGetUtilizationRates(handle)
                self.rows.append((now, rates.gpu, rates.memory, nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                                  nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)))
            except Exception as exc:  # a failed read is a gap in the trace, not the end of it
                self.rows.append((now, None, None, None, None, str(exc)))
            self.stop_event.wait(self.interval)

    def raw_utilisation(self):
        """NVML's own utilisation samples since the last call: (timestamp us, percent)."""
        nvml = self.nvml
        try:
            kind, samples = nvml.nvmlDeviceGetSamples(self.handle, nvml.NVML_GPU_UTILIZATION_SAMPLES,
                                                      self.samples_since)
        except Exception as exc:
            return {"error": str(exc)}
        points = [(s.timeStamp, s.sampleValue.uiVal) for s in samples]
        if points:
            self.samples_since = max(p[0] for p in points)
        return points

    def __enter__(self):
        self.raw_utilisation()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join()


def window_figures(rows, began, ended):
    inside = [r for r in rows if began <= r[0] <= ended and r[1] is not None]
    if not inside:
        return {"readings": 0}
    utils = [r[1] for r in inside]
    return {"readings": len(inside), "median_util_pct": statistics.median(utils),
            "mean_util_pct": round(statistics.mean(utils), 1),
            "share_util_zero": round(sum(1 for u in utils if u == 0) / len(utils), 3),
            "median_mem_util_pct": statistics.median(r[2] for r in inside),
            "mean_w": round(statistics.mean(r[3] for r in inside), 1),
            "median_sm_mhz": statistics.median(r[4] for r in inside)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--vocab-size", type=int, default=30000)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    report = {"loads": {}}
    with Tracer() as tracer:
        idle_from = time.time()
        time.sleep(2)
        report["idle"] = window_figures(tracer.rows, idle_from, time.time())
        for name, load in LOADS.items():
            for interval in (0.5, 0.1):
                plan = BenchmarkPlan(url=args.url, model=args.model, num_warmup=4, timeout=600,
                                     run_tag="cause-%s-%s" % (name, interval), vocab_size=args.vocab_size, **load)
                tracer.raw_utilisation()
                began = time.time()
                result = run_benchmark(plan, PowerPlan(enabled=True, interval=interval))
                ended = time.time()
                measured_from = ended - result["duration_s"]
                verdicts = power_cause_verdicts(result["power"])
                entry = {"sampler_interval_s": interval, "output_tok_s": result["output_tokens_per_s"],
                         "duration_s": result["duration_s"], "sampler": result["power"],
                         "verdict": verdicts,
                         "trace_whole_call": window_figures(tracer.rows, began, ended),
                         "trace_measured_window": window_figures(tracer.rows, measured_from, ended),
                         "nvml_raw_samples": tracer.raw_utilisation()}
                report["loads"]["%s@%ss" % (name, interval)] = entry
                gpu = (result["power"]["gpus"] or [{}])[0]
                activity = gpu.get("activity") or {}
                print("%-12s sampler %.1f s: %8.1f out tok/s; sampler: %d readings, util median %s, %.2f of limit;"
                      " trace: util median %s (zero in %s of readings), %s W; verdict %s" % (
                          name, interval, result["output_tokens_per_s"], result["power"]["samples"],
                          activity.get("median_util_pct"), activity.get("median_power_fraction") or 0,
                          entry["trace_measured_window"].get("median_util_pct"),
                          entry["trace_measured_window"].get("share_util_zero"),
                          entry["trace_measured_window"].get("mean_w"),
                          json.dumps(verdicts)[:300]), flush=True)
        report["trace"] = tracer.rows
    args.out.write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

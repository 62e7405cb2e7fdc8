# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""serving_benchmark's power sampler on a real GPU: idle, then under a bf16 matmul load, through NVML and nvidia-smi.

Both paths of the one power reader, plugins/module_utils/gpu_power.py (``nvml_source`` and ``nvidia_smi_source``,
each read by the ``PowerSampler`` of serving_benchmark_power.py as the module does), sample side by side over the
same seconds: first with the GPUs idle, then while a torch bf16 matmul loop runs on GPU 0 in a subprocess. The
script prints, per path and phase, the sampler's own summary: mean and max watts, the power limit and the mean as
a fraction of it; and a once-a-second trace of GPU 0 through NVML from idle into the load and back, so the rise is
visible.

It only reads the GPU's settings and never changes them (no nvidia-smi -pm/-pl/-r/-lgc).
Needs: the GPU host's Python with torch (CUDA) and nvidia-ml-py; nvidia-smi on PATH. Ansible is not needed:
module_utils is imported from the checkout, through --collections (a folder holding
ansible_collections/sm120/sglang) or, without it, a temporary link made here.
    python3 benchmarks/h200_power_sampling.py [--idle-s 5] [--load-s 20] [--interval 0.5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The load: one GPU, bf16 GEMMs back to back; prints "ready" once the first ones ran, then its rate at the end.
LOAD = r"""
import json, sys, time
import torch
size, seconds = int(sys.argv[1]), float(sys.argv[2])
a = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
b = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
c = torch.empty(size, size, dtype=torch.bfloat16, device="cuda")
for _ in range(3):
    torch.matmul(a, b, out=c)
torch.cuda.synchronize()
print("ready", flush=True)
start = time.perf_counter()
done = 0
while time.perf_counter() - start < seconds:
    for _ in range(20):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    done += 20
elapsed = time.perf_counter() - start
print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "matmuls": done,
                  "size": size, "seconds": round(elapsed, 3),
                  "tflops": round(2.0 * size ** 3 * done / elapsed / 1e12, 1)}), flush=True)
"""


def put_collection_on_path(collections):
    """Make the checkout importable as ansible_collections.sm120.sglang (through a link when no path is given)."""
    if collections is None:
        collections = Path(tempfile.mkdtemp(prefix="sm120-collections-"))
        (collections / "ansible_collections" / "sm120").mkdir(parents=True)
        (collections / "ansible_collections" / "sm120" / "sglang").symlink_to(REPO)
    sys.path.insert(0, str(collections))


def import_module_utils(collections):
    """(gpu_power, serving_benchmark_power): the reader and the sampler, as the module imports them."""
    put_collection_on_path(collections)
    from ansible_collections.sm120.sglang.plugins.module_utils import gpu_power, serving_benchmark_power
    return gpu_power, serving_benchmark_power


class Trace:
    """GPU 0 every 0.25 s over the whole run (NVML, as the module picks it), for the idle-to-load picture."""

    def __init__(self, reader, nvidia_smi):
        self.points = []
        self._stop = threading.Event()
        self.source = reader.open_power_source(nvidia_smi)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.perf_counter()

    def _run(self):
        while not self._stop.is_set():
            reading = self.source.read()[0]
            self.points.append((time.perf_counter() - self.t0, reading.watts))
            self._stop.wait(0.25)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.source.close()


def open_samplers(modules, interval, nvidia_smi):
    """One PowerSampler per path, each on its own freshly opened source (stop() closes the source)."""
    reader, sampling = modules
    samplers, reasons = {}, {}
    for name, opener in (("nvml", reader.nvml_source), ("nvidia-smi", lambda: reader.nvidia_smi_source(nvidia_smi))):
        try:
            samplers[name] = sampling.PowerSampler(opener(), interval)
        except reader.PowerSourceUnavailable as exc:
            reasons[name] = str(exc)
    return samplers, reasons


def sample_for(modules, interval, nvidia_smi, seconds, marks, phase, trace):
    samplers, reasons = open_samplers(modules, interval, nvidia_smi)
    started = time.perf_counter()
    for sampler in samplers.values():
        sampler.start()
    marks.append((started - trace.t0, "%s sampling starts" % phase))
    time.sleep(seconds)
    for sampler in samplers.values():
        sampler.stop()
    finished = time.perf_counter()
    marks.append((finished - trace.t0, "%s sampling stops" % phase))
    duration = finished - started
    summaries = {name: dict(sampler.summary(duration, 0), last_error=sampler.last_error)
                 for name, sampler in samplers.items()}
    for name, reason in reasons.items():
        summaries[name] = {"source": None, "reason": reason, "gpus": [], "samples": 0, "sample_errors": 0}
    return summaries


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--collections", type=Path, help="folder holding ansible_collections/sm120/sglang")
    parser.add_argument("--idle-s", type=float, default=5.0)
    parser.add_argument("--load-s", type=float, default=20.0, help="how long the matmul loop runs")
    parser.add_argument("--interval", type=float, default=0.5, help="sampler interval (the module's default)")
    parser.add_argument("--size", type=int, default=8192, help="square bf16 matrix size")
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()

    modules = import_module_utils(args.collections)
    trace = Trace(modules[0], args.nvidia_smi)
    trace.start()
    marks = []
    results = {"interval_s": args.interval, "phases": {}}
    load = None
    try:
        results["phases"]["idle"] = sample_for(modules, args.interval, args.nvidia_smi, args.idle_s, marks, "idle",
                                               trace)

        load = subprocess.Popen([sys.executable, "-c", LOAD, str(args.size), str(args.load_s)],
                                stdout=subprocess.PIPE, text=True)
        marks.append((time.perf_counter() - trace.t0, "load process starts"))
        ready = load.stdout.readline().strip()
        if ready != "ready":
            raise SystemExit("the load did not start: %r (exit %s)" % (ready, load.poll()))
        marks.append((time.perf_counter() - trace.t0, "load running"))
        # Sample while the loop runs, stopping a second before it ends so no sample falls after it.
        results["phases"]["load"] = sample_for(modules, args.interval, args.nvidia_smi, max(args.load_s - 1.0, 1.0),
                                               marks, "load", trace)
        rest = load.stdout.read()
        load.wait(60)
        marks.append((time.perf_counter() - trace.t0, "load process exits"))
        results["load"] = json.loads(rest.strip().splitlines()[-1])
        time.sleep(3.0)
    finally:
        if load is not None and load.poll() is None:
            load.kill()
            load.wait()
        trace.stop()

    print("power sampler of plugins/module_utils/serving_benchmark_power.py over gpu_power.py, interval %.2f s"
          % args.interval)
    print("load: %s" % json.dumps(results["load"]))
    print()
    print("| path | phase | samples | errors | GPU | mean W | max W | limit W | mean / limit |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in ("nvml", "nvidia-smi"):
        for phase in ("idle", "load"):
            summary = results["phases"][phase][path]
            if not summary["gpus"]:
                print("| %s | %s | 0 | - | - | unavailable: %s | | | |" % (path, phase, summary["reason"]))
            for gpu in summary["gpus"]:
                print("| %s | %s | %d | %d | %d | %s | %s | %s | %s |" % (
                    path, phase, gpu["samples"], summary["sample_errors"], gpu["index"], gpu["mean_w"], gpu["max_w"],
                    gpu["limit_w"], gpu["mean_fraction_of_limit"]))
    for path in ("nvml", "nvidia-smi"):
        for phase in ("idle", "load"):
            if results["phases"][phase][path].get("last_error"):
                print("%s %s: last failed read: %s" % (path, phase, results["phases"][phase][path]["last_error"]))
    print()
    print("GPU 0 through %s, about once a second (t in s from the start):" % trace.source.name)
    events = sorted(marks)
    shown = -1.0
    for t, watts in trace.points:
        while events and events[0][0] <= t:
            print("  t=%5.1f  -- %s" % events.pop(0))
        if t - shown >= 1.0:
            print("  t=%5.1f  %s W" % (t, "%7.2f" % watts if watts is not None else "   null"))
            shown = t
    for event in events:
        print("  t=%5.1f  -- %s" % event)
    results["trace_source"] = trace.source.name
    results["trace"] = trace.points
    results["marks"] = marks
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cause_verdict on a real GPU: a bf16 matmul loop, a kernel spinning on a flag, tiny kernels with host sleeps.

Each load runs alone on GPU 0 in a subprocess while the collection's one reader,
plugins/module_utils/gpu_power.py, samples every GPU with its activity fields
(utilisation, SM clock and maximum, temperature, throttle reasons): through NVML
every --interval seconds and through nvidia-smi every 0.25 s, each read by
serving_benchmark_power's PowerSampler. plugins/plugin_utils/cause_verdict.py
then decides each load from each path's readings. The loads:

- matmul: torch bf16 GEMMs of --size squared back to back (meant compute-bound);
- spin: one CUDA kernel (CuPy, else Triton), one warp per SM spinning on a flag in
  GPU memory that the host sets only at the end of the window (meant spin-wait);
- underfed: 8 tiny torch kernels, then a 10 ms host sleep, over and over;
- copy: torch device-to-device copies of 2 GiB (memory-bound: busy SMs at middling
  power, which must not read as a spin);
- matmul-fp32 and matmul-2048: float32 GEMMs on the FP32 units, and bf16 GEMMs of
  2048 squared, busy loads that may stay under the power cap;
- idle: nothing runs.

Before the loads it prints which nvidia-smi field names this driver accepts and
what nvidia-smi -q says of temperatures, clocks and clock event reasons. It only
reads the GPU's settings and never changes them (no nvidia-smi -pm/-pl/-r/-lgc).
Needs: a GPU host's Python with torch (CUDA), CuPy or Triton, nvidia-ml-py; nvidia-smi.
    python3 benchmarks/h200_cause_verdicts.py [--collections DIR] [--window-s 8] [--interval 0.05] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Beside this script (run as a script, its directory is on sys.path).
from h200_power_sampling import put_collection_on_path

_PRELUDE = r"""
import json, sys, time
seconds = float(sys.argv[1])
def done(**figures):
    print(json.dumps(figures), flush=True)
"""

MATMUL = _PRELUDE + r"""
import torch
size, dtype = int(sys.argv[2]), getattr(torch, sys.argv[3])
torch.backends.cuda.matmul.allow_tf32 = False  # float32 stays on the FP32 units, off the tensor cores
a, b, c = (torch.randn(size, size, dtype=dtype, device="cuda") for _ in range(3))
for _ in range(3):
    torch.matmul(a, b, out=c)
torch.cuda.synchronize()
print("ready", flush=True)
start, count = time.perf_counter(), 0
while time.perf_counter() - start < seconds:
    for _ in range(20):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    count += 20
elapsed = time.perf_counter() - start
done(matmuls=count, size=size, dtype=sys.argv[3], seconds=round(elapsed, 3),
     tflops=round(2.0 * size ** 3 * count / elapsed / 1e12, 1))
"""

COPY = _PRELUDE + r"""
import torch
src = torch.empty(1 << 30, dtype=torch.bfloat16, device="cuda").fill_(1.0)
dst = torch.empty_like(src)
dst.copy_(src)
torch.cuda.synchronize()
print("ready", flush=True)
start, count = time.perf_counter(), 0
while time.perf_counter() - start < seconds:
    for _ in range(20):
        dst.copy_(src)
    torch.cuda.synchronize()
    count += 20
elapsed = time.perf_counter() - start
done(copies=count, gib=2, seconds=round(elapsed, 3), tb_per_s_read_and_written=round(4 * 2**30 * count / elapsed / 1e12, 2))
"""

UNDERFED = _PRELUDE + r"""
import torch
x = torch.zeros(1024, device="cuda")
x.add_(1.0)
torch.cuda.synchronize()
print("ready", flush=True)
start, count = time.perf_counter(), 0
while time.perf_counter() - start < seconds:
    for _ in range(8):
        x.add_(1.0)
    torch.cuda.synchronize()
    count += 8
    time.sleep(0.01)
elapsed = time.perf_counter() - start
done(kernels=count, seconds=round(elapsed, 3), kernels_per_s=round(count / elapsed), host_sleep_ms=10)
"""

# One warp per SM spins on a flag nobody sets until the window is over; then the host writes it through a
# copy on another stream (a copy engine, not a kernel, so it runs while every SM holds a spinning block).
# A deadline on %globaltimer ends the kernel even if the write were never seen.
SPIN = _PRELUDE + r"""
import numpy as np
try:
    import cupy as cp
except ImportError:
    cp = None
if cp is not None:
    kernel = cp.RawKernel(r'''
extern "C" __global__ void spin_on_flag(const volatile int* flag, unsigned long long budget_ns,
                                        unsigned long long* spins) {
    unsigned long long start, now, count = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    now = start;
    while (*flag == 0 && now - start < budget_ns) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        ++count;
    }
    if (threadIdx.x == 0) atomicAdd(spins, count);
}''', "spin_on_flag")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    flag, spins = cp.ones(1, dtype=cp.int32), cp.zeros(1, dtype=cp.uint64)
    kernel((1,), (32,), (flag, np.uint64(0), spins))  # compiles it, returns at once: the flag is set
    flag.fill(0)
    spins.fill(0)
    cp.cuda.Device().synchronize()
    spinning, setter = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    start = time.perf_counter()
    with spinning:
        kernel((sms,), (32,), (flag, np.uint64(int((seconds + 3) * 1e9)), spins))
    print("ready", flush=True)
    time.sleep(seconds)
    flag.set(np.ones(1, dtype=np.int32), stream=setter)
    setter.synchronize()
    spinning.synchronize()
    count, how = int(spins.get()[0]), "cupy RawKernel"
else:
    import torch, triton, triton.language as tl

    @triton.jit
    def spin_on_flag(flag_ptr, spins_ptr, max_spins):
        count = 0
        seen = tl.load(flag_ptr, volatile=True)
        while (seen == 0) & (count < max_spins):
            seen = tl.load(flag_ptr, volatile=True)
            count += 1
        tl.atomic_add(spins_ptr, count)

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flag = torch.ones(1, dtype=torch.int32, device="cuda")
    spins = torch.zeros(1, dtype=torch.int64, device="cuda")
    spin_on_flag[(1,)](flag, spins, 2**31 - 1, num_warps=1)
    flag.zero_(), spins.zero_(), torch.cuda.synchronize()
    spinning, setter = torch.cuda.Stream(), torch.cuda.Stream()
    start = time.perf_counter()
    with torch.cuda.stream(spinning):
        spin_on_flag[(sms,)](flag, spins, 2**31 - 1, num_warps=1)
    print("ready", flush=True)
    time.sleep(seconds)
    with torch.cuda.stream(setter):
        flag.copy_(torch.ones(1, dtype=torch.int32).pin_memory(), non_blocking=True)
    torch.cuda.synchronize()
    count, how = int(spins.item()), "triton"
elapsed = time.perf_counter() - start
done(kernel=how, blocks=sms, threads_per_block=32, spun_s=round(elapsed, 3), spins=count,
     ended_by="flag" if elapsed < seconds + 2.5 else "deadline")
"""

# load -> (its program, its arguments after the seconds); "{size}" is --size.
LOADS = {"matmul": (MATMUL, ["{size}", "bfloat16"]), "spin": (SPIN, []), "underfed": (UNDERFED, []),
         "copy": (COPY, []), "matmul-fp32": (MATMUL, ["{size}", "float32"]),
         "matmul-2048": (MATMUL, ["2048", "bfloat16"]), "idle": (None, [])}
# What the three loads that must part were written to be; the verdicts say what they are.
EXPECTED = {"matmul": "compute-bound", "spin": "spin-wait", "underfed": "underfed"}


def import_collection(collections):
    """(gpu_power, serving_benchmark_power, cause_verdict) from the checkout, as the module and filters import them."""
    put_collection_on_path(collections)
    from ansible_collections.sm120.sglang.plugins.module_utils import gpu_power, serving_benchmark_power
    from ansible_collections.sm120.sglang.plugins.plugin_utils import cause_verdict
    return gpu_power, serving_benchmark_power, cause_verdict


def device_checks(nvidia_smi, gpu_power):
    """Which query fields this driver takes, and its own words on slowdown temperatures, clocks and reasons."""
    print("== nvidia-smi query fields")
    for fields in (gpu_power.ACTIVITY_SAMPLE_FIELDS, gpu_power.ACTIVITY_SAMPLE_FIELDS_BEFORE_535):
        argv = gpu_power.nvidia_smi_query_argv(nvidia_smi, fields)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        print("$ %s\nrc=%d\n%s" % (" ".join(argv), done.returncode, (done.stdout + done.stderr).strip()))
    done = subprocess.run([nvidia_smi, "-q", "-d", "TEMPERATURE,CLOCK,PERFORMANCE"], capture_output=True, text=True,
                          timeout=30, check=False)
    keep = ("Slowdown", "Shutdown", "Max Operating", "Target", "GPU Current Temp", "Clocks Event Reasons",
            "Clocks Throttle Reasons", "Idle", "Power Cap", "Thermal", "Max Clocks", "SM ", "Graphics")
    print("== nvidia-smi -q -d TEMPERATURE,CLOCK,PERFORMANCE (lines about slowdown, clocks, reasons)")
    print("\n".join(line for line in done.stdout.splitlines() if any(word in line for word in keep)))


def start_load(name, window_s, settle_s, size):
    program, extra = LOADS[name]
    if program is None:
        return None
    argv = [sys.executable, "-c", program, str(settle_s + window_s + 0.5)] + [arg.format(size=size) for arg in extra]
    load = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    ready = load.stdout.readline().strip()
    if ready != "ready":
        load.kill()
        raise RuntimeError("load %s did not start: %r (exit %s)" % (name, ready, load.wait()))
    return load


def measure(name, modules, args):
    """Run one load, sample it through both paths over the window, decide each path's readings."""
    gpu_power, sampling, cause_verdict = modules
    load = start_load(name, args.window_s, args.settle_s, args.size)
    try:
        time.sleep(args.settle_s)  # NVML's power is a 1 s average: let it reach the load first
        samplers = {"nvml": sampling.PowerSampler(gpu_power.nvml_source(activity=True), args.interval),
                    "nvidia-smi": sampling.PowerSampler(gpu_power.nvidia_smi_source(args.nvidia_smi, activity=True),
                                                        0.25)}
        fields = samplers["nvidia-smi"].source.fields
        started = time.perf_counter()
        for sampler in samplers.values():
            sampler.start()
        time.sleep(args.window_s)
        for sampler in samplers.values():
            sampler.stop()
        duration = time.perf_counter() - started
        figures = json.loads(load.stdout.read().strip().splitlines()[-1]) if load else {}
        if load:
            load.wait(60)
    finally:
        if load is not None and load.poll() is None:
            load.kill()
            load.wait()
    paths = {}
    for path, sampler in samplers.items():
        paths[path] = {"verdicts": cause_verdict.cause_verdicts(sampler.samples),
                       "summary": sampler.summary(duration, 0), "errors": sampler.errors,
                       "last_error": sampler.last_error,
                       "median_w": {str(index): statistics.median(watts) if watts else None
                                    for index, watts in _watts(sampler.samples).items()},
                       "readings": [[reading.as_dict() for reading in sample] for sample in sampler.samples]}
    return {"load": figures, "nvidia_smi_fields": list(fields), "window_s": round(duration, 3), "paths": paths}


def _watts(samples):
    by_gpu = {}
    for sample in samples:
        for reading in sample:
            by_gpu.setdefault(reading.index, [])
            if reading.watts is not None:
                by_gpu[reading.index].append(reading.watts)
    return by_gpu


def _fmt(value, pattern="%.2f"):
    return pattern % value if value is not None else "n/a"


def print_table(results):
    print("| load | path | GPU | readings | median W of limit | power fraction | util % | SM clock of max MHz |"
          " clock fraction | temp °C | limiting-reason share | reasons seen (share) | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, result in results.items():
        for path, measured in result["paths"].items():
            for gpu in measured["verdicts"]["gpus"]:
                reasons = ", ".join("%s %.2f" % item for item in gpu["throttle_reason_shares"].items()) or "none"
                clock = None if gpu["median_clock_fraction"] is None or not gpu["max_sm_clock_mhz"] \
                    else gpu["median_clock_fraction"] * gpu["max_sm_clock_mhz"]
                print("| %s | %s | %d | %d | %s / %s | %s | %s | %s / %s | %s | %s | %s | %s | **%s** |" % (
                    name, path, gpu["index"], gpu["samples"], _fmt(measured["median_w"].get(str(gpu["index"])), "%.1f"),
                    _fmt(gpu["limit_w"], "%.0f"), _fmt(gpu["median_power_fraction"]),
                    _fmt(gpu["median_util_pct"], "%.0f"), _fmt(clock, "%.0f"), _fmt(gpu["max_sm_clock_mhz"], "%.0f"),
                    _fmt(gpu["median_clock_fraction"]), _fmt(gpu["median_temperature_c"], "%.0f"),
                    _fmt(gpu["throttle_reason_share"]), reasons, gpu["verdict"]))
    print()
    for name, result in results.items():
        print("%s: load %s; nvidia-smi fields %s" % (name, json.dumps(result["load"]),
                                                     ",".join(result["nvidia_smi_fields"])))
        for path, measured in result["paths"].items():
            last = ", last: %s" % measured["last_error"] if measured["errors"] else ""
            print("  %s (%d reads failed%s): %s" % (
                path, measured["errors"], last, measured["verdicts"]["host"]["explanation"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--collections", type=Path, help="folder holding ansible_collections/sm120/sglang")
    parser.add_argument("--window-s", type=float, default=8.0, help="seconds sampled per load")
    parser.add_argument("--settle-s", type=float, default=1.5, help="seconds of load before sampling starts")
    parser.add_argument("--interval", type=float, default=0.05, help="NVML sampler interval")
    parser.add_argument("--size", type=int, default=8192, help="square bf16 matrix size of the matmul load")
    parser.add_argument("--loads", default=",".join(LOADS), help="which loads, in order: %s" % ",".join(LOADS))
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--json", type=Path, help="also write every figure and reading here")
    args = parser.parse_args()

    modules = import_collection(args.collections)
    device_checks(args.nvidia_smi, modules[0])
    results = {}
    for name in args.loads.split(","):
        try:
            results[name] = measure(name, modules, args)
        except Exception as exc:  # one broken load must not cost the others' figures
            print("load %s failed: %s: %s" % (name, type(exc).__name__, exc))
        time.sleep(2.0)  # let the 1 s power average fall before the next load
    print("\n== cause verdicts, interval %.2f s (NVML) and 0.25 s (nvidia-smi), %.1f s per load after %.1f s settling"
          % (args.interval, args.window_s, args.settle_s))
    print_table(results)
    host = {name: {path: measured["verdicts"]["host"]["verdict"] for path, measured in result["paths"].items()}
            for name, result in results.items()}
    three = {name: host[name]["nvml"] for name in EXPECTED if name in host}
    print("\nwritten to be %s; NVML gave %s; three different verdicts: %s; NVML and nvidia-smi agree on every load: %s"
          % (json.dumps(EXPECTED), json.dumps(three), len(set(three.values())) == 3,
             all(len(set(paths.values())) == 1 for paths in host.values())))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

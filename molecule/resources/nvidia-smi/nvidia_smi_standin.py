# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""STAND-IN for the NVIDIA driver's nvidia-smi, for test containers only.

The real nvidia-smi cannot run here: there is no GPU and no NVIDIA kernel module.
This script prints what the real one prints, in its real format, from captures:
the files of one capture set under /usr/share/nvidia-smi-standin/<set>/, copied
from tests/unit/plugins/module_utils/fixtures/gpu/ (real H200 output, and
RTX PRO 6000 output written in the same format):

    nvidia-smi.txt   plain `nvidia-smi`
    query-gpu.csv    `--query-gpu=<the fields gpu_facts asks for, in its order>
                     --format=csv,noheader,nounits`
    topo.txt         `nvidia-smi topo -m`

The set is named by $NVIDIA_SMI_STANDIN_FIXTURE, else by /etc/nvidia-smi-standin/fixture;
$NVIDIA_SMI_STANDIN_CAPTURES moves the directory of the sets (unit tests point it at
the fixtures). install.yml copies this file to /usr/bin/nvidia-smi with a python3 shebang.

It answers:
    nvidia-smi
    nvidia-smi --query-gpu=FIELD[,FIELD...] --format=csv,noheader,nounits [-i ID]
    nvidia-smi topo -m
    nvidia-smi [-i ID] -pl WATTS
A power limit set with -pl is kept in /run/nvidia-smi-standin/ (a tmpfs, so it
is gone after a reboot, as a real limit is) and reported by power.limit
afterwards; the banner of plain `nvidia-smi` keeps the capture's limits.
Anything else exits 2 saying the stand-in does not know it.

Power draw under load, together with the SGLang stand-in
(molecule/resources/standin_server/sglang_standin.py, which stands in for
`python -m sglang.launch_server`): that server writes the per-GPU draw it
emulates, in watts, and the utilisation in percent, to /var/lib/sglang/standin-power-draw (its
SGLANG_STANDIN_POWER_FILE; here $NVIDIA_SMI_STANDIN_POWER_FILE, same default):
480 W while it generates, 125 W while it generates with the FlashInfer
allreduce-fusion gate patch live in the installed SGLang (the measured
regression), 60 W idle. While that file exists, every GPU's power.draw, in
--query-gpu and in the Pwr:Usage column of plain `nvidia-smi`, is that number
(at most the GPU's power limit, as a real GPU is held to it); otherwise it is
the capture's. utilization.gpu is the file's second number (96 % while it
generates, 100 % with the fusion gate live: busy SMs at low power, a spin-wait;
0 % idle) and [N/A] without the file. clocks.max.sm is the capture set's
max-sm-clock.txt, and clocks.sm the same number, idle or loaded (the H200 read
its maximum both ways, its limit never reached; a spin-wait keeps the clock
up); [N/A] both where the set has no such file. temperature.gpu and the clock
event reasons are not emulated and read [N/A], as a driver prints a field it
cannot read. serving_benchmark samples power and
utilisation through this, so its figures and the cause verdict on them move
with the stand-in server's load and with the patch.
"""

from __future__ import annotations

import csv
import os
import re
import sys

CAPTURES = "/usr/share/nvidia-smi-standin"
SELECTED = "/etc/nvidia-smi-standin/fixture"
STATE = "/run/nvidia-smi-standin"
# Written by the SGLang stand-in; see the header.
POWER_FILE = "/var/lib/sglang/standin-power-draw"

# The column order of query-gpu.csv: QUERY_GPU_FIELDS of plugins/module_utils/gpu_facts.py.
COLUMNS = (
    "index", "name", "uuid", "pci.bus_id", "compute_cap", "memory.total", "memory.used", "power.draw",
    "power.limit", "power.default_limit", "power.min_limit", "power.max_limit", "persistence_mode",
)


# What serving_benchmark's sampler asks besides power (module_utils/gpu_power.py ACTIVITY_SAMPLE_FIELDS).
ACTIVITY_COLUMNS = ("utilization.gpu", "clocks.sm", "clocks.max.sm", "temperature.gpu",
                    "clocks_event_reasons.active", "clocks_throttle_reasons.active")
NOT_EMULATED = "[N/A]"


def fail(message, code=2):
    sys.stderr.write(message + "\n")
    sys.exit(code)


def capture_dir():
    name = os.environ.get("NVIDIA_SMI_STANDIN_FIXTURE")
    if not name:
        try:
            with open(SELECTED) as selected:
                name = selected.read().strip()
        except OSError:
            fail("nvidia-smi stand-in: no capture set selected (%s or $NVIDIA_SMI_STANDIN_FIXTURE)" % SELECTED)
    return os.path.join(os.environ.get("NVIDIA_SMI_STANDIN_CAPTURES") or CAPTURES, name)


def read(name):
    with open(os.path.join(capture_dir(), name)) as capture:
        return capture.read()


def driver_version():
    for line in read("nvidia-smi.txt").splitlines():
        if "Driver Version:" in line:
            return line.split("Driver Version:")[1].split()[0]
    return "[N/A]"


def emulated_load():
    """(watts, utilisation % or None) from the SGLang stand-in's power file; (None, None) when there is none to read."""
    path = os.environ.get("NVIDIA_SMI_STANDIN_POWER_FILE") or POWER_FILE
    try:
        with open(path) as power:
            numbers = power.read().split()
        return float(numbers[0]), (float(numbers[1]) if len(numbers) > 1 else None)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, IndexError) as exc:
        sys.stderr.write("nvidia-smi stand-in: ignoring %s (%s); reporting the captured power draw\n" % (path, exc))
        return None, None


def max_sm_clock():
    """The capture set's maximum SM clock in MHz, as nvidia-smi prints it, or None where the set has none."""
    try:
        return "%d" % int(read("max-sm-clock.txt").strip())
    except (OSError, ValueError):
        return None


def held_to_limit(draw, limit):
    try:
        return min(draw, float(limit))
    except ValueError:  # [N/A]
        return draw


def gpus():
    rows = [dict(zip(COLUMNS, (cell.strip() for cell in row))) for row in csv.reader(read("query-gpu.csv").splitlines()) if row]
    draw, util = emulated_load()
    max_clock = max_sm_clock()
    for gpu in rows:
        gpu["driver_version"] = driver_version()
        # Not in the captures (they are of idle GPUs): utilisation comes from the SGLang stand-in's file,
        # the rest is not emulated and reads as a real driver prints a field it cannot read.
        gpu.update({field: NOT_EMULATED for field in ACTIVITY_COLUMNS})
        if util is not None:
            gpu["utilization.gpu"] = "%.0f" % util
        if max_clock is not None:
            gpu["clocks.sm"] = gpu["clocks.max.sm"] = max_clock
        try:
            with open(os.path.join(STATE, "power-limit-%s" % gpu["index"])) as state:
                gpu["power.limit"] = state.read().strip()
        except OSError:
            pass
        if draw is not None:
            gpu["power.draw"] = "%.2f" % held_to_limit(draw, gpu["power.limit"])
    return rows


# The power cell of a GPU row of plain nvidia-smi: "    34W /  600W".
USAGE_CELL = re.compile(r"( +)(\d+|N/A)W( / +)(\d+)W")


def plain():
    text = read("nvidia-smi.txt")
    draw, _util = emulated_load()
    if draw is None:
        return text

    def usage(match):
        watts = "%d" % round(held_to_limit(draw, match.group(4)))
        # Right-aligned in the same width, so the table's borders stay where they are.
        width = len(match.group(1)) + len(match.group(2))
        return watts.rjust(max(width, len(watts) + 1)) + "W" + match.group(3) + match.group(4) + "W"

    return USAGE_CELL.sub(usage, text)


def select(all_gpus, ident):
    if ident is None:
        return all_gpus
    chosen = [gpu for gpu in all_gpus if ident in (gpu["index"], gpu["uuid"], gpu["pci.bus_id"])]
    if not chosen:
        fail("No devices were found matching the identifier '%s'." % ident, 6)
    return chosen


def option(args, name):
    if name in args:
        at = args.index(name)
        if at + 1 >= len(args):
            fail("Option %s needs a value." % name)
        return args[at + 1]
    return None


def query(args, ident):
    fields = next(arg for arg in args if arg.startswith("--query-gpu=")).split("=", 1)[1].split(",")
    if "--format=csv,noheader,nounits" not in args:
        fail("nvidia-smi stand-in: only --format=csv,noheader,nounits is captured")
    for field in fields:
        if field not in COLUMNS and field not in ACTIVITY_COLUMNS and field != "driver_version":
            fail('Field "%s" is not a valid field to query.' % field)
    for gpu in select(gpus(), ident):
        print(", ".join(gpu[field] for field in fields))


def set_power_limit(watts, ident):
    try:
        value = float(watts)
    except ValueError:
        fail('Invalid power limit "%s".' % watts)
    chosen = select(gpus(), ident)
    for gpu in chosen:
        low, high = float(gpu["power.min_limit"]), float(gpu["power.max_limit"])
        if not low <= value <= high:
            fail("Provided power limit %.2f W is not a valid power limit which should be between %.2f W and %.2f W for GPU %s"
                 % (value, low, high, gpu["pci.bus_id"]))
    os.makedirs(STATE, exist_ok=True)
    for gpu in chosen:
        with open(os.path.join(STATE, "power-limit-%s" % gpu["index"]), "w") as state:
            state.write("%.2f\n" % value)
        print("Power limit for GPU %s was set to %.2f W from %.2f W." % (gpu["pci.bus_id"], value, float(gpu["power.limit"])))
    print("All done.")


def main(args):
    ident = option(args, "-i") or option(args, "--id")
    if not args:
        sys.stdout.write(plain())
    elif args == ["topo", "-m"]:
        sys.stdout.write(read("topo.txt"))
    elif any(arg.startswith("--query-gpu=") for arg in args):
        query(args, ident)
    elif "-pl" in args or "--power-limit" in args:
        set_power_limit(option(args, "-pl") or option(args, "--power-limit"), ident)
    else:
        fail("nvidia-smi stand-in: %r is not captured; it answers plain nvidia-smi, --query-gpu, topo -m and -pl"
             % " ".join(args))


if __name__ == "__main__":
    main(sys.argv[1:])

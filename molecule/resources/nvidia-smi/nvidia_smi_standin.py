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

The set is named by $NVIDIA_SMI_STANDIN_FIXTURE, else by /etc/nvidia-smi-standin/fixture.
install.yml copies this file to /usr/bin/nvidia-smi with a python3 shebang.

It answers:
    nvidia-smi
    nvidia-smi --query-gpu=FIELD[,FIELD...] --format=csv,noheader,nounits [-i ID]
    nvidia-smi topo -m
    nvidia-smi [-i ID] -pl WATTS
A power limit set with -pl is kept in /run/nvidia-smi-standin/ (a tmpfs, so it
is gone after a reboot, as a real limit is) and reported by power.limit
afterwards; the banner of plain `nvidia-smi` keeps the capture's numbers.
Anything else exits 2 saying the stand-in does not know it.
"""

from __future__ import annotations

import csv
import os
import sys

CAPTURES = "/usr/share/nvidia-smi-standin"
SELECTED = "/etc/nvidia-smi-standin/fixture"
STATE = "/run/nvidia-smi-standin"

# The column order of query-gpu.csv: QUERY_GPU_FIELDS of plugins/module_utils/gpu_facts.py.
COLUMNS = (
    "index", "name", "uuid", "pci.bus_id", "compute_cap", "memory.total", "memory.used", "power.draw",
    "power.limit", "power.default_limit", "power.min_limit", "power.max_limit", "persistence_mode",
)


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
    return os.path.join(CAPTURES, name)


def read(name):
    with open(os.path.join(capture_dir(), name)) as capture:
        return capture.read()


def driver_version():
    for line in read("nvidia-smi.txt").splitlines():
        if "Driver Version:" in line:
            return line.split("Driver Version:")[1].split()[0]
    return "[N/A]"


def gpus():
    rows = [dict(zip(COLUMNS, (cell.strip() for cell in row))) for row in csv.reader(read("query-gpu.csv").splitlines()) if row]
    for gpu in rows:
        gpu["driver_version"] = driver_version()
        try:
            with open(os.path.join(STATE, "power-limit-%s" % gpu["index"])) as state:
                gpu["power.limit"] = state.read().strip()
        except OSError:
            pass
    return rows


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
        if field not in COLUMNS and field != "driver_version":
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
        sys.stdout.write(read("nvidia-smi.txt"))
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

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU series the alert rules read, under NVIDIA dcgm-exporter's names: the one place they are spelled.

Two sides speak them: plugin_utils/alert_rules.py writes the rules that read
them, and module_utils/gpu_exporter.py serves them from the collection's own
GPU reader. Because the names are dcgm-exporter's (its etc/default-counters.csv
and DCGM's field constants), a host that runs dcgm-exporter with the counters
file of COUNTERS instead of the collection's exporter needs no other rules.

Each series carries the label ``gpu``, the GPU's index as dcgm-exporter writes
it ("0", "1", ...): the rules join a GPU's series on (host, gpu), where
``host`` is the inventory name the scrape configuration puts on the target.

Standard library only (nothing at all): the exporter runs this on the GPU host.
"""

from __future__ import annotations

POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
POWER_MGMT_LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
MAX_SM_CLOCK = "DCGM_FI_DEV_MAX_SM_CLOCK"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
# NVML's clocks event reasons mask, bit for bit (gpu_power.THROTTLE_REASON_BITS), as DCGM 3.3 and later name it ...
CLOCKS_EVENT_REASONS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
# ... and as DCGM named it before; the rules read whichever an exporter serves.
OLD_REASONS_METRIC = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"

# The label every series names its GPU by.
GPU_LABEL = "gpu"

# The fields the rules read, in dcgm-exporter's counters-file format (field, type, help).
COUNTERS = (
    (POWER_USAGE, "gauge", "Power draw (in W)."),
    (POWER_MGMT_LIMIT, "gauge", "Power management limit (in W)."),
    (GPU_UTIL, "gauge", "GPU utilization (in %)."),
    (SM_CLOCK, "gauge", "SM clock frequency (in MHz)."),
    (MAX_SM_CLOCK, "gauge", "Maximum SM clock frequency (in MHz)."),
    (GPU_TEMP, "gauge", "GPU temperature (in C)."),
    (CLOCKS_EVENT_REASONS, "gauge", "Clock event reasons, NVML's bitmask."),
)

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The power limit each GPU is to run at: the one decision the gpu_driver role's check, unit and verify share.

``wanted`` is gpu_driver_power_limit_w: a number of watts, or 0 for each GPU's
maximum, or for the limit the smoke test's power search kept on the host where
it kept one. Pure: gpu_facts' GPUs in, one plan per GPU out.
"""

from __future__ import annotations


def _number(value):
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None


def effective_limits(gpus, wanted=0, kept=0, record=""):
    """Per GPU: index, name, uuid, watts (None when it cannot be known) and problem (None when it can be set).

    ``kept`` is the limit the smoke test's power search kept on this host (gpu_driver_power_limit_record, read as
    ``record``), used where ``wanted`` is 0: an inventory's limit outranks a measured one.
    """
    asked = _number(wanted) or 0.0
    measured = _number(kept) or 0.0
    source = "gpu_driver_power_limit_w is"
    if asked <= 0 < measured:
        asked, source = measured, "the smoke test kept (%s)" % (record or "gpu_driver_power_limit_record")
    plans = []
    for gpu in gpus or []:
        low, high = _number(gpu.get("power_min_limit_w")), _number(gpu.get("power_max_limit_w"))
        watts = asked if asked > 0 else high
        problem = None
        if watts is None:
            problem = ("GPU %s (%s) reports no maximum power limit to default to. Fix: set gpu_driver_power_limit_w "
                       "to the watts it should run at." % (gpu.get("index"), gpu.get("name")))
        elif (low is not None and watts < low) or (high is not None and watts > high):
            fix = ("set gpu_driver_power_limit_w within that range, or 0 for each GPU's maximum"
                   if source.startswith("gpu_driver") else
                   "delete %s (the next smoke test searches again) or set gpu_driver_power_limit_w"
                   % (record or "gpu_driver_power_limit_record"))
            problem = ("GPU %s (%s) accepts a power limit of %s-%s W, %s %g W. Fix: %s."
                       % (gpu.get("index"), gpu.get("name"), "?" if low is None else "%.1f" % low,
                          "?" if high is None else "%.1f" % high, source, watts, fix))
        plans.append({"index": gpu.get("index"), "name": gpu.get("name"), "uuid": gpu.get("uuid"),
                      "pci_bus_id": gpu.get("pci_bus_id"), "min_w": low, "max_w": high, "watts": watts,
                      "problem": problem})
    return plans

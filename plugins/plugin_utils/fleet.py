# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet rolled out in batches: the batches, and each host's result against the fleet's. Pure.

playbooks/deploy.yml runs its phases host batch by host batch (``serial``): by
default one canary host, then a quarter of the fleet at a time. rollout_serial()
checks the batch sizes a user gives before any host is touched.

Hosts of one configuration (the same release, TP size, topology, GPU model and
loads, and the same gates and tuning options live once the experiments are
decided) should serve at about the same speed. fleet_band() compares one host's
smoke result with the median of every host of its configuration measured in the
same run so far (earlier batches and its own): below ``fraction`` of that median
the host fails, named with both numbers. A host alone in its configuration (the
canary) is its own median and passes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils.experiments import median
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import number

DEFAULT_SERIAL = [1, "25%"]
PASS, FAIL, ALONE = "pass", "fail", "alone"
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class FleetError(ValueError):
    """A rollout setting or a fleet entry cannot be used; the message names it and the fix."""


def _batch(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 1 else None
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if match:
            return "%s%%" % match.group(1) if 0 < float(match.group(1)) <= 100 else None
        if value.strip().isdigit() and int(value) >= 1:
            return int(value)
    return None


def rollout_serial(value):
    """The batch sizes of a rolling deploy, as the play's ``serial`` takes them.

    A number of hosts (1 or more) or a percentage of the fleet ("25%"), or a list of them: each batch takes the
    next size, the last one repeating. None or an empty value gives the default, one canary host then 25 %.
    """
    if value is None or value == "" or value == []:
        return list(DEFAULT_SERIAL)
    sizes = list(value) if isinstance(value, (list, tuple)) else [value]
    checked = [_batch(size) for size in sizes]
    bad = [size for size, ok in zip(sizes, checked) if ok is None]
    if bad:
        raise FleetError(
            "sm120_rollout_serial: %s is not a batch size. Give a number of hosts (1 or more), a percentage of "
            "the fleet ('25%%', above 0 and at most 100) or a list of them, e.g. [1, '25%%'] for one canary host "
            "and then a quarter of the fleet at a time." % ", ".join(repr(size) for size in bad))
    return checked


def rollout_max_fail_percentage(value):
    """The play's ``max_fail_percentage``: 0 (the default, stop at the first failed host) to 100."""
    if value is None or value == "":
        return 0
    percent = number(value)
    if isinstance(value, bool) or percent is None or not 0 <= percent <= 100:
        raise FleetError("sm120_rollout_max_fail_percentage: %r is not a percentage. Give 0 (stop the rollout at "
                         "the first failed host) up to 100 (never stop)." % (value,))
    return int(percent) if float(percent).is_integer() else percent


def band_fraction(value):
    """The fraction of the fleet median a host must reach: above 0 and at most 1 (0.85 by default)."""
    fraction = number(value)
    if isinstance(value, bool) or fraction is None or not 0 < fraction <= 1:
        raise FleetError("smoke_test_fleet_band: %r is not a fraction of the fleet median. Give a number above 0 "
                         "and at most 1, e.g. 0.85 to fail a host below 85 %% of the median of its configuration; "
                         "1 fails every host below the median." % (value,))
    return float(fraction)


def fleet_entry(host, run_id, memory_key, live, load, output_tokens_per_s):
    """What a host tells the fleet of its smoke result."""
    speed = number(output_tokens_per_s)
    if speed is None or speed < 0:
        raise FleetError("%s: its smoke result at load %s has no output tok/s (%r); it cannot be compared with the "
                         "fleet. Look at its report for the failed measurement." % (host, load, output_tokens_per_s))
    return {"host": str(host), "run_id": str(run_id),
            "configuration": "%s | live: %s" % (memory_key, "+".join(sorted(live or [])) or "none"),
            "load": str(load), "output_tokens_per_s": float(speed)}


ENTRY_FIELDS = ("host", "run_id", "configuration", "load", "output_tokens_per_s")


def _checked(entry):
    if not isinstance(entry, Mapping) or not all(field in entry for field in ENTRY_FIELDS):
        raise FleetError("a fleet entry needs host, run_id, configuration, load and output_tokens_per_s (made by "
                         "the fleet_entry filter); got %r" % (entry,))
    return entry


def fleet_band(entries, host, fraction=0.85):
    """``host``'s result against the median of the hosts of its configuration in its run.

    Returns {status: pass | fail | alone, host, value, median, floor, fraction, peers: [hosts], message}.
    """
    entries = [_checked(entry) for entry in (entries or [])]
    fraction = band_fraction(fraction)
    own = [entry for entry in entries if entry["host"] == host]
    if not own:
        raise FleetError("%s has no smoke result among the fleet's entries; the fleet band is checked after the "
                         "host's smoke test." % host)
    own = own[-1]
    peers = sorted({entry["host"]: entry for entry in entries
                    if entry["run_id"] == own["run_id"] and entry["configuration"] == own["configuration"]
                    and entry["load"] == own["load"]}.values(), key=lambda entry: entry["host"])
    values = [entry["output_tokens_per_s"] for entry in peers]
    middle = median(values)
    floor = fraction * middle
    value = own["output_tokens_per_s"]
    names = [entry["host"] for entry in peers]
    result = {"host": host, "value": round(value, 1), "median": round(middle, 1), "floor": round(floor, 1),
              "fraction": fraction, "peers": names, "load": own["load"], "configuration": own["configuration"]}
    if len(peers) == 1:
        result.update(status=ALONE, message="%s is the first host of its configuration in this run: its %.1f output "
                                            "tok/s at load %s is the fleet's median so far." % (host, value,
                                                                                                own["load"]))
    elif value < floor:
        result.update(status=FAIL, message=(
            "%s is outside the fleet band: %.1f output tok/s at load %s, below %d %% of the median %.1f of the %d "
            "hosts of its configuration (%s), the floor being %.1f. Look at this host's report and its GPUs "
            "(power, clocks, PCIe links) before it takes traffic." % (
                host, value, own["load"], round(fraction * 100), middle, len(peers), ", ".join(names), floor)))
    else:
        result.update(status=PASS, message="%s is inside the fleet band: %.1f output tok/s at load %s against the "
                                           "median %.1f of %d hosts (floor %.1f)." % (
                                               host, value, own["load"], middle, len(peers), floor))
    return result

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts from paired rounds: the baseline re-measured beside every candidate measurement. Pure.

A round is one measurement of the baseline (A) and one of the candidate (B), adjacent in time, the order alternating
(AB, BA, AB, BA: ABBA). For a knob that needs a restart the server runs ``A | BB | AA | BB | A``: each bar a restart,
so that R rounds cost R restarts (round_plan), and two rounds share each start between them. The statistic is the
per-round paired log-ratio r_i = ln(B_i / A_i) of each load, the runs of one arm within a round averaged first (runs
of one start are not independent measurements: they share the start's offset); what drifts between rounds cancels
inside each.

The stopping rule (paired_verdict), after each round from the third on, per load: **better** where the interval of the
mean ratio lies wholly above the tolerance, **worse** wholly below minus the tolerance, **no measurable gain** wholly
inside (two one-sided tests), else another round; **not decided** at the last round the budget allows. Looking after
every round is paid for: each look's interval is at alpha / (looks x loads) (Bonferroni over the looks and the loads,
which bounds the chance of any false verdict of the procedure by alpha, whatever the looks' correlation).

A round is refused (round_gate) where its arms ran under different conditions that are not the knob: a different
enforced power limit, or a thermal or hardware slowdown in one arm only. Its ratios are then left out and the round
counts against the budget.

Where the drift comes from on the lent H100 (docs/evidence/real-sglang-drift-h100-2026-12-07.md): c256 power-capped
(CV 2.4-3.4 % within a start), c64 spread by the radix cache's evictions (2.4 %, 0.8 % flushed), the first run after
a start on a cool GPU (+2.6-3.6 %), and on another day the same host losing 22.9 % in 10 minutes across starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from statistics import NormalDist, mean, stdev

DECISIONS = ("better", "worse", "no measurable gain", "measure more", "not decided")


class PairedError(ValueError):
    """Rounds or settings that cannot be judged; the message says what and how to fix it."""


# ------------------------------------------------------------------ Student's t, without scipy

def _betacf(a, b, x):
    """The continued fraction of the regularised incomplete beta (Lentz's method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _incomplete_beta(a, b, x):
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t, df):
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@lru_cache(maxsize=4096)
def t_quantile(p, df):
    """The ``p`` quantile of Student's t (0 < p < 1), by bisection on t_cdf."""
    if not 0 < p < 1 or df < 1:
        raise PairedError("a t quantile needs 0 < p < 1 and 1 degree of freedom or more, got p=%r, df=%r" % (p, df))
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, max(10.0, 2 * abs(NormalDist().inv_cdf(p)))
    while t_cdf(high, df) < p:
        high *= 2
    for _step in range(200):
        middle = (low + high) / 2
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
    return (low + high) / 2


# ------------------------------------------------------------------ the rounds

def round_plan(rounds, restart=True, deployed="A"):
    """The measurements of ``rounds`` ABBA rounds in order, [(round, arm)], and the restarts they take.

    ``restart``: the knob needs a restart (a launch flag), so each change of arm is one; false for a runtime knob
    (the power limit), interleaved on one server at no restart. ``deployed``: the arm the server runs as the rounds
    begin (the deploy starts on the baseline, A). Returns {"order": [...], "restarts": n, "ends_on": arm}."""
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise PairedError("the rounds must be a whole number of 1 or more, got %r" % (rounds,))
    if deployed not in ("A", "B"):
        raise PairedError("the arm deployed must be A or B, got %r" % (deployed,))
    order = []
    for number in range(rounds):
        arms = ("A", "B") if number % 2 == 0 else ("B", "A")
        order += [(number, arm) for arm in arms]
    switches, running = 0, deployed
    for _number, arm in order:
        if arm != running:
            switches, running = switches + 1, arm
    return {"order": order, "restarts": switches if restart else 0, "ends_on": running}


def _values(runs, where):
    if isinstance(runs, (int, float)) and not isinstance(runs, bool):
        runs = [runs]
    if not isinstance(runs, (list, tuple)) or not runs:
        raise PairedError("%s must be a rate or a list of rates (output tok/s), got %r" % (where, runs))
    for value in runs:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise PairedError("%s holds %r: every rate must be a number above 0" % (where, value))
    return list(runs)


def round_ratios(rounds):
    """{load: [ln(mean B / mean A) per round]} of the rounds not refused; a load must be in both arms of a round.

    ``rounds``: [{"A": {load: runs}, "B": {load: runs}, "refused": reason or absent}], runs a rate or a list of the
    rates of that arm's runs in the round (averaged: one number a round)."""
    ratios = {}
    for number, found in enumerate(rounds or []):
        if not isinstance(found, Mapping) or not isinstance(found.get("A"), Mapping) \
                or not isinstance(found.get("B"), Mapping):
            raise PairedError("round %d must map A and B to {load: runs}, got %r" % (number + 1, found))
        if found.get("refused"):
            continue
        for load in sorted(set(found["A"]) | set(found["B"])):
            if load not in found["A"] or load not in found["B"]:
                raise PairedError("round %d measured %s in one arm only: a round measures every load in both"
                                  % (number + 1, load))
            a = mean(_values(found["A"][load], "round %d's A at %s" % (number + 1, load)))
            b = mean(_values(found["B"][load], "round %d's B at %s" % (number + 1, load)))
            ratios.setdefault(load, []).append(math.log(b / a))
    return ratios


def conditions_of(power):
    """The conditions round_gate compares, from a measurement's power summary (the smoke test's, per GPU): the
    enforced limits (watts, per GPU), and the largest share of readings with a thermal or a hardware-slowdown
    reason. Missing figures stay None: a gate does not refuse on what was not read."""
    gpus = (power or {}).get("gpus") or []
    limits = tuple(gpu.get("limit_w") for gpu in gpus)
    thermal = [gpu.get("thermal_reason_share") for gpu in gpus if gpu.get("thermal_reason_share") is not None]
    slowdown = [(gpu.get("throttle_reason_shares") or {}).get("hw_slowdown") for gpu in gpus]
    slowdown = [share for share in slowdown if share is not None]
    return {"limit_w": limits if any(limit is not None for limit in limits) else None,
            "thermal": max(thermal) if thermal else None, "hw_slowdown": max(slowdown) if slowdown else None}


def round_gate(a, b, knob_sets_power=False, share=0.05):
    """Why a round's arms are not comparable, or None: a different enforced power limit (unless the knob is the
    power limit), or a thermal or hardware slowdown in more than ``share`` of one arm's readings while the other
    arm's stay at or under it. ``a``, ``b``: conditions_of() of each arm."""
    if not knob_sets_power and a.get("limit_w") and b.get("limit_w") and a["limit_w"] != b["limit_w"]:
        return ("the arms ran under different enforced power limits (%s W against %s W) and the knob is not the "
                "power limit" % ("/".join(str(v) for v in a["limit_w"]), "/".join(str(v) for v in b["limit_w"])))
    for key, name in (("thermal", "a thermal slowdown"), ("hw_slowdown", "a hardware slowdown")):
        left, right = a.get(key), b.get(key)
        if left is None or right is None:
            continue
        if (left > share) != (right > share):
            return "%s in one arm only (%.0f %% of A's readings, %.0f %% of B's)" % (name, 100 * left, 100 * right)
    return None


# ------------------------------------------------------------------ the verdict

def _settings(settings):
    settings = dict(settings or {})
    tolerance = settings.get("tolerance", 0.03)
    alpha = settings.get("alpha", 0.05)
    first, most = settings.get("first_look", 3), settings.get("max_rounds", 8)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
        raise PairedError("the tolerance must be a fraction above 0 and below 1 (0.03 is 3 %%), got %r" % (tolerance,))
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        raise PairedError("alpha must be above 0 and below 0.5 (0.05: one false verdict in 20), got %r" % (alpha,))
    for name, value in (("first_look", first), ("max_rounds", most)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise PairedError("%s must be a whole number of 2 or more, got %r" % (name, value))
    if most < first:
        raise PairedError("max_rounds (%d) is below first_look (%d): no round would be judged" % (most, first))
    return {"tolerance": float(tolerance), "alpha": float(alpha), "first_look": first, "max_rounds": most}


def look_alpha(settings, loads):
    """The alpha of one look at one load: alpha over every look the budget allows and every load."""
    looks = settings["max_rounds"] - settings["first_look"] + 1
    return settings["alpha"] / (looks * max(loads, 1))


def interval(logs, alpha):
    """The mean of the log-ratios and its two-sided 1 - alpha t-interval, as ratios (mean, low, high)."""
    centre = mean(logs)
    if len(logs) < 2:
        return math.exp(centre), 0.0, math.inf
    half = t_quantile(1 - alpha / 2, len(logs) - 1) * stdev(logs) / math.sqrt(len(logs))
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


def load_decision(logs, settings, alpha):
    """One load's decision from its per-round log-ratios (see the module's docstring)."""
    if len(logs) < settings["first_look"]:
        return "measure more"
    _centre, low, high = interval(logs, alpha)
    band = 1 + settings["tolerance"]
    if low > band:
        return "better"
    if high < 1 / band:
        return "worse"
    if low >= 1 / band and high <= band:
        return "no measurable gain"
    return "measure more"


def rounds_needed(logs, settings, alpha, most=64):
    """The rounds at which this load's interval would decide, were the mean and spread to hold; None beyond ``most``
    or where the mean sits on the tolerance's edge."""
    if len(logs) < 2:
        return None
    centre, spread, edge = abs(mean(logs)), stdev(logs), math.log(1 + settings["tolerance"])
    room = abs(centre - edge)
    if room == 0:
        return None
    for rounds in range(max(settings["first_look"], 2), most + 1):
        if t_quantile(1 - alpha / 2, rounds - 1) * spread / math.sqrt(rounds) < room:
            return rounds
    return None


def paired_verdict(rounds, settings=None):
    """The verdict of the rounds so far: per load its decision, mean ratio and interval, and the experiment's.

    Returns {"decision": one of DECISIONS, "loads": {load: {"decision", "ratio", "low", "high", "rounds",
    "rounds_needed"}}, "rounds": judged, "refused": n, "look_alpha": a}. The experiment is **worse** where any load
    is worse, **better** where one is better and none worse once every load is decided, **no measurable gain** where
    every load is, **not decided** at ``max_rounds`` rounds (refused ones count) with a load still undecided, else
    **measure more**."""
    settings = _settings(settings)
    rounds = list(rounds or [])
    ratios = round_ratios(rounds)
    alpha = look_alpha(settings, len(ratios))
    loads = {}
    for load, logs in sorted(ratios.items()):
        ratio, low, high = interval(logs, alpha)
        decision = load_decision(logs, settings, alpha)
        loads[load] = {"decision": decision, "ratio": round(ratio, 4), "low": round(low, 4),
                       "high": round(high, 4) if math.isfinite(high) else None, "rounds": len(logs),
                       "rounds_needed": rounds_needed(logs, settings, alpha) if decision == "measure more" else None}
    decisions = [entry["decision"] for entry in loads.values()]
    if "worse" in decisions:
        decision = "worse"
    elif decisions and all(found == "no measurable gain" for found in decisions):
        decision = "no measurable gain"
    elif decisions and "measure more" not in decisions:
        decision = "better"
    elif len(rounds) >= settings["max_rounds"]:
        decision = "not decided"
    else:
        decision = "measure more"
    return {"decision": decision, "loads": loads, "rounds": max((len(v) for v in ratios.values()), default=0),
            "refused": sum(1 for found in rounds if isinstance(found, Mapping) and found.get("refused")),
            "look_alpha": alpha}

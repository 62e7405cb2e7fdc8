# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How far apart two measurements of one load must be to be told apart, and how many runs would tell a goal apart.

Pure functions; experiments.compare_load (and through it the experiments, the power search and the upgrade
canary) decides with them.

The band is the larger of the tolerance and the noise term: ``noise_multiple / 2`` times the half-width of the
95 % confidence interval of the difference of the two measurements' means, relative, from the larger of their
run-to-run coefficients of variation and Student's t at their degrees of freedom (runs of both, less two). At a
noise_multiple of 2 that is the interval itself; the role's default of 3 widens it by half for the drift between
measurements minutes apart, which the runs of one measurement do not show. Unlike the range of the repeats ((max - min) / median, the rule
before), it narrows as runs are added, so a measurement too noisy for its goal can say how many runs more would
do, and with two runs a side it is wide (t at 2 degrees of freedom is 4.30), as two runs deserve.

Measured on real runs (docs/evidence/real-sglang-h100-2026-12-05.md; benchmarks/noise_floor.py): one SGLang 0.5.16
configuration of a 5.8 B Llama on an H100, 10 runs a load over three server starts. The run-to-run coefficient of
variation was 0.6 % at c1, 0.8 % at c16, 4.5 % at c64 and 10.6 % at c256; counting only the steady window of a run
or the server's own token counter did not narrow it. The range rule called 10 to 12 % of A/A pairs a change at c64
with two runs a side and saw a true x1.10 at c256 in 9 %.
"""

from __future__ import annotations

import math

# Student's t, two-sided 95 % (the 0.975 quantile), by degrees of freedom; past 30 the normal's 1.96 is near enough.
T975 = (None, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
MOST_RUNS = 60


def t975(df):
    """Student's t at 0.975 for ``df`` degrees of freedom (1 or more)."""
    if df < 1:
        raise ValueError("Student's t needs 1 degree of freedom or more, got %r" % (df,))
    return T975[df] if df < len(T975) else 1.96


def pooled_cv(*samples):
    """The run-to-run coefficient of variation pooled over samples (each a list of one configuration's runs), and its
    degrees of freedom (runs less one per sample); (0.0, 0) where no sample has two runs."""
    squares, df = 0.0, 0
    for values in samples:
        if len(values) < 2:
            continue
        mean = sum(values) / len(values)
        if mean <= 0:
            continue
        squares += sum((value / mean - 1) ** 2 for value in values)
        df += len(values) - 1
    return (math.sqrt(squares / df), df) if df else (0.0, 0)


def noise_term(cv, df, runs_base, runs_cand, multiple):
    """noise_multiple / 2 x the half-width of the 95 % interval of the difference of the means, relative."""
    if df < 1:
        return 0.0
    return multiple / 2.0 * t975(df) * cv * math.sqrt(1.0 / runs_base + 1.0 / runs_cand)


def band(base, cand, tolerance, multiple):
    """{band, cv, df}: the change the two measurements (lists of runs) must show to be told apart. The noise is the
    larger of the two sides' coefficients of variation, not their pool: a side whose few runs happened to agree
    does not narrow the band (as the larger spread did in the rule before); the degrees of freedom are both sides'."""
    cv = max(pooled_cv(base)[0], pooled_cv(cand)[0])
    df = max(0, len(base) - 1) + max(0, len(cand) - 1)
    return {"band": max(tolerance, noise_term(cv, df, len(base), len(cand), multiple)), "cv": cv, "df": df}


def runs_needed(cv, goal, tolerance, multiple, most=MOST_RUNS):
    """The runs a side at which the band of two measurements with this run-to-run ``cv`` is within ``goal``; None
    where the tolerance alone is wider than the goal or more than ``most`` runs would be needed."""
    if tolerance > goal:
        return None
    for runs in range(2, most + 1):
        if noise_term(cv, 2 * runs - 2, runs, runs, multiple) <= goal:
            return runs
    return None


def runs_to_add(runs, goal, tolerance, multiple, budget_s):
    """The runs to add to one configuration's measurement, by load, so that a comparison with another measured as
    long could see ``goal`` at the noise its runs show, within ``budget_s`` seconds of runs a load.

    ``runs``: {load: [(output tok/s, seconds), ...]}, the runs measured so far. Returns {load: {"cv", "runs", "needed",
    "add", "why"}}: ``add`` runs more (0 where none are to be taken), ``why`` one of "enough" (the runs so far reach
    the goal), "no goal" (goal or budget 0), "too few runs" (fewer than 2: no noise to read), "out of reach" (more
    than MOST_RUNS, or a tolerance wider than the goal), "over budget" (the runs needed cost more than the budget:
    none are taken, as they would not decide either; the verdict then says what would), "added".

    Perf_analyzer's stability rule repeats until its windows agree; this one repeats until the band a comparison
    would have is within the goal, from the measured coefficient of variation (runs_needed), and no further: the
    noise of a load (0.6 % at c1, 10.6 % at c256 on a real H100) sets how many runs it takes, not one count for all.
    """
    found = {}
    for load, pairs in sorted((runs or {}).items()):
        values = [value for value, _seconds in pairs]
        seconds = [length for _value, length in pairs if length is not None]
        cv = pooled_cv(values)[0]
        entry = {"cv": round(cv, 4), "runs": len(values), "needed": None, "add": 0}
        if not goal or not budget_s or budget_s <= 0:
            entry["why"] = "no goal"
        elif len(values) < 2:
            entry["why"] = "too few runs"
        else:
            needed = runs_needed(cv, goal, tolerance, multiple)
            entry["needed"] = needed
            if needed is None:
                entry["why"] = "out of reach"
            elif needed <= len(values):
                entry["why"] = "enough"
            else:
                each = sum(seconds) / len(seconds) if seconds else 0.0
                if (needed - len(values)) * each > budget_s:
                    entry["why"] = "over budget"
                else:
                    entry.update(add=needed - len(values), why="added")
        found[load] = entry
    return found

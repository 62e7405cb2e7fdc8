# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How often a verdict is right (issue 50, item 3): today's blocked design against paired rounds, on one bank.

    python3 benchmarks/verdict_accuracy.py                 # the table in docs/experiments.md
    python3 benchmarks/verdict_accuracy.py --sessions 2000 --seed 7

The bank is every real time-stamped run of the harness's 5.8 B Llama on the H100 at c64 and c256: the noise phase of
2026-12-05 (3 starts, 10 runs a load, docs/evidence/real-sglang-h100-2026-12-05/noise.jsonl) and the drift phase of
2026-12-07 (2 starts, 33 to 37 runs a load, docs/evidence/real-sglang-drift-h100-2026-12-07/drift/runs.jsonl). Two
ways of using it:

(a) **A/A replayed on one server** (a runtime knob): the 2026-12-07 radix start's runs in their time order, each
    window of consecutive runs judged as the design would, the arms given by position (blocked: the first half A,
    the second B; paired: AB, BA, AB, ... one run an arm a round). Every verdict other than no gain or not decided
    is false. The windows overlap, so they are not independent: a share, not a rate with an interval.
(b) **Known effects simulated from the bank** (Laaber's and Hunter's method): sessions built from the bank's own
    parts, the arm B multiplied by 0.90 / 0.95 / 1.00 / 1.05 / 1.10: a start's offset from the load's mean drawn
    from the bank's starts (the spread of the five starts' means, on the log scale), within a start the bank's own
    run-to-run residuals in their time order (a block from a random start and position), the day's drift over the
    session's clock (none, as 2026-12-07 measured, or 2026-12-05's -22.9 % per 10 min at c256 and -4.3 % at c64),
    and a restart's 44 s (the 5.8 B model's, measured 2026-12-07; GLM-5's 7-8 minutes are said beside). Both loads
    are measured in every arm, as the role measures every load of a configuration.

The designs, with the collection's own functions:

  blocked  today's: the baseline 3 runs a load as deployed, one restart, the candidate 3 runs a load;
           plugin_utils/experiment_compare.compare_load at the role's defaults (tolerance 3 %, noise multiple 3,
           resolution 10 %): gain, regression, no measurable change, or not decided
  paired   plugin_utils/paired_rounds: A | BB | AA | BB | A ..., 2 runs an arm a round (averaged), judged after
           every round from the third (tolerance 3 %, alpha 5 % over the looks and the 2 loads), at most
           --max-rounds rounds (8: 8 restarts)

Scores per load (and for the experiment, its loads combined as the verdict combines them: worse where any load is
worse, which ends a paired session at once), design and effect: false verdicts (A/A: any better or worse), seen (the true direction), wrong
direction, not decided, mean restarts and minutes. Nothing is timed: the figures are the decisions' counts.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.sm120.sglang.plugins.plugin_utils import paired_rounds  # noqa: E402
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_compare import compare_load  # noqa: E402

BANKS = (ROOT / "docs/evidence/real-sglang-h100-2026-12-05/noise.jsonl",
         ROOT / "docs/evidence/real-sglang-drift-h100-2026-12-07/drift/runs.jsonl")
LOADS = ("c64", "c256")
EFFECTS = (0.90, 0.95, 1.00, 1.05, 1.10)
# Least squares over the 2026-12-05 session (docs/evidence/real-sglang-h100-2026-12-05.md), per 10 minutes.
DRIFTS = {"none (2026-12-07)": {"c64": 0.0, "c256": 0.0},
          "2026-12-05's": {"c64": -0.043, "c256": -0.229}}
RESTART_S = 44.2  # the 5.8 B model's restart to active, docs/evidence/real-sglang-drift-h100-2026-12-07.md
GLM5_RESTART_S = 450.0  # 7-8 minutes on real hosts
BLOCKED_RUNS = 3  # smoke_test_repeats
PAIRED_RUNS = 2
SETTINGS = {"tolerance": 0.03, "noise_multiple": 3.0, "resolution": 0.10}


def bank():
    """{load: {start: [(began, rate, seconds)]}} from both banks, every start its own key."""
    found = {}
    for number, path in enumerate(BANKS):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("load") not in LOADS or row.get("failed") or row.get("processes", 1) != 1:
                continue
            start = "%d:%s" % (number, row.get("start", row.get("label")))
            found.setdefault(row["load"], {}).setdefault(start, []).append(
                (row["began"], row["output_tokens_per_s"], row["duration_s"]))
    for starts in found.values():
        for runs in starts.values():
            runs.sort()
    return found


class Model:
    """The bank's parts per load, the day's drift taken out first: each bank's least-squares trend of the log rate
    over its session's clock removed (the drift is put back by the scenario), then each start's offset from the
    load's level and its runs' residuals in time order, the load's typical run length."""

    def __init__(self, runs_by_start):
        self.residuals, offsets, self.seconds = [], [], []
        by_bank = {}
        for start, runs in runs_by_start.items():
            by_bank.setdefault(start.split(":")[0], []).append(runs)
        for starts in by_bank.values():
            points = [(at, math.log(rate)) for runs in starts for at, rate, _s in runs]
            slope = _slope(points)
            origin = min(point[0] for point in points)
            level = statistics.mean(point[1] for point in points)
            for runs in starts:
                logs = [math.log(rate) - slope * (at - origin) - level for at, rate, _s in runs]
                centre = statistics.mean(logs)
                self.residuals.append([value - centre for value in logs])
                offsets.append(centre)
                self.seconds += [seconds for _at, _rate, seconds in runs]
        self.start_sd = statistics.stdev(offsets)
        self.level = statistics.mean(math.log(rate) for runs in runs_by_start.values() for _at, rate, _s in runs)
        self.run_s = statistics.median(self.seconds)

    def start(self, rng):
        """A new server start: its offset, and its stream of residuals (a block of a random start of the bank)."""
        block = rng.choice(self.residuals)
        position = rng.randrange(len(block))
        return {"offset": rng.gauss(0.0, self.start_sd), "block": block, "at": position}

    def run(self, start, clock_s, drift_per_10min, factor):
        residual = start["block"][start["at"] % len(start["block"])]
        start["at"] += 1
        return math.exp(self.level + start["offset"] + residual) * (1 + drift_per_10min) ** (clock_s / 600) * factor


def _slope(points):
    """Least squares slope of value on time."""
    mx = statistics.mean(point[0] for point in points)
    my = statistics.mean(point[1] for point in points)
    sxx = sum((point[0] - mx) ** 2 for point in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


class Session:
    """One simulated session: the clock, the server's current start per load, restarts counted."""

    def __init__(self, models, drift, effect, rng):
        self.models, self.drift, self.effect, self.rng = models, drift, effect, rng
        self.clock, self.restarts, self.arm = 0.0, 0, "A"
        self.starts = {load: model.start(rng) for load, model in models.items()}

    def switch(self, arm):
        if arm != self.arm:
            self.arm, self.restarts = arm, self.restarts + 1
            self.clock += RESTART_S
            self.starts = {load: model.start(self.rng) for load, model in self.models.items()}

    def measure(self, arm, runs):
        """{load: [rates]} of ``runs`` runs a load in ``arm``, switching to it first."""
        self.switch(arm)
        found = {}
        for load, model in self.models.items():
            found[load] = []
            for _run in range(runs):
                factor = self.effect if arm == "B" else 1.0
                found[load].append(model.run(self.starts[load], self.clock, self.drift[load], factor))
                self.clock += model.run_s
        return found


def blocked_decisions(a, b):
    decisions = {}
    for load in a:
        found = compare_load([{"output_tokens_per_s": v} for v in a[load]],
                             [{"output_tokens_per_s": v} for v in b[load]], SETTINGS, load)
        decisions[load] = {"gain": "better", "regression": "worse"}.get(found["verdict"]) or (
            "no measurable gain" if found["decided"] else "not decided")
    return decisions


def combined(decisions):
    """The experiment's decision from its loads', as paired_rounds.paired_verdict combines them: worse where any
    load is worse, no gain where every load is, better where one is better and every load decided."""
    found = list(decisions.values())
    if "worse" in found:
        return "worse"
    if all(decision == "no measurable gain" for decision in found):
        return "no measurable gain"
    if "not decided" not in found:
        return "better"
    return "not decided"


def blocked(session):
    a = session.measure("A", BLOCKED_RUNS)
    b = session.measure("B", BLOCKED_RUNS)
    decisions = blocked_decisions(a, b)
    return dict(decisions, experiment=combined(decisions))


def paired(session, max_rounds):
    settings = {"tolerance": SETTINGS["tolerance"], "alpha": 0.05, "max_rounds": max_rounds}
    rounds, plan = [], paired_rounds.round_plan(max_rounds)["order"]
    verdict = None
    for number in range(max_rounds):
        arms = [arm for index, arm in plan if index == number]
        found = {arm: session.measure(arm, PAIRED_RUNS) for arm in arms}
        rounds.append({"A": found["A"], "B": found["B"]})
        verdict = paired_rounds.paired_verdict(rounds, settings)
        if verdict["decision"] != "measure more":
            break
    decisions = {load: ("not decided" if entry["decision"] == "measure more" else entry["decision"])
                 for load, entry in verdict["loads"].items()}
    return dict(decisions, experiment="not decided" if verdict["decision"] == "measure more"
                else verdict["decision"])


def replayed(rates, design):
    """(a): one window of one server's runs, the arms by position."""
    if design == "blocked":
        half = len(rates) // 2
        return blocked_decisions({"x": rates[:half]}, {"x": rates[half:]})["x"]
    rounds = []
    for number in range(len(rates) // 2):
        first, second = rates[2 * number], rates[2 * number + 1]
        a, b = (first, second) if number % 2 == 0 else (second, first)
        rounds.append({"A": {"x": a}, "B": {"x": b}})
    entry = paired_rounds.paired_verdict(rounds, {"tolerance": SETTINGS["tolerance"], "alpha": 0.05,
                                                  "max_rounds": len(rounds)})["loads"]["x"]
    return "not decided" if entry["decision"] == "measure more" else entry["decision"]


def score(decisions, effect):
    right = "better" if effect > 1 else "worse" if effect < 1 else None
    wrong = "worse" if effect > 1 else "better" if effect < 1 else None
    total = len(decisions)
    return {"false": sum(d in ("better", "worse") for d in decisions) / total if effect == 1 else None,
            "seen": sum(d == right for d in decisions) / total if right else None,
            "wrong": sum(d == wrong for d in decisions) / total if wrong else 0.0,
            "not_decided": sum(d == "not decided" for d in decisions) / total}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=400, help="simulated sessions a design, drift and effect")
    parser.add_argument("--max-rounds", type=int, default=8)
    parser.add_argument("--seed", type=int, default=20261207)
    args = parser.parse_args(argv)
    found = bank()
    models = {load: Model(found[load]) for load in LOADS}
    print("# Decision accuracy: blocked against paired, on the H100 bank\n")
    print("Bank: %s. Per load: starts' offsets sd (log) and run-to-run residual sd within a start:" % ", ".join(
        "%s %d runs in %d starts" % (load, sum(len(v) for v in found[load].values()), len(found[load]))
        for load in LOADS))
    for load, model in models.items():
        residuals = [value for block in model.residuals for value in block]
        print("- %s: start sd %.1f %%, run sd %.1f %%, run %.1f s" % (
            load, 100 * model.start_sd, 100 * statistics.pstdev(residuals), model.run_s))

    print("\n## (a) A/A replayed on one server (2026-12-07, radix start, runs in time order)\n")
    print("| load | design | windows | runs a window | false verdicts | not decided |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    radix = {load: [rate for _at, rate, _s in found[load]["1:radix"]] for load in LOADS}
    for load in LOADS:
        # Paired: 8 rounds of one run an arm (the recording's 30 to 33 runs a load leave 14 to 17 windows).
        for design, width in (("blocked", 2 * BLOCKED_RUNS), ("paired", 16)):
            rates = radix[load]
            windows = [rates[start:start + width] for start in range(0, len(rates) - width + 1)]
            decisions = [replayed(window, design) for window in windows]
            marks = score(decisions, 1.0)
            print("| %s | %s | %d | %d | %.0f %% | %.0f %% |" % (
                load, design, len(windows), width, 100 * marks["false"], 100 * marks["not_decided"]))

    print("\n## (b) known effects, simulated from the bank (%d sessions a cell, seed %d)\n"
          % (args.sessions, args.seed))
    print("| drift | load | design | effect | false | seen | wrong direction | not decided | restarts | minutes "
          "(5.8 B) | minutes (GLM-5) |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for drift_name, drift in DRIFTS.items():
        for design in ("blocked", "paired"):
            cells = {}
            for effect in EFFECTS:
                rng = random.Random("%d-%s-%s-%s" % (args.seed, drift_name, design, effect))
                decisions, restarts, minutes = {load: [] for load in LOADS + ("experiment",)}, [], []
                for _session in range(args.sessions):
                    session = Session(models, drift, effect, rng)
                    result = blocked(session) if design == "blocked" else paired(session, args.max_rounds)
                    for load in LOADS + ("experiment",):
                        decisions[load].append(result[load])
                    restarts.append(session.restarts)
                    minutes.append(session.clock / 60)
                cells[effect] = (decisions, statistics.mean(restarts), statistics.mean(minutes))
            for load in LOADS + ("experiment",):
                for effect in EFFECTS:
                    decisions, restarts, minutes = cells[effect]
                    marks = score(decisions[load], effect)
                    glm = minutes + restarts * (GLM5_RESTART_S - RESTART_S) / 60
                    print("| %s | %s | %s | x%.2f | %s | %s | %.1f %% | %.0f %% | %.1f | %.1f | %.0f |" % (
                        drift_name, load, design, effect,
                        "%.1f %%" % (100 * marks["false"]) if marks["false"] is not None else "",
                        "%.0f %%" % (100 * marks["seen"]) if marks["seen"] is not None else "",
                        100 * marks["wrong"], 100 * marks["not_decided"], restarts, minutes, glm))
    return 0


if __name__ == "__main__":
    sys.exit(main())

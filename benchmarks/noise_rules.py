# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two noise rules on the same real measurements: the project's band and vLLM's median - 1.4826 x MAD.

The data: the A/A test the real-GPU harness ran by mistake on SGLang 0.5.16 (docs/evidence/real-sglang-h200.md,
"Experiments on real restarts"): four measurements of one and the same configuration, each at four loads (c1, c16,
c64, c256), three runs each, read from the smoke test's own report (docs/evidence/real-sglang-h200/
smoke-experiments.md, the "Repeats" column). Any verdict between two of them other than "no change" is a false one.

Then the same runs with a known effect: the candidate's runs scaled by 1.10, 1.25 and 1.50 (and 0.90, 0.75,
0.50), so that each rule's power to see a real change is measured on real noise.

The rules, each a verdict on one load from the baseline's and the candidate's repeats:

  band   plugins/plugin_utils/experiment_compare.py compare_load at noise_multiple 2: change of the medians beyond
         max(tolerance 0.03, the 95 % confidence half-width of the difference of the means from the larger run-to-run
         coefficient of variation and Student's t; plugin_utils/noise_band.py) is a gain or a regression. Before
         2026-12-05 the band was 2 x the larger (max - min) / median (7 of 48 false, x1.25 seen in 17).
  mad    vLLM's tune_speculative_k (../shared/research/launch-knobs-2026-12.md section 4): each side's conservative
         score median - 1.4826 x MAD; the higher wins where it beats the other by more than 1 %. As a two-way
         verdict: candidate higher by > 1 % a gain, lower by > 1 % a regression.
  band x3  the same at noise_multiple 3 (experiments_noise_multiple's default), for the trade of false verdicts
         against power.
  mad10  the same as mad, and vLLM's stability check: a side whose relative MAD is above 0.1 makes the comparison
         "unstable", no verdict (counted as no change here).

    python3 benchmarks/noise_rules.py            # prints the false verdicts and the power of each rule, and ratios
"""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

# Beside this script (run as a script, its directory is on sys.path).
from h200_power_sampling import put_collection_on_path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "evidence" / "real-sglang-h200" / "smoke-experiments.md"
ROW = re.compile(r"^\| (\d+)\. (?P<label>.+), load (?P<load>\S+) \| [^|]* \| [0-9,.]+ \| (?P<runs>[0-9,. ]+) \(")
EFFECTS = (1.10, 1.25, 1.50, 0.90, 0.75, 0.50)


def collection_experiments():
    """plugins/plugin_utils/experiments.py of this checkout: the band rule measured is the one the role runs."""
    put_collection_on_path(None)
    from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments  # pylint: disable=import-outside-toplevel
    return experiments


EXPERIMENTS = collection_experiments()
median = EXPERIMENTS.median


def band_verdict(base, cand, tolerance=0.03, multiple=2.0):
    """The project's rule (experiments.compare_load) on two lists of output tok/s."""
    found = EXPERIMENTS.compare_load([{"output_tokens_per_s": v} for v in base],
                                     [{"output_tokens_per_s": v} for v in cand],
                                     {"tolerance": tolerance, "noise_multiple": multiple})
    return {EXPERIMENTS.GAIN: "gain", EXPERIMENTS.REGRESSION: "regression"}.get(found["verdict"], "none")


def mad(values):
    centre = median(values)
    return median([abs(value - centre) for value in values])


def mad_verdict(base, cand, margin=0.01, max_relative_mad=None):
    if max_relative_mad is not None and any(mad(v) / median(v) > max_relative_mad for v in (base, cand)):
        return "none"
    score_base, score_cand = (median(v) - 1.4826 * mad(v) for v in (base, cand))
    if score_cand > score_base * (1 + margin):
        return "gain"
    if score_cand < score_base * (1 - margin):
        return "regression"
    return "none"


RULES = {"band": band_verdict, "band x3": lambda b, c: band_verdict(b, c, multiple=3.0), "mad": mad_verdict,
         "mad10": lambda b, c: mad_verdict(b, c, max_relative_mad=0.1)}


def read_measurements(path=REPORT):
    """(label, load) -> runs, from the report's table of measurements."""
    found = {}
    for line in path.read_text().splitlines():
        match = ROW.match(line)
        if match:
            runs = [float(value.replace(",", "")) for value in match.group("runs").split(", ")]
            found[(match.group("label"), match.group("load"))] = runs
    return found


def main():
    measured = read_measurements()
    labels = sorted({key[0] for key in measured})
    loads = sorted({key[1] for key in measured}, key=lambda name: int(name.lstrip("c")))
    if len(labels) < 2 or not loads:
        sys.exit("no measurements read from %s" % REPORT)
    pairs = [(a, b, load) for load in loads for a, b in itertools.permutations(labels, 2)]
    print("A/A: %d measurements of one configuration x %d loads, 3 runs each; %d ordered pairs" % (
        len(labels), len(loads), len(pairs)))
    for label in labels:
        runs = ["%s %s" % (load, ", ".join("%.0f" % v for v in measured[(label, load)])) for load in loads]
        print("  %s: %s" % (label, "; ".join(runs)))
    print("")
    print("| rule | false verdicts (A/A) | %s |" % " | ".join("seen x%.2f" % effect for effect in EFFECTS))
    print("|---|---|%s|" % "|".join(["---"] * len(EFFECTS)))
    summary = {}
    for name, rule in RULES.items():
        false = [(a, b, load) for a, b, load in pairs if rule(measured[(a, load)], measured[(b, load)]) != "none"]
        seen = []
        for effect in EFFECTS:
            want = "gain" if effect > 1 else "regression"
            hits = sum(1 for a, b, load in pairs
                       if rule(measured[(a, load)], [value * effect for value in measured[(b, load)]]) == want)
            seen.append(hits)
        summary[name] = (len(false), seen)
        cells = " | ".join("%d (%.0f %%)" % (hits, 100.0 * hits / len(pairs)) for hits in seen)
        share = 100.0 * len(false) / len(pairs)
        print("| %s | %d of %d (%.0f %%) | %s |" % (name, len(false), len(pairs), share, cells))
    print("")
    band_false, band_seen = summary["band"]
    for other in ("band x3", "mad", "mad10"):
        false, seen = summary[other]
        print("%s against band: false verdicts %d / %d (ratio %s); power at x1.25 %d / %d (ratio %.2f)" % (
            other, false, band_false, ("%.2f" % (false / band_false)) if band_false else "n/a, band has none",
            seen[1], band_seen[1], seen[1] / band_seen[1] if band_seen[1] else float("nan")))


if __name__ == "__main__":
    main()

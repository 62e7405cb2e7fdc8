# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The upgrade canary: a host's first measurement on a new SGLang release against its baseline on the previous one. Pure.

In a rolling deploy the first batch is one host, so a changed release reaches
one host first. roles/smoke_test keeps each host's kept measurement as its
baseline per configuration (release, model profile, model, endpoint and loads);
when sglang_install replaced the release, the baseline of the previous release
at the same loads is the one to beat. Each load's medians are compared in the
experiments' band (experiments.compare_load: the larger of the tolerance and the noise term of
plugin_utils/noise_band.py). Slower at any load loses: the smoke test puts
the host back on the previous release and fails it, which stops the rollout
there. A release may change the text a model writes at temperature 0 without
being wrong, so the outputs are shown, not decided on.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments as ex

KEPT, LOST, NO_BASELINE = "kept", "lost", "no baseline"


def upgrade_verdict(previous_baseline, current, settings, previous_release, release):
    """{decision: kept | lost | no baseline, previous_release, release, loads, parity, message, previous, current}.

    previous_baseline: the host's kept measurement on previous_release ({} when it has none); current: its kept
    measurement on release, at the same loads.
    """
    settings = ex.settings_of(settings)
    if not previous_release or str(previous_release) == str(release):
        raise ex.ExperimentError("the upgrade canary compares two releases; got %r and %r. It runs only when "
                                 "sglang_install replaced the release (sglang_install_previous_release)."
                                 % (previous_release, release))
    result = {"previous_release": str(previous_release), "release": str(release), "loads": {}, "parity": None,
              "previous": previous_baseline or {}, "current": current}
    if not isinstance(previous_baseline, Mapping) or not previous_baseline.get("loads"):
        result.update(decision=NO_BASELINE, message=(
            "SGLang %s has no baseline of this host on %s at these loads to be measured against: it is taken as "
            "measured now, and its measurement is the baseline the next release is compared with." % (
                release, previous_release)))
        return result
    if not isinstance(current, Mapping) or not isinstance(current.get("loads"), Mapping):
        raise ex.ExperimentError("the measurement on SGLang %s is not a measurement of loads: %r" % (release, current))
    loads = settings["loads"] or sorted(current["loads"])
    missing = [load for load in loads if not previous_baseline["loads"].get(load)]
    if missing:
        raise ex.ExperimentError("the baseline on SGLang %s has no runs at load %s; measure that release at the same "
                                 "loads (smoke_test_loads) or remove its baseline file." % (
                                     previous_release, ", ".join(missing)))
    by_load = {load: ex.compare_load(previous_baseline["loads"][load], current["loads"].get(load), settings,
                                     "%s (SGLang %s against %s)" % (load, release, previous_release))
               for load in loads}
    parity = ex.parity_check(previous_baseline.get("parity") or [], current.get("parity") or [], 0.0) if len(
        previous_baseline.get("parity") or []) == len(current.get("parity") or []) else None
    lost = [load for load in loads if by_load[load]["verdict"] == ex.REGRESSION]
    figures = "; ".join("%s %s: %.1f against %.1f output tok/s" % (
        load, ex.describe_load(by_load[load]), by_load[load]["candidate"]["median"],
        by_load[load]["baseline"]["median"]) for load in loads)
    if lost:
        decision = LOST
        message = ("SGLang %s is slower than %s on this host at load %s: %s. The host is put back on %s (its install "
                   "set, gates and unit) and the rollout stops here; pin sglang_install_version to %s, or find the "
                   "cause in both reports before trying %s again." % (
                       release, previous_release, ", ".join(lost), figures, previous_release, previous_release,
                       release))
    else:
        decision = KEPT
        undecided = [load for load in loads if not by_load[load]["decided"]]
        message = "SGLang %s is no slower than %s on this host at any load%s: %s." % (
            release, previous_release, " it could tell (load %s not decided: too noisy for the goal)"
            % ", ".join(undecided) if undecided else "", figures)
    if parity is not None and parity["matched"] < parity["total"]:
        message += " Its outputs of the parity prompts differ from %s's in %d of %d (shown, not decided on)." % (
            previous_release, parity["total"] - parity["matched"], parity["total"])
    result.update(decision=decision, loads=by_load, parity=parity, message=message)
    return result

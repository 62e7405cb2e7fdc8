# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verdict of a host's run of the smoke test, from what was decided in it. Pure.

One place for the run's states and what each means, read by the smoke test (whether the play stops or warns,
whether the baseline is kept), the router (whether the host serves behind it) and the reports (the status title):

- ``pass``: every experiment kept or left off, no threshold missed, the host within the fleet's band;
- ``regression-rolled-back``: an experiment was rejected and turned off; what runs now met the thresholds, so the
  host serves; the play stops on it where ``smoke_test_on_rejection`` is ``fail`` and warns where it is ``warn``;
- ``upgrade-rolled-back``: the new SGLang release was slower than the one before, and the host was put back on that
  one; what was measured is not what it runs, so its thresholds and the fleet band are not judged, it does not
  serve and its baseline is not kept;
- ``fail``: a threshold missed, or the host outside the fleet's band.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils.experiments import REJECTED

PASS = "pass"
FAIL = "fail"
REGRESSION_ROLLED_BACK = "regression-rolled-back"
UPGRADE_ROLLED_BACK = "upgrade-rolled-back"
STATUSES = (PASS, FAIL, REGRESSION_ROLLED_BACK, UPGRADE_ROLLED_BACK)
# The states in which the host serves: behind the router, and as the next run's baseline.
SERVES = (PASS, REGRESSION_ROLLED_BACK)
ON_REJECTION = ("fail", "warn")


class RunVerdictError(ValueError):
    """What the verdict is built from cannot be used; the message names it and the fix."""


def _listed(values, where, of=""):
    """values as a list (None: empty); anything else than a list is refused, named by where (a list of ``of``)."""
    if values is None:
        return []
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (list, tuple)):
        raise RunVerdictError("%s must be a list%s, got %r" % (where, " of " + of if of else "", values))
    return list(values)


def put_back_release(upgrade):
    """The release a host goes back on: the upgrade canary's previous_release where its new release lost, "" where it
    did not lose or the release did not change (``upgrade`` None). Read by the smoke test before the run's verdict
    too (a host put back is not searched for a power limit nor judged against the fleet)."""
    if not isinstance(upgrade, Mapping) or upgrade.get("decision") != "lost":
        return ""
    release = str(upgrade.get("previous_release") or "")
    if not release:
        raise RunVerdictError("the upgrade canary's verdict is lost but names no previous_release to put the host "
                              "back on: %r" % (upgrade,))
    return release


def run_verdict(verdicts, upgrade=None, power=None, misses=None, band=None, on_rejection="fail"):
    """The run's verdict: {status, messages, rolled_back, serves, keeps_baseline, stop, warn, put_back_release}.

    ``verdicts``: the experiments' verdicts of this run ({experiment, decision, message}, and in_place_of for a
    step of a stepped knob judged against the knob's step before it, whose rejection rolls nothing back); ``upgrade``: the upgrade
    canary's verdict (its ``decision`` ``lost`` put the host back on the release before), None where the release did
    not change; ``power``: the power limit search's verdicts (their messages are reported, none rolls anything
    back); ``misses``: the thresholds the result missed and the loads the server capped below their
    concurrency (messages); ``band``: the fleet band's verdict
    ({status, message}), not judged on a host put back on the release before; ``on_rejection``:
    smoke_test_on_rejection. Messages come in that order. ``put_back_release``: the release the host goes back on
    (the upgrade canary's previous_release where it lost), "" otherwise.
    """
    if on_rejection not in ON_REJECTION:
        raise RunVerdictError("smoke_test_on_rejection must be one of %s, got %r" % (
            ", ".join(ON_REJECTION), on_rejection))
    verdicts = [verdict for verdict in _listed(verdicts, "the experiments' verdicts") if isinstance(verdict, Mapping)]
    # A step of a stepped knob rejected against the knob's step kept before it (in_place_of) ends the knob's search,
    # as the power limit's last step does: the step that paid stays, nothing regressed is rolled back.
    rolled_back = [str(verdict.get("experiment")) for verdict in verdicts
                   if verdict.get("decision") == REJECTED and not verdict.get("in_place_of")]
    messages = [str(verdict["message"]) for verdict in verdicts if verdict.get("message")]
    status = REGRESSION_ROLLED_BACK if rolled_back else PASS
    put_back = put_back_release(upgrade)
    if put_back:
        status = UPGRADE_ROLLED_BACK
        messages.append(str(upgrade.get("message") or "the new SGLang release was slower; put back on the one before"))
    messages += [str(step["message"]) for step in _listed(power, "the power limit's verdicts")
                 if isinstance(step, Mapping) and step.get("message")]
    misses = [str(miss) for miss in _listed(misses, "the thresholds missed", "messages")]
    messages += misses
    if status != UPGRADE_ROLLED_BACK:
        if misses:
            status = FAIL
        if isinstance(band, Mapping) and band.get("status") == "fail":
            status = FAIL
            messages.append(str(band.get("message") or "outside the fleet's band"))
    stop = status in (FAIL, UPGRADE_ROLLED_BACK) or (status == REGRESSION_ROLLED_BACK and on_rejection == "fail")
    serves = status in SERVES
    # A host that serves is measured on what it runs: that measurement is the next run's baseline.
    return {"status": status, "messages": messages, "rolled_back": rolled_back, "serves": serves,
            "keeps_baseline": serves, "stop": stop, "warn": status == REGRESSION_ROLLED_BACK and not stop,
            "put_back_release": put_back}

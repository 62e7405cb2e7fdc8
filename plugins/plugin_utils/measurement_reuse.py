# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a run's smoke test takes the host's last kept measurement instead of measuring again. Pure.

A rerun that changed nothing on a host (the same release, model, profile, loads and experiments, and the very server
process that was measured, still running) would measure what it measured before: on a real host minutes of load,
and nothing to learn. The smoke test takes the measurement it kept then (the host's baseline file) as this run's,
and judges it as it would a new one (thresholds, the fleet's band). The service role has checked, in this run, that
the server answers and generates.

It measures again where anything differs, and where it is asked to: ``--tags smoke`` (the smoke phase asked for by
name) or ``smoke_test_reuse: false``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments as ex


def _no(reason):
    return {"reuse": False, "reason": reason, "run_id": "", "measurement": None, "configs": {}, "reused": None}


def reuse_decision(stored, experiments, deployed, settled=None, server_started="", reuse_on=True, run_tags=None):
    """{reuse, reason, run_id, measurement, configs, reused}: the host's last kept measurement stands for this run,
    or why not.

    ``stored``: the host's baseline file ({} where none), written by an earlier run of the same configuration key
    (release, model, profile, endpoint, loads) with the identity of the server it measured (``server_started``);
    ``experiments``/``deployed``: the experiments this run decides (none where it decides none), and those the
    server runs as the smoke test begins;
    ``settled``: what the verdicts kept decide of them before anything is measured, as the experiments role's order
    entry point asks its plan (``experiments_run.settled``: ``done`` where they decide every one, ``keep`` what they
    keep; where the run decides none, done and keeping what runs), read where there are experiments;
    ``server_started``: the identity of the running server (the service role's ``sglang_service_started``: its
    unit's start time and main PID), "" where unknown; ``reuse_on``: ``smoke_test_reuse``; ``run_tags``:
    ``ansible_run_tags`` (C(smoke) among them asks for a measurement). ``measurement`` is the stored one, labelled
    with the run that measured it; ``configs`` the smoke test's measurements by configuration key with it ({} where
    it measures); ``reused`` what the report says of it (the run that measured it, and why it stands), None where
    it measures.
    """
    if not reuse_on:
        return _no("smoke_test_reuse is false")
    if ex.smoke_named(run_tags or []):
        return _no("the smoke phase was asked for by name (--tags smoke)")
    if not isinstance(stored, Mapping) or not isinstance(stored.get("loads"), Mapping) or not stored.get("loads"):
        return _no("no measurement of this configuration is kept for this host")
    if not str(server_started or "").strip():
        return _no("the running server's start is unknown")
    measured_on = str(stored.get("server_started") or "")
    if measured_on != str(server_started):
        return _no("the server now running (%s) is not the one measured (%s)" % (
            server_started, measured_on or "an earlier run that did not record its server"))
    deployed = sorted(deployed or [])
    if ex.config_key(stored.get("config") or []) != ex.config_key(deployed):
        return _no("the measurement kept is of %s, the server runs %s" % (
            ex.config_key(stored.get("config") or []) or "no experiment", ex.config_key(deployed) or "no experiment"))
    # The experiments of this run (settled keeps what runs where experiments_enabled is false): with the stored
    # measurement standing for what runs, the verdicts kept must decide them all and keep what runs. A plan that needs a
    # measurement needs one besides the configuration stored (a verdict compares two), so the plan on the verdicts
    # alone is the plan on them and the stored measurement.
    if experiments:
        if not isinstance(settled, Mapping) or not settled.get("done"):
            return _no("an experiment is to be decided: the verdicts kept do not decide them all")
        if ex.config_key(settled.get("keep") or []) != ex.config_key(deployed):
            return _no("the experiments kept (%s) are not what the server runs" % (
                ex.config_key(settled.get("keep") or []) or "none"))
    run_id = str(stored.get("run_id") or "")
    measurement = dict(stored)
    measurement["label"] = "as measured in run %s" % (run_id or "?")
    reason = "the server runs what run %s measured, unchanged since it started (%s)" % (run_id or "?", server_started)
    return {"reuse": True, "run_id": run_id, "measurement": measurement, "reason": reason,
            "configs": {ex.config_key(deployed): measurement}, "reused": {"run_id": run_id, "reason": reason}}

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rerun that changed nothing takes the host's last kept measurement instead of measuring the same server again."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import measurement_reuse as mr
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiments import ExperimentError

SETTINGS = {"tolerance": 0.03, "noise_multiple": 2.0, "parity_min_match": 1.0, "loads": ["low", "high"]}
SERVER = "Fri 2026-12-04 20:00:00 UTC, PID 4242"
KEY = "sglang 0.5.23 | TP 8 | PCIe | NVIDIA RTX PRO 6000 | low,high"
NCCL = "nccl_min_nchannels_8"
FUSION = "flashinfer_allreduce_fusion"


def stored(config=(NCCL,), server=SERVER, run_id="20261204T200500Z"):
    return {"config": sorted(config), "label": "with " + ", ".join(config), "parity": ["a"], "run_id": run_id,
            "server_started": server,
            "loads": {"low": [{"output_tokens_per_s": 200.0}] * 3, "high": [{"output_tokens_per_s": 800.0}] * 3}}


def remembered(**decisions):
    return {KEY: {name: {"decision": decision, "reason": "measured", "loads": {}} for name, decision in
                  decisions.items()}}


def settled(experiments=(NCCL,), deployed=(NCCL,), memory=None, retry=()):
    """What the experiments role's order entry point hands on: its plan on the verdicts kept alone (experiment_step
    with nothing measured), as the deploy play asks it."""
    from ansible_collections.sm120.sglang.plugins.filter.experiments import experiment_step

    return experiment_step({}, list(experiments), SETTINGS, remembered(**{NCCL: "kept"}) if memory is None else memory,
                           KEY, list(retry), None, list(deployed))


def decide(baseline, experiments=(NCCL,), deployed=(NCCL,), memory=None, server=SERVER, reuse_on=True,
           run_tags=("all",), retry=()):
    return mr.reuse_decision(baseline, list(experiments), list(deployed),
                             settled(experiments, deployed, memory, retry) if experiments else None, server,
                             reuse_on, list(run_tags))


def test_the_same_server_of_the_same_configuration_with_every_verdict_kept_is_not_measured_again():
    decision = decide(stored())
    assert decision["reuse"] is True and decision["run_id"] == "20261204T200500Z"
    assert decision["reason"] == ("the server runs what run 20261204T200500Z measured, unchanged since it started "
                                  "(Fri 2026-12-04 20:00:00 UTC, PID 4242)")
    # The stored figures, labelled with the run that measured them.
    assert decision["measurement"]["loads"]["high"] == [{"output_tokens_per_s": 800.0}] * 3
    assert decision["measurement"]["label"] == "as measured in run 20261204T200500Z"
    # The smoke test's measurements by configuration key, and the report's record of the reuse.
    assert list(decision["configs"]) == [NCCL] and decision["configs"][NCCL] is decision["measurement"]
    assert decision["reused"] == {"run_id": "20261204T200500Z",
                                  "reason": "the server runs what run 20261204T200500Z measured, unchanged since it "
                                            "started (Fri 2026-12-04 20:00:00 UTC, PID 4242)"}


def test_a_host_without_experiments_reuses_too():
    assert decide(stored(config=()), experiments=(), deployed=(), memory={})["reuse"] is True
    # Experiments not decided by measurement (experiments_enabled: false): what runs was measured, as it runs.
    assert decide(stored(), experiments=(), deployed=(NCCL,), memory={})["reuse"] is True


def test_another_server_process_is_measured_again():
    restarted = decide(stored(), server="Fri 2026-12-04 21:00:00 UTC, PID 5151")
    assert restarted == {"reuse": False, "run_id": "", "measurement": None, "configs": {}, "reused": None,
                         "reason": "the server now running (Fri 2026-12-04 21:00:00 UTC, PID 5151) is not the one "
                                   "measured (Fri 2026-12-04 20:00:00 UTC, PID 4242)"}
    # A baseline kept before the process was recorded, and a server whose start is unknown.
    assert decide(stored(server=""))["reason"] == ("the server now running (Fri 2026-12-04 20:00:00 UTC, PID 4242) is "
                                                   "not the one measured (an earlier run that did not record its "
                                                   "server)")
    assert decide(stored(), server="")["reason"] == "the running server's start is unknown"


def test_asked_for_a_measurement_it_measures():
    assert decide(stored(), reuse_on=False)["reason"] == "smoke_test_reuse is false"
    assert decide(stored(), run_tags=("smoke",))["reason"] == "the smoke phase was asked for by name (--tags smoke)"
    assert decide(stored(), run_tags=("service", "smoke"))["reuse"] is False
    # Other tags, e.g. the service phase alone, do not ask for it.
    assert decide(stored(), run_tags=("service",))["reuse"] is True
    with pytest.raises(ExperimentError, match="ansible_run_tags must be a list of tags, got 'smoke'"):
        mr.reuse_decision(stored(), [NCCL], [NCCL], settled(), SERVER, True, "smoke")


def test_no_kept_measurement_or_another_configuration_is_measured():
    assert decide({})["reason"] == "no measurement of this configuration is kept for this host"
    assert decide(None)["reuse"] is False
    assert decide(dict(stored(), loads={}))["reuse"] is False
    assert decide(stored(config=(NCCL, FUSION)))["reason"] == (
        "the measurement kept is of flashinfer_allreduce_fusion+nccl_min_nchannels_8, the server runs "
        "nccl_min_nchannels_8")


def test_an_experiment_to_decide_is_measured():
    undecided = "an experiment is to be decided: the verdicts kept do not decide them all"
    # New, held back by the deploy: the server runs without it, and it has no verdict.
    held = decide(stored(), experiments=(FUSION, NCCL), deployed=(NCCL,))
    assert held["reuse"] is False and held["reason"] == undecided
    # Asked to be measured again (experiments_retry).
    assert decide(stored(), retry=(NCCL,))["reason"] == undecided
    # Its verdict was rejected but the server runs it: what is kept is not what runs.
    assert decide(stored(), memory=remembered(**{NCCL: "rejected"}))["reason"] == (
        "the experiments kept (none) are not what the server runs")
    # Experiments to decide and nothing handed on of their verdicts: nothing says they are decided.
    assert mr.reuse_decision(stored(), [NCCL], [NCCL], None, SERVER)["reason"] == undecided
    assert mr.reuse_decision(stored(), [NCCL], [NCCL], {"done": False, "measure": []}, SERVER)["reason"] == undecided


def test_a_kept_verdict_without_a_decision_is_named_where_the_plan_is_asked():
    # The experiments role's order entry point asks it, before the smoke test reads what it settled.
    with pytest.raises(ExperimentError, match="the remembered verdict of nccl_min_nchannels_8 has no decision"):
        settled(memory={KEY: {NCCL: {"reason": "?"}}})


@pytest.mark.parametrize("experiments, deployed, memory, retry", [
    ((NCCL,), (NCCL,), None, ()), ((NCCL,), (NCCL,), None, (NCCL,)), ((FUSION, NCCL), (NCCL,), None, ()),
    ((FUSION, NCCL), (FUSION, NCCL), "both kept", ()), ((NCCL,), (NCCL,), "rejected", ()),
    ((FUSION, NCCL), (NCCL,), "fusion rejected", ()), ((FUSION, NCCL), (), None, ())])
def test_the_plan_on_the_verdicts_alone_decides_as_the_plan_with_the_stored_measurement(
        experiments, deployed, memory, retry):
    """The smoke test no longer asks the planner: the experiments role's plan on the verdicts kept alone stands
    for the plan on them and the stored measurement of what runs (a verdict compares two configurations, so the
    stored one alone never decides one), the question the reuse asked the planner itself before."""
    from ansible_collections.sm120.sglang.plugins.filter.experiments import experiment_step

    memory = {None: None, "both kept": remembered(**{NCCL: "kept", FUSION: "kept"}),
              "rejected": remembered(**{NCCL: "rejected"}),
              "fusion rejected": remembered(**{NCCL: "kept", FUSION: "rejected"})}[memory]
    alone = settled(experiments, deployed, memory, retry)
    with_stored = experiment_step({"+".join(sorted(deployed)): stored(config=deployed)}, list(experiments), SETTINGS,
                                  remembered(**{NCCL: "kept"}) if memory is None else memory, KEY, list(retry), None,
                                  list(deployed))
    assert alone["done"] is with_stored["done"]
    assert alone.get("keep") == with_stored.get("keep")


def test_the_filter_takes_one_mapping_by_name_and_names_what_is_missing_or_unknown():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.sm120.sglang.plugins.filter.measurement_reuse import smoke_measurement_reuse

    found = smoke_measurement_reuse({}, {"experiments": [], "deployed": []})
    assert found["reuse"] is False and found["reason"] == "no measurement of this configuration is kept for this host"
    with pytest.raises(AnsibleFilterError, match=r"smoke_measurement_reuse: missing deployed; unknown deploy; it "
                                                 r"takes experiments, deployed"):
        smoke_measurement_reuse({}, {"experiments": [], "deploy": []})
    with pytest.raises(AnsibleFilterError, match="takes one mapping"):
        smoke_measurement_reuse({}, [[], []])


def test_the_filter_passes_every_name_on_and_its_messages_name_what_it_takes():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.sm120.sglang.plugins.filter.measurement_reuse import FilterModule, smoke_measurement_reuse

    # Every optional name reaches the decision under its own name: a restarted server, a verdict to measure again.
    question = {"experiments": [NCCL], "deployed": [NCCL], "settled": settled(retry=(NCCL,)),
                "server_started": SERVER, "reuse_on": True, "run_tags": ["all"]}
    found = smoke_measurement_reuse(stored(), question)
    assert found["reuse"] is False and found == mr.reuse_decision(stored(), **question)
    assert smoke_measurement_reuse(stored(), dict(question, settled=settled()))["reuse"] is True
    assert smoke_measurement_reuse(stored(), dict(question, settled=settled(), server_started="PID 5151"))[
        "reuse"] is False
    assert smoke_measurement_reuse(stored(), dict(question, settled=settled(), reuse_on=False))["reuse"] is False
    assert smoke_measurement_reuse(stored(), dict(question, settled=settled(), run_tags=["smoke"]))["reuse"] is False
    # The sidecar's name of the mapping, as a keyword.
    assert smoke_measurement_reuse(stored(), question=dict(question, settled=settled()))["reuse"] is True
    # The names it had when it asked the planner itself are refused, naming what it takes now.
    with pytest.raises(AnsibleFilterError) as raised:
        smoke_measurement_reuse({}, {"experiments": [], "deployed": [], "memory": {}})
    assert str(raised.value) == ("smoke_measurement_reuse: unknown memory; it takes experiments, deployed "
                                 "(and settled, server_started, reuse_on, run_tags where wanted)")
    with pytest.raises(AnsibleFilterError) as raised:
        smoke_measurement_reuse({}, [[], []])
    assert str(raised.value) == ("smoke_measurement_reuse takes one mapping of experiments, deployed, settled, "
                                 "server_started, reuse_on, run_tags; got 'list'")
    # As Ansible calls it: the decision's own error fails the task with its message.
    as_ansible_calls_it = FilterModule().filters()["smoke_measurement_reuse"]
    with pytest.raises(AnsibleFilterError, match="ansible_run_tags must be a list of tags"):
        as_ansible_calls_it(stored(), dict(question, settled=settled(), run_tags="smoke"))

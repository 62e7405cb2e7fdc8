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


def decide(baseline, experiments=(NCCL,), deployed=(NCCL,), memory=None, server=SERVER, reuse_on=True,
           run_tags=("all",), retry=()):
    return mr.reuse_decision(baseline, list(experiments), list(deployed), SETTINGS,
                             remembered(**{NCCL: "kept"}) if memory is None else memory, KEY, list(retry), server,
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
        mr.reuse_decision(stored(), [NCCL], [NCCL], SETTINGS, remembered(**{NCCL: "kept"}), KEY, [], SERVER, True,
                          "smoke")


def test_no_kept_measurement_or_another_configuration_is_measured():
    assert decide({})["reason"] == "no measurement of this configuration is kept for this host"
    assert decide(None)["reuse"] is False
    assert decide(dict(stored(), loads={}))["reuse"] is False
    assert decide(stored(config=(NCCL, FUSION)))["reason"] == (
        "the measurement kept is of flashinfer_allreduce_fusion+nccl_min_nchannels_8, the server runs "
        "nccl_min_nchannels_8")


def test_an_experiment_to_decide_is_measured():
    # New, held back by the deploy: the server runs without it, and it has no verdict.
    held = decide(stored(), experiments=(FUSION, NCCL), deployed=(NCCL,))
    assert held["reuse"] is False
    assert held["reason"] == ("an experiment is to be decided (flashinfer_allreduce_fusion+nccl_min_nchannels_8 to "
                              "measure)")
    # Asked to be measured again (experiments_retry).
    assert decide(stored(), retry=(NCCL,))["reason"] == "an experiment is to be decided (the baseline to measure)"
    # Its verdict was rejected but the server runs it: what is kept is not what runs.
    assert decide(stored(), memory=remembered(**{NCCL: "rejected"}))["reason"] == (
        "the experiments kept (none) are not what the server runs")


def test_a_kept_verdict_without_a_decision_is_named():
    with pytest.raises(ExperimentError, match="the remembered verdict of nccl_min_nchannels_8 has no decision"):
        decide(stored(), memory={KEY: {NCCL: {"reason": "?"}}})


def test_the_filter_takes_one_mapping_by_name_and_names_what_is_missing_or_unknown():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.sm120.sglang.plugins.filter.measurement_reuse import smoke_measurement_reuse

    found = smoke_measurement_reuse({}, {"experiments": [], "deployed": [], "settings": SETTINGS})
    assert found["reuse"] is False and found["reason"] == "no measurement of this configuration is kept for this host"
    with pytest.raises(AnsibleFilterError, match=r"smoke_measurement_reuse: missing settings; unknown deploy; it "
                                                 r"takes experiments, deployed, settings"):
        smoke_measurement_reuse({}, {"experiments": [], "deployed": [], "deploy": []})
    with pytest.raises(AnsibleFilterError, match="takes one mapping"):
        smoke_measurement_reuse({}, [[], [], SETTINGS])


def test_the_filter_passes_every_name_on_and_its_messages_name_what_it_takes():
    from ansible.errors import AnsibleFilterError

    from ansible_collections.sm120.sglang.plugins.filter.measurement_reuse import FilterModule, smoke_measurement_reuse
    from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_data

    # Every optional name reaches the decision under its own name: a restarted server, a verdict to measure again.
    question = {"experiments": [NCCL], "deployed": [NCCL], "settings": SETTINGS,
                "memory": remembered(**{NCCL: "kept"}), "key": KEY, "retry": [NCCL], "server_started": SERVER,
                "reuse_on": True, "run_tags": ["all"]}
    found = smoke_measurement_reuse(stored(), question)
    assert found["reuse"] is False and found == mr.reuse_decision(stored(), knobs=experiment_data.stepped(), **question)
    assert smoke_measurement_reuse(stored(), dict(question, retry=[]))["reuse"] is True
    assert smoke_measurement_reuse(stored(), dict(question, retry=[], key="another"))["reuse"] is False
    assert smoke_measurement_reuse(stored(), dict(question, retry=[], server_started="PID 5151"))["reuse"] is False
    assert smoke_measurement_reuse(stored(), dict(question, retry=[], reuse_on=False))["reuse"] is False
    assert smoke_measurement_reuse(stored(), dict(question, retry=[], run_tags=["smoke"]))["reuse"] is False
    # The sidecar's name of the mapping, as a keyword.
    assert smoke_measurement_reuse(stored(), question=dict(question, retry=[]))["reuse"] is True
    # The knobs are the collection's data, not the caller's.
    with pytest.raises(AnsibleFilterError) as raised:
        smoke_measurement_reuse({}, {"experiments": [], "deployed": [], "settings": SETTINGS, "knobs": {}})
    assert str(raised.value) == ("smoke_measurement_reuse: unknown knobs; it takes experiments, deployed, settings "
                                 "(and memory, key, retry, server_started, reuse_on, run_tags where wanted)")
    with pytest.raises(AnsibleFilterError) as raised:
        smoke_measurement_reuse({}, [[], [], SETTINGS])
    assert str(raised.value) == ("smoke_measurement_reuse takes one mapping of experiments, deployed, settings, "
                                 "memory, key, retry, server_started, reuse_on, run_tags; got 'list'")
    # As Ansible calls it: the decision's own error fails the task with its message.
    as_ansible_calls_it = FilterModule().filters()["smoke_measurement_reuse"]
    with pytest.raises(AnsibleFilterError, match="the remembered verdict of nccl_min_nchannels_8 has no decision"):
        as_ansible_calls_it(stored(), dict(question, retry=[], memory={KEY: {NCCL: {}}}))

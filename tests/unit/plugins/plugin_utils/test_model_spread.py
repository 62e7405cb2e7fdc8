# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model once per fleet: who fetches, who pulls, from which address, and whether it fits."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils.model_spread import (
    SpreadError,
    disk_problem,
    spread_plan,
    take_problem,
)

HOSTVARS = {"gpu-1": {"ansible_host": "10.0.0.1"}, "gpu-2": {"ansible_host": "10.0.0.2"},
            "gpu-3": {"ansible_host": "gpu-3.example", "sglang_service_model_share_address": "192.168.50.3"},
            "gpu-4": {}}
ALL = ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]


def test_the_canary_batch_fetches_on_the_plays_first_host():
    plan = spread_plan("gpu-1", ["gpu-1"], ALL, {"gpu-1": False}, "", HOSTVARS)
    assert plan == {"source": "gpu-1", "action": "fetch", "pullers": [], "allow": [], "address": "10.0.0.1"}


def test_later_batches_pull_from_the_source_at_their_cluster_addresses():
    present = {"gpu-2": False, "gpu-3": False, "gpu-4": True}
    plans = {h: spread_plan(h, ["gpu-2", "gpu-3", "gpu-4"], ALL, present, None, HOSTVARS) for h in present}
    assert [plans[h]["action"] for h in present] == ["pull", "pull", "keep"]
    assert plans["gpu-2"]["pullers"] == ["gpu-2", "gpu-3"]
    # The cluster address wins over ansible_host; a host without either is reached at its name.
    assert plans["gpu-2"]["allow"] == ["10.0.0.2", "192.168.50.3"]
    assert plans["gpu-4"]["address"] == "10.0.0.1"


def test_one_batch_fetches_and_pulls_in_order():
    present = dict.fromkeys(ALL, False)
    plans = [spread_plan(h, ALL, ALL, present, "", HOSTVARS) for h in ALL]
    assert [p["action"] for p in plans] == ["fetch", "pull", "pull", "pull"]
    assert plans[0]["allow"] == ["10.0.0.2", "192.168.50.3", "gpu-4"]


def test_a_source_that_has_it_keeps_it_and_shares_it():
    plan = spread_plan("gpu-1", ["gpu-1", "gpu-2"], ALL, {"gpu-1": True, "gpu-2": False}, "", HOSTVARS)
    assert plan["action"] == "keep" and plan["pullers"] == ["gpu-2"]


def test_a_named_source_outside_the_play_is_pulled_from():
    hostvars = dict(HOSTVARS, store={"ansible_host": "10.0.0.9"})
    plan = spread_plan("gpu-1", ["gpu-1"], ALL, {"gpu-1": False}, "store", hostvars)
    assert (plan["action"], plan["address"]) == ("pull", "10.0.0.9")


def test_a_source_not_in_the_inventory_is_refused_with_the_fix():
    with pytest.raises(SpreadError, match="sglang_service_model_source is 'gpu-9', which is not a host"):
        spread_plan("gpu-1", ["gpu-1"], ALL, {}, "gpu-9", HOSTVARS)


def test_a_host_outside_its_batch_is_refused():
    with pytest.raises(SpreadError, match="gpu-2 is not in this batch"):
        spread_plan("gpu-2", ["gpu-1"], ALL, {}, "", HOSTVARS)


def test_what_is_there_already_counts_toward_the_room():
    assert disk_problem("5000000000", 9000000000, 4000000000, None, "/m", "gpu-1") is None
    problem = disk_problem("4999999999\n", 9000000000, 4000000000, None, "/var/lib/sglang/models", "gpu-1")
    assert problem == ("The model needs 5.0 GB more on the filesystem of /var/lib/sglang/models on gpu-1, which has "
                       "5.0 GB free. Free space there, or set sglang_service_model_path to a larger filesystem.")


def test_a_figure_in_gb_raises_the_need():
    assert "needs 1000000.0 GB more" in disk_problem(10 ** 12, 100, 0, 1000000, "/m", "gpu-1")
    assert disk_problem(10 ** 12, 100, 0, "", "/m", "gpu-1") is None


def test_df_output_that_is_no_number_is_refused():
    with pytest.raises(SpreadError, match="not a number of bytes"):
        disk_problem("Avail", 100)


# ---- a transfer the source did not finish -------------------------------------------------------------------------

# As the role registers its loop when the source was cut off after the first file (tests/faults/model_source_dies.py).
NO_ROUTE = ("rsync: [Receiver] failed to connect to 172.28.8.11 (172.28.8.11): No route to host (113)\n"
            "rsync error: error in socket IO (code 10) at clientserver.c(141) [Receiver=3.2.7]")
CUT = [
    {"item": {"path": "config.json", "size": 72}, "rc": 0, "changed": True, "stderr": ""},
    {"item": {"path": "model-00001-of-00002.safetensors"}, "rc": 10, "failed": True, "attempts": 2, "stderr": NO_ROUTE},
    {"item": {"path": "tokenizer_config.json"}, "rc": 10, "failed": True, "attempts": 2, "stderr": NO_ROUTE},
]


def test_a_source_that_stopped_answering_is_named_with_what_came_what_did_not_and_how_to_go_on():
    assert take_problem(CUT, "sm120-model-2", "sm120-model-1", "rsync://172.28.8.11:8730/model",
                        "/srv/models/glm-5-nvfp4.partial") == (
        "sm120-model-2 took 1 of 3 files from sm120-model-1 (rsync://172.28.8.11:8730/model) and could not take "
        "model-00001-of-00002.safetensors, tokenizer_config.json: rsync: [Receiver] failed to connect to 172.28.8.11 "
        "(172.28.8.11): No route to host (113) rsync error: error in socket IO (code 10) at clientserver.c(141) "
        "[Receiver=3.2.7]. The files it took are kept in /srv/models/glm-5-nvfp4.partial and checked on the next run, "
        "which takes only the rest: run the play again once sm120-model-1 answers, or set sglang_service_model_source "
        "to another host that has the model.")


def test_a_finished_or_skipped_transfer_is_no_problem_and_a_result_that_is_not_a_loop_is_refused():
    assert take_problem(CUT[:1], "h", "s") is None
    # Check mode skips the command: no rc.
    assert take_problem([{"item": {"path": "config.json"}, "skipped": True, "changed": False}], "h", "s") is None
    assert take_problem([], "h", "s") is None
    with pytest.raises(SpreadError, match="not the list of its loop"):
        take_problem({"skipped": True}, "h", "s")

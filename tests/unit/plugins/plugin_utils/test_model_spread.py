# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model once per fleet: who fetches, who pulls, from which address, and whether it fits."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils.model_spread import SpreadError, disk_problem, spread_plan

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

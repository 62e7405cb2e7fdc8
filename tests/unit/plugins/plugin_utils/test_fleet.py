# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet rolled out in batches: the batch sizes checked, and each host against its configuration's median."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import fleet

KEY = "sglang 0.5.23 | TP 8 | pcie | NVIDIA RTX PRO 6000 Blackwell Server Edition | high c64"


def entry(host, speed, run_id="r1", key=KEY, live=("nccl_min_nchannels_8",), load="high"):
    return fleet.fleet_entry(host, run_id, key, list(live), load, speed)


# ------------------------------------------------------------------ batches

@pytest.mark.parametrize("value, expected", [
    (None, [1, "25%"]),
    ("", [1, "25%"]),
    ([], [1, "25%"]),
    (1, [1]),
    ("3", [3]),
    ("50%", ["50%"]),
    (" 12.5 % ", ["12.5%"]),
    ([1, "25%"], [1, "25%"]),
    ([1, 2, "100%"], [1, 2, "100%"]),
])
def test_the_batches_a_user_gives_are_the_plays_serial(value, expected):
    assert fleet.rollout_serial(value) == expected


@pytest.mark.parametrize("value", [0, -1, "0", "0%", "150%", "a quarter", True, [1, "x"], [1, 0], 1.5, {"size": 1}])
def test_a_bad_batch_size_names_itself_and_the_forms_accepted(value):
    with pytest.raises(fleet.FleetError) as raised:
        fleet.rollout_serial(value)
    assert "sm120_rollout_serial" in str(raised.value) and "[1, '25%']" in str(raised.value)


def test_only_the_bad_sizes_of_a_list_are_named():
    with pytest.raises(fleet.FleetError, match=r"^sm120_rollout_serial: 'x' is not"):
        fleet.rollout_serial([1, "x", "25%"])


@pytest.mark.parametrize("value, expected", [(None, 0), ("", 0), (0, 0), ("25", 25), (100, 100), (12.5, 12.5)])
def test_the_fail_percentage(value, expected):
    assert fleet.rollout_max_fail_percentage(value) == expected


@pytest.mark.parametrize("value", [-1, 101, "many", True])
def test_a_bad_fail_percentage_is_refused(value):
    with pytest.raises(fleet.FleetError, match="sm120_rollout_max_fail_percentage"):
        fleet.rollout_max_fail_percentage(value)


# ------------------------------------------------------------------ the band

def test_the_canary_alone_is_its_own_median():
    band = fleet.fleet_band([entry("canary", 2700.0)], "canary")
    assert band["status"] == "alone" and band["median"] == 2700.0 and band["peers"] == ["canary"]


def test_a_slow_host_fails_named_with_both_numbers():
    entries = [entry("canary", 2700.0), entry("node-2", 2650.0), entry("node-3", 2720.0), entry("node-4", 1800.0)]
    band = fleet.fleet_band(entries, "node-4")
    assert band["status"] == "fail"
    # Median of four: (2650 + 2700) / 2.
    assert (band["value"], band["median"], band["floor"]) == (1800.0, 2675.0, 2273.8)
    assert "node-4" in band["message"] and "1800.0" in band["message"] and "2675.0" in band["message"]
    assert "85 %" in band["message"] and "canary, node-2, node-3, node-4" in band["message"]
    for host in ("canary", "node-2", "node-3"):
        assert fleet.fleet_band(entries, host)["status"] == "pass"


def test_the_floor_is_the_fraction_of_the_median_and_the_floor_itself_passes():
    entries = [entry("a", 100.0), entry("b", 100.0), entry("c", 85.0)]
    assert fleet.fleet_band(entries, "c")["status"] == "pass"
    assert fleet.fleet_band(entries, "c", 0.9)["status"] == "fail"
    assert fleet.fleet_band(entries, "c", "0.85")["floor"] == 85.0


def test_only_hosts_of_the_same_run_configuration_and_load_are_peers():
    entries = [entry("a", 100.0), entry("b", 40.0, live=()), entry("c", 40.0, run_id="r0"),
               entry("d", 40.0, key=KEY.replace("0.5.23", "0.5.22")), entry("e", 40.0, load="low"), entry("f", 95.0)]
    band = fleet.fleet_band(entries, "f")
    assert band["peers"] == ["a", "f"] and band["status"] == "pass"
    # A host whose kept experiments differ is its own configuration: the canary of it.
    assert fleet.fleet_band(entries, "b")["status"] == "alone"


def test_the_latest_entry_of_a_host_counts_once():
    entries = [entry("a", 100.0), entry("b", 10.0), entry("b", 99.0)]
    band = fleet.fleet_band(entries, "b")
    assert band["status"] == "pass" and band["peers"] == ["a", "b"] and band["median"] == 99.5


def test_the_order_of_live_experiments_does_not_make_another_configuration():
    assert (entry("a", 1.0, live=("x", "y"))["configuration"] == entry("a", 1.0, live=("y", "x"))["configuration"])
    assert entry("a", 1.0, live=())["configuration"].endswith("| live: none")


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, "most", True])
def test_a_bad_fraction_is_refused(fraction):
    with pytest.raises(fleet.FleetError, match="smoke_test_fleet_band"):
        fleet.fleet_band([entry("a", 1.0)], "a", fraction)


def test_a_host_without_a_result_or_a_bad_entry_is_an_error():
    with pytest.raises(fleet.FleetError, match="node-9 has no smoke result"):
        fleet.fleet_band([entry("a", 1.0)], "node-9")
    with pytest.raises(fleet.FleetError, match="a fleet entry needs host"):
        fleet.fleet_band([{"host": "a"}], "a")
    with pytest.raises(fleet.FleetError, match="node-2: its smoke result at load high has no output tok/s"):
        fleet.fleet_entry("node-2", "r1", KEY, [], "high", None)

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model across hosts: ranks, flags, the batch and who serves (plugins/plugin_utils/nodes.py)."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import nodes

PAIR = ["gpu-b", "gpu-c"]
GROUPS = {"all": ["gpu-a"] + PAIR, "gpu_hosts": ["gpu-a"] + PAIR, "glm5_pair": PAIR, "empty": []}
HOSTVARS = {"gpu-a": {}, "gpu-b": {"ansible_host": "10.0.0.2", "sglang_service_nnodes_group": "glm5_pair"},
            "gpu-c": {"ansible_host": "10.0.0.3", "sglang_service_nnodes_group": "glm5_pair"}}


@pytest.mark.parametrize("host,rank", [("gpu-b", 0), ("gpu-c", 1)])
def test_each_node_gets_its_rank_and_the_first_nodes_address(host, rank):
    plan = nodes.node_plan(GROUPS, "glm5_pair", host, HOSTVARS)
    assert plan["nodes"] == PAIR and plan["rank"] == rank and plan["first"] == "gpu-b"
    assert plan["options"] == {"--nnodes": 2, "--node-rank": rank, "--dist-init-addr": "10.0.0.2:25000"}
    assert plan["env"] == {}


def test_a_host_alone_has_no_flags_and_is_its_own_first():
    plan = nodes.node_plan(GROUPS, "", "gpu-a", HOSTVARS, socket_ifname="eth1")
    assert plan == {"nodes": [], "rank": 0, "first": "gpu-a", "options": {},
                    "env": {"NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth1"}}
    # A group of one host is one host.
    assert nodes.node_plan({"one": ["gpu-a"]}, "one", "gpu-a")["options"] == {}


def test_the_address_comes_from_the_setting_or_the_first_nodes_name_and_port():
    assert nodes.node_plan(GROUPS, "glm5_pair", "gpu-c", HOSTVARS, "192.168.1.2:5000")["options"][
        "--dist-init-addr"] == "192.168.1.2:5000"
    assert nodes.node_plan(GROUPS, "glm5_pair", "gpu-c", {}, "", "20000")["options"][
        "--dist-init-addr"] == "gpu-b:20000"
    assert nodes.node_plan(GROUPS, "glm5_pair", "gpu-c", {"gpu-b": {"ansible_host": "fd00::2"}})["options"][
        "--dist-init-addr"] == "[fd00::2]:25000"


@pytest.mark.parametrize("group,host,kwargs,words", [
    ("nope", "gpu-b", {}, ["'nope'", "no such group"]),
    ("empty", "gpu-b", {}, ["'empty'", "no hosts"]),
    ("glm5_pair", "gpu-a", {}, ["gpu-a is not in that inventory group", "rank 0 first"]),
    ("glm5_pair", "gpu-b", {"dist_init_addr": "10.0.0.2"}, ["HOST:PORT", "10.0.0.1:25000"]),
    ("glm5_pair", "gpu-b", {"dist_init_addr": "10.0.0.2:70000"}, ["HOST:PORT"]),
    ("glm5_pair", "gpu-b", {"dist_init_port": 0}, ["sglang_service_dist_init_port is 0", "1 to 65535"]),
    ("glm5_pair", "gpu-b", {"dist_init_port": True}, ["sglang_service_dist_init_port is True"]),
    ("", "gpu-a", {"socket_ifname": "eth1; rm"}, ["sglang_service_nccl_socket_ifname", "eth1"]),
])
def test_bad_settings_are_refused_naming_the_fix(group, host, kwargs, words):
    with pytest.raises(nodes.NodesError) as raised:
        nodes.node_plan(GROUPS, group, host, HOSTVARS, **kwargs)
    for word in words:
        assert word in str(raised.value)


def test_the_nodes_of_a_model_must_share_the_batch():
    plan = nodes.node_plan(GROUPS, "glm5_pair", "gpu-b", HOSTVARS)
    assert nodes.batch_problem(plan, ["gpu-a", "gpu-b", "gpu-c"], "gpu-b") == ""
    problem = nodes.batch_problem(plan, ["gpu-a", "gpu-b"], "gpu-b")
    assert "gpu-b serves one model with gpu-c" in problem and "does not hold gpu-c" in problem
    assert '[2, "25%"]' in problem
    # A host alone fits any batch.
    assert nodes.batch_problem(nodes.node_plan(GROUPS, "", "gpu-a"), ["gpu-a"], "gpu-a") == ""


def test_only_the_first_node_serves_requests():
    assert nodes.serves_api("gpu-a", GROUPS, HOSTVARS)
    assert nodes.serves_api("gpu-b", GROUPS, HOSTVARS)
    assert not nodes.serves_api("gpu-c", GROUPS, HOSTVARS)
    # A group the inventory lacks is refused by the service role; here the host counts as serving.
    assert nodes.serves_api("gpu-x", GROUPS, {"gpu-x": {"sglang_service_nnodes_group": "nope"}})

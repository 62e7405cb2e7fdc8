# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_service filters of more than four arguments, called as a play calls them: their input and one mapping
of the other arguments by name (issue 39, item 4). Each gives what its pure function gives for the same values; a
name missing or unknown, or no mapping, fails naming the filter, the name and the names it takes. The role's task
files call them that way: their expressions are templated here with Ansible's own Templar."""

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.sm120.sglang.plugins.filter import launch_profile as launch_profile_filters
from ansible_collections.sm120.sglang.plugins.filter import model_spread as model_spread_filters
from ansible_collections.sm120.sglang.plugins.plugin_utils import launch_profile, model_spread, nodes, sglang_releases

ROOT = pathlib.Path(__file__).resolve().parents[4]
TASKS = ROOT / "roles" / "sglang_service" / "tasks"
FILTERS = {**launch_profile_filters.FilterModule().filters(), **model_spread_filters.FilterModule().filters()}

PROFILE = yaml.safe_load((ROOT / "roles" / "sglang_service" / "vars" / "profiles.yml").read_text(
    encoding="utf-8"))["__sglang_service_builtin_profiles"]["glm-5-nvfp4"]
GROUPS = {"all": ["gpu-a", "gpu-b", "gpu-c"], "glm5_pair": ["gpu-b", "gpu-c"]}
HOSTVARS = {"gpu-a": {}, "gpu-b": {"ansible_host": "10.0.0.2"},
            "gpu-c": {"ansible_host": "10.0.0.3", "sglang_service_model_share_address": "192.168.50.3"}}
# A transfer cut off after its first file, as the role registers its loop.
CUT = [{"item": {"path": "config.json"}, "rc": 0, "changed": True, "stderr": ""},
       {"item": {"path": "model-00001-of-00002.safetensors"}, "rc": 10, "failed": True,
        "stderr": "rsync: failed to connect to 10.0.0.2 (10.0.0.2): No route to host (113)"}]

FLAGS = {"overrides": {"tp_size": 4}, "host": "::", "port": 30001, "model_path": "/srv/models/glm-5-nvfp4",
         "multinode": {"--nnodes": 2, "--node-rank": 1, "--dist-init-addr": "10.0.0.2:25000"},
         "extra_args": {"--cuda-graph-max-bs": 256}, "gate_flags": {"--enable-flashinfer-allreduce-fusion": True},
         "config_path": "/etc/sglang/glm-5-nvfp4.yaml", "version": "0.5.16"}
NODES = {"group": "glm5_pair", "host": "gpu-c", "hostvars": HOSTVARS, "dist_init_addr": "",
         "dist_init_port": 25001, "socket_ifname": "eth1"}
SPREAD = {"batch": ["gpu-b", "gpu-c"], "play_hosts": ["gpu-a", "gpu-b", "gpu-c"],
          "present": {"gpu-b": False, "gpu-c": False}, "source": "gpu-b", "hostvars": HOSTVARS}
DISK = {"total_bytes": 410 * 10 ** 9, "present_bytes": 10 * 10 ** 9, "needed_gb": 450.0,
        "path": "/srv/models", "host": "gpu-c"}
TAKE = {"host": "gpu-c", "source": "gpu-b", "url": "rsync://10.0.0.2:8730/model",
        "partial": "/srv/models/glm-5-nvfp4.partial"}


def _flags(profile, **arguments):
    """launch_flags with the release data's renames, which the filter reads itself."""
    return launch_profile.launch_flags(profile, renames=sglang_releases.load()["flag_renames"], **arguments)


# name, the filter's input, its mapping (every name it takes), the pure function, the names it requires
CASES = [
    ("sglang_service_flags", PROFILE, FLAGS, _flags, ()),
    ("sglang_service_nodes", GROUPS, NODES, nodes.node_plan, ("group", "host")),
    ("sglang_service_model_spread", "gpu-c", SPREAD, model_spread.spread_plan, ("batch", "play_hosts", "present")),
    ("sglang_service_model_disk_problem", "200000000000\n", DISK, model_spread.disk_problem, ("total_bytes",)),
    ("sglang_service_model_take_problem", CUT, TAKE, model_spread.take_problem, ()),
]
IDS = [case[0] for case in CASES]


@pytest.mark.parametrize("name,value,arguments,pure,required", CASES, ids=IDS)
def test_the_filter_gives_what_its_pure_function_gives_for_the_same_values(name, value, arguments, pure, required):
    found = FILTERS[name](value, dict(arguments))
    assert found == pure(value, **arguments)
    # Each name reaches the function: the values above are none of the defaults, so the answer is not the defaults'.
    assert found != pure(value, **{key: arguments[key] for key in required})


@pytest.mark.parametrize("name,value,arguments,pure,required", CASES, ids=IDS)
def test_the_required_names_alone_take_the_defaults(name, value, arguments, pure, required):
    given = {key: arguments[key] for key in required}
    assert FILTERS[name](value, dict(given)) == pure(value, **given)


@pytest.mark.parametrize("name,value,arguments,pure,required", CASES, ids=IDS)
def test_an_unknown_name_fails_naming_the_filter_the_name_and_what_it_takes(name, value, arguments, pure, required):
    del pure, required
    with pytest.raises(AnsibleFilterError) as refused:
        FILTERS[name](value, dict(arguments, tp=8))
    message = str(refused.value)
    assert message.startswith("%s: unknown tp; it takes " % name)
    # The fix: every name the filter takes.
    assert all(key in message for key in arguments)


@pytest.mark.parametrize("name,value,arguments,pure,required", [case for case in CASES if case[4]],
                         ids=[case[0] for case in CASES if case[4]])
def test_a_required_name_left_out_fails_naming_it(name, value, arguments, pure, required):
    del pure
    for key in required:
        takes = r"^%s: missing %s; it takes %s \(and " % (name, key, ", ".join(required))
        with pytest.raises(AnsibleFilterError, match=takes):
            FILTERS[name](value, {other: arguments[other] for other in arguments if other != key})
    # No mapping at all: every required name is missing, named in the filter's message rather than Python's.
    with pytest.raises(AnsibleFilterError, match=r"^%s: missing %s; " % (name, ", ".join(required))):
        FILTERS[name](value)


@pytest.mark.parametrize("name,value,arguments,pure,required", CASES, ids=IDS)
def test_arguments_by_place_are_refused_naming_the_mapping_it_takes(name, value, arguments, pure, required):
    del pure, required
    with pytest.raises(AnsibleFilterError, match=r"^%s takes one mapping of %s; got 'list'"
                                                 % (name, ", ".join(arguments))):
        FILTERS[name](value, list(arguments.values()))


def test_a_filter_whose_every_name_is_optional_runs_on_its_defaults_without_a_mapping():
    assert FILTERS["sglang_service_flags"](PROFILE) == _flags(PROFILE) == FILTERS["sglang_service_flags"](PROFILE, {})
    assert FILTERS["sglang_service_model_take_problem"](CUT) == model_spread.take_problem(CUT)
    with pytest.raises(AnsibleFilterError, match=r"^sglang_service_flags: unknown tp_size; it takes any of overrides, "
                                                 r"host, port, model_path, multinode, extra_args, gate_flags, "
                                                 r"config_path, version, each where wanted$"):
        FILTERS["sglang_service_flags"](PROFILE, {"tp_size": 8})


def test_the_pure_functions_own_refusals_still_fail_the_task_with_their_message():
    with pytest.raises(AnsibleFilterError, match="--api-key would show the key"):
        FILTERS["sglang_service_flags"](PROFILE, {"extra_args": {"--api-key": "secret"}})
    with pytest.raises(AnsibleFilterError, match="no such group"):
        FILTERS["sglang_service_nodes"](GROUPS, {"group": "nowhere", "host": "gpu-a"})
    with pytest.raises(AnsibleFilterError, match="not a host of the inventory"):
        FILTERS["sglang_service_model_spread"]("gpu-c", dict(SPREAD, source="gpu-z"))
    with pytest.raises(AnsibleFilterError, match="not a number of bytes"):
        FILTERS["sglang_service_model_disk_problem"]("avail", {"total_bytes": 1})
    with pytest.raises(AnsibleFilterError, match="not the list of its loop"):
        FILTERS["sglang_service_model_take_problem"]({"skipped": True}, TAKE)


# ---------------------------------------------------------------- the role's task files

def _task_expression(file_name, variable):
    """The expression the task file binds to ``variable`` (a task's vars or set_fact), trusted as the task
    loader trusts it."""
    def find(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == variable and isinstance(value, str):
                    return value
                found = find(value)
                if found is not None:
                    return found
        elif isinstance(node, list):
            for item in node:
                found = find(item)
                if found is not None:
                    return found
        return None
    loader = DataLoader()
    expression = find(loader.load_from_file(str(TASKS / file_name), trusted_as_template=True))
    assert expression is not None, "%s binds no %s" % (file_name, variable)
    return Templar(loader=loader), expression


def test_the_role_decides_the_spread_with_one_mapping():
    templar, expression = _task_expression("model.yml", "__sglang_service_model_spread")
    assert "sglang_service_model_spread({" in expression
    hostvars = {name: dict(values, __sglang_service_model_stat={"stat": {"exists": name == "gpu-b"}})
                for name, values in HOSTVARS.items()}
    templar.available_variables = {"inventory_hostname": "gpu-c", "ansible_play_batch": ["gpu-b", "gpu-c"],
                                   "ansible_play_hosts_all": ["gpu-a", "gpu-b", "gpu-c"], "hostvars": hostvars,
                                   "sglang_service_model_source": "gpu-b"}
    assert templar.template(expression) == model_spread.spread_plan(
        "gpu-c", ["gpu-b", "gpu-c"], ["gpu-a", "gpu-b", "gpu-c"], {"gpu-b": True, "gpu-c": False}, "gpu-b", hostvars)
    assert templar.template(expression)["action"] == "pull"


@pytest.mark.parametrize("free,problem", [("500000000000", False), ("300000000000", True)])
def test_the_role_checks_the_room_with_one_mapping(free, problem):
    templar, expression = _task_expression("model_room.yml", "__sglang_service_model_disk_problem")
    assert "sglang_service_model_disk_problem({" in expression
    templar.available_variables = {
        "inventory_hostname": "gpu-c", "__sglang_service_df": {"stdout_lines": ["Avail", free]},
        "__sglang_service_model_listing": {"listing": {"total_bytes": 410 * 10 ** 9}},
        "__sglang_service_model_before": {"present_bytes": 10 * 10 ** 9}, "sglang_service_model_disk_gb": None,
        "sglang_service_model_path": "/srv/models/glm-5-nvfp4"}
    expected = model_spread.disk_problem(free, 410 * 10 ** 9, 10 * 10 ** 9, None, "/srv/models", "gpu-c")
    assert (expected is not None) is problem
    assert templar.template(expression) == expected


def test_the_role_names_a_transfer_cut_short_with_one_mapping():
    templar, expression = _task_expression("model_take.yml", "__sglang_service_model_take_problem")
    assert "sglang_service_model_take_problem({" in expression
    templar.available_variables = {
        "inventory_hostname": "gpu-c", "__sglang_service_model_transfer": {"results": CUT},
        "__sglang_service_model_spread": {"source": "gpu-b", "address": "10.0.0.2"},
        "sglang_service_model_share_port": 8730, "__sglang_service_model_partial": "/srv/models/glm-5-nvfp4.partial"}
    assert templar.template(expression) == model_spread.take_problem(CUT, **TAKE)
    # Every file came: no problem.
    templar.available_variables = dict(templar.available_variables,
                                       __sglang_service_model_transfer={"results": CUT[:1]})
    assert templar.template(expression) is None

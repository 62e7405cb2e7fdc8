# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The input check on the controller: the bad-input battery (each mistake a new user makes, and the ones next to it,
refused by the variable set and its fix, all at once), and every shipped inventory and molecule scenario passing."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.lookup import input_problems
from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_data, input_check, sglang_releases

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _known(groups=None, serving=False):
    specs, defaults, published, profiles = input_problems.collection_knowledge(ROOT)
    return input_check.knowledge(specs, defaults, published, profiles, sglang_releases.load(), experiment_data.load(),
                                 groups or {}, serving)


def _problems(variables, groups=None, hosts=("gpu-1",), serving=False):
    return input_check.problems({host: dict(variables) for host in hosts}, _known(groups, serving))


def test_a_deploy_refuses_a_server_open_beyond_its_host_without_an_api_key():
    found = _problems({}, serving=True)
    assert len(found) == 1 and found[0].startswith("gpu-1: sglang_service_host is 0.0.0.0 (every interface, the "
                                                   "default) and sglang_service_api_key is empty"), found
    assert "Fix: set sglang_service_api_key" in found[0] and "sglang_service_host: 127.0.0.1" in found[0]
    assert "an address other hosts reach" in _problems({"sglang_service_host": "10.0.0.5"}, serving=True)[0]
    assert "port 30001" in _problems({"sglang_service_port": 30001, "sglang_service_api_key": ""}, serving=True)[0]
    for fine in ({"sglang_service_api_key": "s3cret"}, {"sglang_service_host": "127.0.0.1"},
                 {"sglang_service_host": "::1"}, {"sglang_service_api_key": input_check.UNREAD}):
        assert _problems(fine, serving=True) == [], fine
    # The key is never in a message.
    found = _problems({"sglang_service_api_key": "s3cret", "sglang_service_tp_size": 3}, serving=True)
    assert all("s3cret" not in line for line in found)
    # Not where the run starts no server (preflight, measure, monitoring), nor on a router host that serves none.
    assert _problems({}) == []
    assert _problems({}, groups={"gpu_hosts": ["gpu-2"]}, serving=True) == []


MISSPELLED_SLO_LOAD = {"concurrency": 4, "num_requests": 8, "input_tokens": 16, "output_tokens": 16,
                       "slo": {"ttft_p99": 5}}
# Each mistake: the variables set, and what the one problem it gives must say (each piece in the message).
BATTERY = {
    "tp size above the GPUs": ({"sglang_service_tp_size": 16},
                               ["sglang_service_tp_size is 16", "which has 8 GPUs (preflight_gpu_count)",
                                "sglang_service_nnodes_group", "8 or fewer"]),
    "tp size of 3 on 8 GPUs": ({"sglang_service_tp_size": 3},
                               ["sglang_service_tp_size is 3", "8 GPUs", "one of 1, 2, 4, 8"]),
    "tp size from -e, a string": ({"sglang_service_tp_size": "16"}, ["sglang_service_tp_size is 16"]),
    "tp size not a number": ({"sglang_service_tp_size": "eight"},
                             ["sglang_service_tp_size:", "int", "a whole number"]),
    "tp size 0": ({"sglang_service_tp_size": 0}, ["sglang_service_tp_size is 0", "1 or more"]),
    "tp size above fewer GPUs": ({"sglang_service_tp_size": 8, "preflight_gpu_count": 4},
                                 ["sglang_service_tp_size is 8", "which has 4 GPUs"]),
    "profile's tp size above the GPUs": ({"preflight_gpu_count": 4},
                                         ["the tp_size of profile glm-5-nvfp4 is 8", "which has 4 GPUs"]),
    "misspelled variable": ({"sglang_install_verison": "0.5.23"},
                            ["sglang_install_verison is set, and no role reads it",
                             "did you mean sglang_install_version?"]),
    "misspelled variable, another role": ({"smoke_test_min_output_toks": 300},
                                          ["smoke_test_min_output_toks", "did you mean smoke_test_min_output_tok_s?"]),
    "misspelled prefix": ({"sglang_servce_tp_size": 8},
                          ["sglang_servce_tp_size is set, and no role reads it", "did you mean sglang_service_tp_size?"]),
    "variable with a prefix and nothing near": ({"sglang_router_zzzz": 1},
                                                ["sglang_router_zzzz", "docs/roles/sglang_router.md"]),
    "unknown release": ({"sglang_install_version": "0.5.99"},
                        ["sglang_install_version: SGLang 0.5.99 is not in the release data"]),
    "misspelled release": ({"sglang_install_version": "0.5.2e"},
                           ["sglang_install_version", "Did you mean 0.5.23?"]),
    "misspelled profile": ({"sglang_service_profile": "glm5-nvfp4"},
                           ["sglang_service_profile is glm5-nvfp4", "did you mean glm-5-nvfp4?",
                            "sglang_service_profiles"]),
    "misspelled tuning option": ({"sglang_service_tuning": ["nccl_min_nchannel_8"]},
                                 ["sglang_service_tuning names nccl_min_nchannel_8",
                                  "did you mean nccl_min_nchannels_8?"]),
    "tuning option as a string": ({"sglang_service_tuning": "nccl_min_nchannels_8"},
                                  ["sglang_service_tuning"]),
    "tuning option the release cannot take": ({"sglang_install_version": "0.5.23",
                                               "sglang_service_tuning": ["moe_runner_cutlass"]},
                                              ["moe_runner_cutlass", "sglang_service_tuning"]),
    "misspelled gate": ({"sm120_patches_enabled": {"flashinfer_allreduce_fuson": True}},
                        ["sm120_patches_enabled names the gate flashinfer_allreduce_fuson",
                         "did you mean flashinfer_allreduce_fusion?"]),
    "gate switched by a string": ({"sm120_patches_enabled": {"flashinfer_allreduce_fusion": "false"}},
                                  ["sm120_patches_enabled: flashinfer_allreduce_fusion must be true or false"]),
    "threshold not a number": ({"smoke_test_min_output_tok_s": "fast"},
                               ["smoke_test_min_output_tok_s:", "float", "a number"]),
    "threshold below 0": ({"smoke_test_max_ttft_p99_ms": -1}, ["smoke_test_max_ttft_p99_ms is -1", "0 or more"]),
    "load without its fields": ({"smoke_test_loads": {"high": {"concurrency": 4}}},
                                ["smoke_test_loads: load high needs concurrency, num_requests"]),
    "load objective misspelled": ({"smoke_test_loads": {"high": MISSPELLED_SLO_LOAD}},
                                  ["the objective (slo) of load high has ttft_p99"]),
    "relative model path": ({"sglang_service_model_path": "models/glm-5"},
                            ["sglang_service_model_path is models/glm-5, not an absolute path"]),
    "model repository not owner/name": ({"sglang_service_model_repo": "GLM-5-NVFP4",
                                         "sglang_service_model_path": "/srv/models/glm5"},
                                        ["sglang_service_model_repo", "is GLM-5-NVFP4", "/srv/models/glm5",
                                         "owner/name"]),
    "bool as a word": ({"smoke_test_one_host_at_a_time": "maybe"},
                       ["smoke_test_one_host_at_a_time:", "true or false"]),
    "choice not among the choices": ({"preflight_interconnect": "nvlnk"},
                                     ["preflight_interconnect:", "one of pcie, nvlink, mixed, single"]),
}


@pytest.mark.parametrize("case", sorted(BATTERY))
def test_each_mistake_is_refused_once_by_the_variable_set_and_its_fix(case):
    variables, pieces = BATTERY[case]
    found = _problems(variables)
    assert len(found) == 1, found
    assert found[0].startswith("gpu-1: ")
    for piece in pieces:
        assert piece in found[0], (piece, found[0])


def test_every_mistake_of_one_run_is_reported_at_once_in_the_order_of_the_checks():
    variables = {}
    for case in ("misspelled variable", "misspelled profile", "threshold not a number", "misspelled gate"):
        variables.update(BATTERY[case][0])
    found = _problems(variables)
    assert [line.split(": ", 1)[1].split(" ")[0] for line in found] == [
        "sglang_install_verison", "smoke_test_min_output_tok_s:", "sglang_service_profile", "sm120_patches_enabled"]


def test_a_type_error_names_the_variable_set_not_the_role_that_reads_it_under_another_name():
    found = _problems({"sglang_service_tp_size": "eight"})
    assert "sglang_service_tp_size" in found[0] and "sm120_patches_tp_size" not in found[0]


def test_one_problem_of_several_hosts_is_one_line_naming_them_all():
    found = _problems({"sglang_service_tp_size": 3}, hosts=("gpu-2", "gpu-1"))
    assert len(found) == 1 and found[0].startswith("gpu-1, gpu-2: ")


def test_a_model_across_two_hosts_takes_twice_the_gpus_of_one():
    groups = {"pair": ["gpu-1", "gpu-2"]}
    ok = {"sglang_service_nnodes_group": "pair", "sglang_service_tp_size": 16}
    assert _problems(ok, groups, hosts=("gpu-1", "gpu-2")) == []
    odd = _problems(dict(ok, sglang_service_tp_size=9), groups)
    assert "must be a multiple of 2" in odd[0] and "sglang_service_tp_size to 16" in odd[0]
    assert "across 2 hosts" in _problems(dict(ok, sglang_service_tp_size=32), groups)[0]


def test_a_user_profile_is_known_and_its_tp_size_checked():
    low = {"concurrency": 1, "num_requests": 1, "input_tokens": 1, "output_tokens": 1}
    profile = {"description": "small", "tp_size": 4, "loads": {"low": low}}
    assert _problems({"sglang_service_profiles": {"small": profile}, "sglang_service_profile": "small"}) == []
    found = _problems({"sglang_service_profiles": {"small": dict(profile, tp_size=6)},
                       "sglang_service_profile": "small"})
    assert "the tp_size of profile small is 6" in found[0]


def test_facts_the_roles_publish_and_the_experiments_old_names_are_no_unknown_variables():
    assert _problems({"smoke_test_verdict": {"verdict": "pass"}, "sglang_service_url": "http://x:30000",
                      "sm120_patches_live": [], "smoke_test_experiment_tolerance": 0.03}) == []


def test_a_value_the_controller_cannot_render_is_not_judged_but_its_name_is():
    found = _problems({"sglang_service_tp_size": input_check.UNREAD, "sglang_install_verison": input_check.UNREAD})
    assert len(found) == 1 and "sglang_install_verison" in found[0]


def test_null_is_not_set():
    assert _problems({"sglang_service_tp_size": None, "smoke_test_min_output_tok_s": None}) == []


def test_one_more_check_is_one_more_source():
    def always(host, known):
        return [("sglang_service_profile", "%s serves %s" % (host.name, host.profile_name()))]
    found = input_check.problems({"gpu-1": {}}, _known(), input_check.SOURCES + (always,))
    assert found == ["gpu-1: gpu-1 serves glm-5-nvfp4"]


def _scenario_variables():
    """Every inventory's and molecule scenario's variables by host: (where, host vars), a template unread."""
    def read(values):
        return {name: input_check.UNREAD if isinstance(value, str) and "{{" in value else value
                for name, value in (values or {}).items()}
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "molecule", "*", "molecule.yml"))):
        with open(path) as handle:
            inventory = ((yaml.safe_load(handle).get("provisioner") or {}).get("inventory") or {})
        merged = {}
        for values in (inventory.get("group_vars") or {}).values():
            merged.update(read(values))
        for host, values in (inventory.get("host_vars") or {}).items():
            found.append(("%s %s" % (os.path.relpath(path, ROOT), host), dict(merged, **read(values))))
        found.append((os.path.relpath(path, ROOT), merged))
    for path in sorted(glob.glob(os.path.join(ROOT, "inventories", "*", "group_vars", "*.yml"))):
        with open(path) as handle:
            found.append((os.path.relpath(path, ROOT), read(yaml.safe_load(handle))))
    for path in sorted(glob.glob(os.path.join(ROOT, "molecule", "*", "*.yml"))):
        with open(path) as handle:
            for play in yaml.safe_load(handle) or []:
                if isinstance(play, dict) and isinstance(play.get("vars"), dict):
                    found.append(("%s play %s" % (os.path.relpath(path, ROOT), play.get("name")), read(play["vars"])))
    return found


@pytest.mark.parametrize("where,variables", _scenario_variables(), ids=lambda value: str(value)[:60])
def test_every_shipped_inventory_and_scenario_passes_the_check(where, variables):
    # The scenarios that deploy servers (deploy.yml) set an API key, as the local default does; the production
    # example sets none: a user puts theirs in (docs/operations.md, the API key).
    serving = where == "inventories/local/group_vars/gpu_hosts.yml" or any(
        where.startswith("molecule/%s/molecule.yml" % name) for name in ("experiments", "fleet", "patches", "monitoring"))
    assert _problems(variables, serving=serving) == [], where


@pytest.mark.parametrize("playbook", ["deploy", "preflight", "measure", "router", "monitoring"])
def test_every_playbook_opens_with_the_input_check_on_the_hosts_of_its_next_play(playbook):
    with open(os.path.join(ROOT, "playbooks", playbook + ".yml")) as handle:
        plays = yaml.safe_load(handle)
    first, second = plays[0], plays[1]
    assert first["tasks"] == [{"name": "Check every input of the run", "ansible.builtin.import_tasks": "tasks/inputs.yml"}]
    assert first["tags"] == ["always"] and first["gather_facts"] is False
    assert set(first["hosts"].split(":")) >= set(second["hosts"].split(":"))
    with open(os.path.join(ROOT, "playbooks", "tasks", "inputs.yml")) as handle:
        (task,) = yaml.safe_load(handle)
    # One task for the run, on the controller: an assert reaches no host.
    assert task["run_once"] is True and "ansible.builtin.assert" in task
    assert "sm120.sglang.input_problems" in task["vars"]["__sm120_input_problems"]


def test_the_deploy_as_documented_refuses_every_mistake_in_its_first_task_before_the_lock(tmp_path):
    # The README's deploy against the local default (container hosts, which this never reaches: the check is an assert
    # on the controller), in check and diff mode, with the mistakes of issue 52 in one run.
    import json
    import subprocess
    import sys
    import time

    mistakes = {"sglang_service_tp_size": 16, "sglang_install_verison": "0.5.23", "sglang_servce_port": 30001,
                "sglang_service_tuning": ["nccl_min_nchannel_8"],
                "sm120_patches_enabled": {"flashinfer_allreduce_fuson": True},
                "smoke_test_min_output_tok_s": "fast"}
    (tmp_path / "mistakes.json").write_text(json.dumps(mistakes))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1")
    started = time.monotonic()
    done = subprocess.run([sys.executable, os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                           "-i", "inventories/local", "playbooks/deploy.yml", "--check", "--diff",
                           "-e", "@%s" % (tmp_path / "mistakes.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    took = time.monotonic() - started
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    for piece in ("sglang_service_tp_size is 16", "did you mean sglang_install_version?",
                  "sglang_servce_port is set, and no role reads it: did you mean sglang_service_port?",
                  "did you mean nccl_min_nchannels_8?", "did you mean flashinfer_allreduce_fusion?",
                  "smoke_test_min_output_tok_s: argument"):
        assert piece in out, (piece, out)
    # The first task failed and no other ran: no lock taken, no host reached, nothing changed.
    assert "PLAY [Take the deploy lock" not in out and out.count("TASK [") == 1, out
    assert "changed=0" in out and "unreachable=0" in out
    assert took < 60, took


def test_a_glm5_override_to_bf16_kv_with_the_attention_left_to_sglang_is_refused_first_naming_the_fix():
    """Issue 48: the profile's attention backend taken out (extra args) leaves bf16 KV on DSA's SM90/SM100 backends."""
    [found] = _problems({"sglang_service_extra_args": {"--attention-backend": False}, "sglang_install_version": "0.5.23"})
    assert "SGLang 0.5.23" in found and "flashmla_sparse does not run on SM120" in found
    assert "set --attention-backend triton or flashinfer" in found
    assert _problems({"sglang_service_extra_args": {"--attention-backend": False},
                      "preflight_compute_capability": "9.0"}) == []
    assert _problems({"sglang_service_tuning": ["dsa_flashinfer_sparse_mla"], "sglang_install_version": "0.5.23"}) == []

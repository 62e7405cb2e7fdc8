# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sm120_patches role's decisions: the plan for a host, the undo edits, the restored files and the ledger."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import gate_plan, sglang_releases
from ansible_collections.sm120.sglang.plugins.plugin_utils.sglang_releases import ReleaseDataError

DATA = sglang_releases.load()
NEWEST = {"flashinfer-python": "0.7.2"}


def test_by_default_only_the_moe_runner_gate_is_on_and_every_source_gate_is_planned_absent():
    plan = gate_plan.plan(DATA, "0.5.9", installed={"flashinfer-python": "0.6.3"}, tp_size=8)
    assert plan["enabled"] == ["moe_runner_sm120"]
    assert plan["live"] == ["moe_runner_sm120"]
    assert plan["options"] == {"gates": ["moe_runner_sm120"], "env": {}, "flags": {"--moe-runner-backend": "flashinfer_cutlass"}}
    assert plan["refused"] == [] and plan["native"] == []
    assert {edit["state"] for entry in plan["files"] for edit in entry["edits"]} == {"absent"}
    assert [entry["gates"] for entry in plan["files"]] == [[], []]


def test_an_upstream_gate_is_reported_native_and_touches_nothing():
    plan = gate_plan.plan(DATA, "0.5.23", installed=NEWEST, tp_size=8)
    assert plan["native"] == [{"gate": "moe_runner_sm120", "since": "0.5.13",
                               "means": ["SGLang sets moe_runner_backend to flashinfer_cutlass for modelopt_fp4 on SM120"]}]
    assert "moe_runner_sm120" not in plan["live"] and plan["options"]["flags"] == {}


def test_an_enabled_source_gate_plans_its_edits_present_namespaced_and_its_flag_for_the_service():
    plan = gate_plan.plan(DATA, "0.5.23", {"flashinfer_allreduce_fusion": True}, NEWEST, 8)
    assert plan["live"] == ["flashinfer_allreduce_fusion"]
    assert [entry["path"] for entry in plan["files"]] == ["sglang/srt/layers/flashinfer_comm_fusion.py",
                                                          "sglang/srt/layers/layer_boundary/residual/add_norm.py"]
    assert [edit["id"] for edit in plan["files"][1]["edits"]] == [
        "flashinfer_allreduce_fusion.cache_is_sm120_supported", "flashinfer_allreduce_fusion.widen_fusion_condition"]
    assert all(edit["state"] == "present" for entry in plan["files"] for edit in entry["edits"])
    assert plan["options"]["flags"] == {"--flashinfer-allreduce-fusion-backend": "auto"}


def test_an_option_gate_plans_its_environment_and_no_file():
    plan = gate_plan.plan(DATA, "0.5.22", {"pcie_ipc_allreduce": True}, {"flashinfer-python": "0.7.1"}, 8)
    assert plan["live"] == ["pcie_ipc_allreduce"]
    assert plan["options"]["env"] == {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}
    # The fusion gate's files stay planned, each edit absent (data/sglang_releases.yml, 0.5.22), written out here.
    assert plan["files"] == [
        {"path": "sglang/srt/layers/flashinfer_comm_fusion.py", "gates": [], "edits": [
            {"id": "flashinfer_allreduce_fusion.widen_backend_check",
             "old": "    if not (get_platform().is_sm90 or get_platform().is_sm100):\n",
             "new": "    if not (get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120):\n",
             "state": "absent"}]},
        {"path": "sglang/srt/layers/layer_boundary/residual/add_norm.py", "gates": [], "edits": [
            {"id": "flashinfer_allreduce_fusion.cache_is_sm120_supported",
             "old": "_is_sm100_supported = _is_cuda and get_platform().is_sm100\n",
             "new": "_is_sm100_supported = _is_cuda and get_platform().is_sm100\n"
                    "_is_sm120_supported = _is_cuda and get_platform().is_sm120\n",
             "state": "absent"},
            {"id": "flashinfer_allreduce_fusion.widen_fusion_condition",
             "old": "        (_is_sm90_supported or _is_sm100_supported)\n        and _is_flashinfer_available\n",
             "new": "        (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n"
                    "        and _is_flashinfer_available\n",
             "state": "absent"}]}]


def test_a_precondition_on_an_installed_package_refuses_with_what_is_installed_and_the_fix():
    plan = gate_plan.plan(DATA, "0.5.9", {"flashinfer_allreduce_fusion": True}, {"flashinfer-python": "0.6.3"}, 8)
    assert plan["refused"] == [
        "SGLang 0.5.9: gate 'flashinfer_allreduce_fusion' needs flashinfer-python 0.6.17 or newer (FlashInfer's TRT-LLM "
        "allreduce kernels are built for SM12x from 0.6.17 (flashinfer#3903)); flashinfer-python 0.6.3 is installed. "
        "Install an SGLang release whose set pins it (sglang_install_version), or turn the gate off with "
        "sm120_patches_enabled: {flashinfer_allreduce_fusion: false}."]
    assert "flashinfer_allreduce_fusion" not in plan["live"]
    missing = gate_plan.plan(DATA, "0.5.23", {"pcie_ipc_allreduce": True}, {}, 8)
    assert "flashinfer-python is not installed" in missing["refused"][0]


@pytest.mark.parametrize("tp_size", [1, 6, None])
def test_a_tensor_parallel_size_the_gate_cannot_serve_is_refused(tp_size):
    plan = gate_plan.plan(DATA, "0.5.23", {"pcie_ipc_allreduce": True}, NEWEST, tp_size)
    assert len(plan["refused"]) == 1
    assert "needs a tensor-parallel size of 2 or 4 or 8" in plan["refused"][0]
    assert "the server runs TP %s" % tp_size in plan["refused"][0]


def test_an_unsupported_gate_and_an_unknown_gate_are_refused_together_naming_the_fix():
    plan = gate_plan.plan(DATA, "0.5.23", {"custom_allreduce_pcie": True, "fusion": True}, NEWEST, 8)
    assert plan["refused"][0].startswith("unknown gate(s) fusion in sm120_patches_enabled; the release data has:")
    assert "gate 'custom_allreduce_pcie' does not support SGLang 0.5.23: from 0.5.22 SGLang ships its own" in plan["refused"][1]
    assert "pcie_ipc_allreduce" in plan["refused"][1] and "{custom_allreduce_pcie: false}" in plan["refused"][1]


def test_a_release_the_data_does_not_describe_is_refused():
    with pytest.raises(ReleaseDataError, match="SGLang 0.5.7 is installed, and the release data does not describe it"):
        gate_plan.plan(DATA, "0.5.7")


def test_the_host_reports_every_gate_file_and_every_pinned_or_precondition_package():
    inputs = gate_plan.release_inputs(DATA)
    assert "sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py" in inputs["paths"]
    assert "sglang/srt/layers/layer_boundary/residual/add_norm.py" in inputs["paths"]
    assert inputs["packages"] == ["flashinfer-cubin", "flashinfer-python", "sgl-kernel", "sglang", "sglang-kernel", "torch"]


def _result(path, edits, changed=True, applied=(), reverted=(), before="b", after="a", gates=("g",), record="r"):
    return {"changed": changed, "applied": list(applied), "reverted": list(reverted), "sha256_before": before,
            "sha256_after": after, "item": {"path": "rel/" + path, "gates": list(gates), "edits": edits},
            "invocation": {"module_args": {"path": "/site/" + path, "original_sha256": record}}}


EDITS = [{"id": "g.one", "old": "a", "new": "b", "state": "present"}, {"id": "g.two", "old": "c", "new": "d", "state": "absent"}]


def test_the_undo_edits_reverse_exactly_what_the_run_changed():
    results = [_result("x.py", EDITS, applied=["g.one"], reverted=["g.two"]), _result("y.py", EDITS, changed=False),
               {"changed": True, "msg": "failed before the module ran"}]
    assert gate_plan.undo_edits(results) == [{"path": "/site/x.py", "edits": [dict(EDITS[0], state="absent"),
                                                                              dict(EDITS[1], state="present")]}]


def test_a_file_found_back_at_its_shipped_bytes_is_reported_restored():
    previous = {"files": [{"path": "/site/x.py", "sha256": "patched"}, {"path": "/site/y.py", "sha256": "patched"}]}
    results = [_result("x.py", EDITS, before="r", record="r"), _result("y.py", EDITS, before="patched", record="r")]
    assert gate_plan.restored_files(previous, results) == ["/site/x.py"]


def test_the_ledger_records_files_edits_and_options_and_keeps_patched_at_while_the_bytes_stay():
    planned = gate_plan.plan(DATA, "0.5.23", {"flashinfer_allreduce_fusion": True}, NEWEST, 8)
    facts = {"location": "/site"}
    results = [_result("f.py", EDITS, after="s1"), _result("u.py", EDITS, gates=())]
    first = gate_plan.ledger({}, planned, results, facts, "/opt/sglang/bin/python", "T1")
    assert first["gates"] == ["flashinfer_allreduce_fusion"] and first["package_dir"] == "/site"
    assert first["options"]["flags"] == {"--flashinfer-allreduce-fusion-backend": "auto"}
    assert [entry["path"] for entry in first["files"]] == ["/site/f.py"]
    assert first["files"][0]["edits"] == [EDITS[0]] and first["files"][0]["record_sha256"] == "r"
    again = gate_plan.ledger(first, planned, [_result("f.py", EDITS, changed=False, after="s1")], facts, "p", "T2")
    assert again["files"][0]["patched_at"] == "T1"
    moved = gate_plan.ledger(first, planned, [_result("f.py", EDITS, after="s2")], facts, "p", "T3")
    assert moved["files"][0]["patched_at"] == "T3"


def test_the_ledger_is_empty_when_no_gate_is_live():
    planned = gate_plan.plan(DATA, "0.5.23", {}, NEWEST, 8)
    assert gate_plan.ledger({"gates": ["x"]}, planned, [], {"location": "/site"}, "p", "T") == {}


LEDGER = {"gates": ["pcie_ipc_allreduce", "moe_runner_sm120"],
          "options": {"gates": ["moe_runner_sm120"], "env": {}, "flags": {"--moe-runner-backend": "flashinfer_cutlass"}}}


def test_the_gates_this_run_s_patch_phase_published_are_live_whatever_the_ledger_says():
    options = {"gates": [], "env": {}, "flags": {}}
    assert gate_plan.live(LEDGER, [], options) == {"gates": [], "options": options}
    assert gate_plan.live({}, ["moe_runner_sm120"], None) == {"gates": ["moe_runner_sm120"], "options": {}}


def test_without_the_patch_phase_the_ledger_says_which_gates_are_live_in_its_order():
    assert gate_plan.live(LEDGER) == {"gates": ["pcie_ipc_allreduce", "moe_runner_sm120"], "options": LEDGER["options"]}
    assert gate_plan.live(LEDGER, None, {"gates": ["x"]}) == gate_plan.live(LEDGER), "options come with their gates"


@pytest.mark.parametrize("ledger", [{}, None, {"sglang_version": "0.5.9"}])
def test_no_ledger_and_no_patch_phase_is_no_gate_live(ledger):
    assert gate_plan.live(ledger) == {"gates": [], "options": {}}


@pytest.mark.parametrize("ledger, gates, options, message", [
    (["moe_runner_sm120"], None, None, "the patch ledger is a JSON object"),
    ({"gates": "moe_runner_sm120"}, None, None, "the patch ledger's gates is a list of gate ids"),
    ({}, "moe_runner_sm120", None, "sm120_patches_live is a list of gate ids"),
    ({}, [], ["--moe-runner-backend"], "the options of the live gates are"),
])
def test_a_ledger_or_a_fact_of_the_wrong_shape_is_refused_naming_it(ledger, gates, options, message):
    with pytest.raises(ReleaseDataError, match=message):
        gate_plan.live(ledger, gates, options)


def test_a_gate_is_asked_on_by_its_default_unless_the_inventory_says_otherwise():
    asked = gate_plan.enabled_map(DATA, {"flashinfer_allreduce_fusion": True})
    assert asked == {gate_id: gate_id in ("moe_runner_sm120", "flashinfer_allreduce_fusion") for gate_id in DATA["gates"]}
    assert gate_plan.enabled_map(DATA, {"moe_runner_sm120": False})["moe_runner_sm120"] is False


def test_a_gate_turned_off_is_off_whatever_the_inventory_or_its_default_says():
    asked = gate_plan.enabled_map(DATA, {"flashinfer_allreduce_fusion": True}, ["flashinfer_allreduce_fusion", "moe_runner_sm120"])
    assert asked["flashinfer_allreduce_fusion"] is False and asked["moe_runner_sm120"] is False
    assert "gone_gate" not in gate_plan.enabled_map(DATA, {}, ["gone_gate"]), "a rejection of a gate the data dropped"


def test_the_plan_plans_off_what_is_turned_off_and_refuses_an_unknown_gate_asked_for():
    plan = gate_plan.plan(DATA, "0.5.9", {"custom_allreduce_pcie": True}, {"flashinfer-python": "0.6.3"}, 8,
                          turned_off=["moe_runner_sm120"])
    assert plan["live"] == ["custom_allreduce_pcie"] and "moe_runner_sm120" in plan["disabled"]
    assert gate_plan.plan(DATA, "0.5.9", {}, {"flashinfer-python": "0.6.3"}, 8, turned_off=["gone_gate"])["refused"] == []
    refused = gate_plan.plan(DATA, "0.5.9", {"gone_gate": False}, {"flashinfer-python": "0.6.3"}, 8)["refused"]
    assert refused and "unknown gate(s) gone_gate" in refused[0]


@pytest.mark.parametrize("asked, message", [
    ({"flashinfer_allreduce_fusion": "false"}, "sm120_patches_enabled: flashinfer_allreduce_fusion must be true or false"),
    (["flashinfer_allreduce_fusion"], "maps gate ids to true or false"),
])
def test_a_choice_that_is_not_a_boolean_is_refused_naming_the_gate(asked, message):
    with pytest.raises(ReleaseDataError, match=message):
        gate_plan.enabled_map(DATA, asked)

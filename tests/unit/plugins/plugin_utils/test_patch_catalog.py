# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.plugin_utils.patch_catalog import (
    CatalogError,
    catalog_paths,
    check_catalog,
    patch_plan,
)

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "sm120_patches")


def load_catalog():
    with open(os.path.join(ROLE, "vars", "catalog.yml")) as handle:
        return yaml.safe_load(handle)["__sm120_patches_catalog"]


CATALOG = load_catalog()


def test_the_catalog_reads_and_names_its_files():
    assert set(check_catalog(CATALOG)) == {"flashinfer_allreduce_fusion", "custom_allreduce_pcie"}
    assert catalog_paths(CATALOG) == [
        "sglang/srt/distributed/device_communicators/custom_all_reduce.py",
        "sglang/srt/layers/communicator.py",
        "sglang/srt/server_args.py",
    ]


def test_fusion_risk_note_carries_the_measured_regression():
    gate = check_catalog(CATALOG)["flashinfer_allreduce_fusion"]
    assert "3,740" in gate["risk"] and "236 tok/s" in gate["risk"]
    assert gate["default_enabled"] is False


def test_default_plan_reverts_every_gate_on_a_supported_release():
    plan = patch_plan(CATALOG, "0.5.9")
    assert plan["enabled"] == [] and sorted(plan["disabled"]) == sorted(check_catalog(CATALOG))
    edits = [edit for entry in plan["files"] for edit in entry["edits"]]
    assert len(edits) == 5 and {edit["state"] for edit in edits} == {"absent"}


def test_enabled_gate_plans_its_edits_present_and_namespaced():
    plan = patch_plan(CATALOG, "0.5.8.post1", {"flashinfer_allreduce_fusion": True})
    by_path = {entry["path"]: entry for entry in plan["files"]}
    communicator = by_path["sglang/srt/layers/communicator.py"]
    assert communicator["gates"] == ["flashinfer_allreduce_fusion"]
    assert [edit["id"] for edit in communicator["edits"]] == [
        "flashinfer_allreduce_fusion.import_is_sm120_supported",
        "flashinfer_allreduce_fusion.cache_is_sm120_supported",
        "flashinfer_allreduce_fusion.widen_fusion_condition",
    ]
    assert {edit["state"] for edit in communicator["edits"]} == {"present"}
    custom = by_path["sglang/srt/distributed/device_communicators/custom_all_reduce.py"]
    assert custom["gates"] == [] and custom["edits"][0]["state"] == "absent"


@pytest.mark.parametrize("version", ["0.5.10", "0.5.23", "0.5.7"])
def test_enabled_gate_on_an_unsupported_release_names_release_gate_and_fix(version):
    plan = patch_plan(CATALOG, version, {"custom_allreduce_pcie": True})
    assert plan["files"] == [] and len(plan["refused"]) == 1
    message = plan["refused"][0]
    assert "gate 'custom_allreduce_pcie' does not support SGLang %s" % version in message
    assert "supported: >=0.5.8,<0.5.10" in message
    assert "sm120_patches_enabled: {custom_allreduce_pcie: false}" in message


def test_every_release_up_to_the_newest_is_covered_per_gate():
    # Newest release on PyPI when this catalog was written: 0.5.23.
    for version in ["0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.10.post1", "0.5.15.post1", "0.5.23", "0.6.0"]:
        plan = patch_plan(CATALOG, version)
        assert plan["sglang_version"] == version and plan["refused"] == []


def test_unsupported_release_with_every_gate_off_plans_nothing():
    assert patch_plan(CATALOG, "0.5.23")["files"] == []


def test_unknown_gate_and_bad_version_are_refused():
    refused = patch_plan(CATALOG, "0.5.9", {"fusion_typo": True})["refused"]
    assert refused == ["unknown gate(s) fusion_typo in sm120_patches_enabled; the catalog has: "
                       "custom_allreduce_pcie, flashinfer_allreduce_fusion."]
    with pytest.raises(CatalogError, match="'latest' is not a SGLang release number"):
        patch_plan(CATALOG, "latest")


def broken(mutate):
    catalog = copy.deepcopy(CATALOG)
    mutate(catalog["gates"][0])
    return catalog


@pytest.mark.parametrize("catalog, message", [
    ({"gates": []}, "holds no gates"),
    (broken(lambda gate: gate.pop("risk")), "has no risk"),
    (broken(lambda gate: gate["releases"][0].update(versions="~~")), "no valid versions specifier"),
    (broken(lambda gate: gate["releases"][0].update(unsupported="why")), "either files or unsupported"),
    (broken(lambda gate: gate["releases"][0]["files"][0]["edits"].append(
        dict(gate["releases"][0]["files"][0]["edits"][0]))), "unique ids"),
])
def test_broken_catalogs_are_refused(catalog, message):
    with pytest.raises(CatalogError, match=message):
        patch_plan(catalog, "0.5.9")


def test_overlapping_release_entries_are_refused():
    catalog = broken(lambda gate: gate["releases"].append(dict(gate["releases"][0], versions=">=0.5.9")))
    with pytest.raises(CatalogError, match="2 entries for SGLang 0.5.9"):
        patch_plan(catalog, "0.5.9")

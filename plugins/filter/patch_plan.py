# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: patch_plan
short_description: Choose the SM120 gate patches for one SGLang release
version_added: "0.1.0"
description:
  - Reads the patch catalog of the M(sm120.sglang.source_patch) role C(sm120_patches) and returns, per file, the edits
    to apply (enabled gates) and to revert (disabled gates) for the given SGLang release.
  - An enabled gate that has no edits for that release, and an unknown gate id, are listed in C(refused), each with a
    message naming the release, the gate and the fix.
positional: version, enabled
options:
  _input:
    description: The catalog, a dict with a list C(gates).
    type: dict
    required: true
  version:
    description: The installed SGLang release, for example V(0.5.9).
    type: str
    required: true
  enabled:
    description: Gate ids mapped to V(true) or V(false), over each gate's C(default_enabled).
    type: dict
    default: {}
"""

EXAMPLES = r"""
plan: "{{ catalog | sm120.sglang.patch_plan('0.5.9', {'flashinfer_allreduce_fusion': true}) }}"
"""

RETURN = r"""
_value:
  description: >-
    C(sglang_version), C(enabled) and C(disabled) gate ids, C(refused) messages, and C(files), each with C(path),
    C(gates) and C(edits).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.plugin_utils.patch_catalog import (
    CatalogError,
    catalog_paths,
    patch_plan,
)


def _patch_plan(catalog, version, enabled=None):
    try:
        return patch_plan(catalog, version, enabled)
    except CatalogError as exc:
        raise AnsibleFilterError(str(exc))


def _patch_catalog_paths(catalog):
    try:
        return catalog_paths(catalog)
    except CatalogError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {"patch_plan": _patch_plan, "patch_catalog_paths": _patch_catalog_paths}

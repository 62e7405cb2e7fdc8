# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in patch_plan.yml and patch_catalog_paths.yml beside this file.

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

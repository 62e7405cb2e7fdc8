# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_install version matrix, as data and against the real SGLang wheels.

Every set must pin the five packages exactly, and pin them as the release's own
wheel does (Requires-Dist in its METADATA): otherwise pip's resolver and the set
disagree and the install cannot be both complete and `pip check` clean. Whether
a set serves GLM-5 is read from the wheel's model files. The wheels come from
PyPI (`pip download --no-deps`, about 5 MB each) into .cache/wheels, once.
"""

from __future__ import annotations

import os
import re

import pytest
import yaml

from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import sglang_wheel

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "sglang_install")
PACKAGES = ["sglang", "flashinfer-python", "flashinfer-cubin", "sgl-kernel", "torch"]
# The catalog of sm120_patches covers these releases: a set outside it could not be patched.
PATCH_CATALOG_RELEASES = {"0.5.8", "0.5.8.post1", "0.5.9"}
EXACT = re.compile(r"^\d+(\.\d+)+(\.post\d+)?$")


def _load(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


MATRIX = _load("vars", "matrix.yml")["__sglang_install_matrix"]
DEFAULTS = _load("defaults", "main.yml")


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


wheel = sglang_wheel


def wheel_pins(archive):
    """Unconditional exact pins of the wheel's Requires-Dist: canonical name -> version."""
    metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
    pins = {}
    for line in archive.read(metadata).decode().splitlines():
        found = re.match(r"Requires-Dist: ([A-Za-z0-9_.-]+)==([^;\s]+)\s*$", line)
        if found:
            pins[canonical(found.group(1))] = found.group(2)
    return pins


def serves_glm5(archive):
    return any(name.startswith("sglang/srt/models/") and name.endswith(".py")
               and b"class GlmMoeDsaForCausalLM(" in archive.read(name)
               for name in archive.namelist())


# ---- the data --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", sorted(MATRIX))
def test_every_set_names_all_five_packages_and_nothing_else(key):
    assert list(MATRIX[key]["packages"]) == PACKAGES


@pytest.mark.parametrize("key", sorted(MATRIX))
def test_every_pin_is_an_exact_version(key):
    for name, version in MATRIX[key]["packages"].items():
        assert isinstance(version, str) and EXACT.match(version), (key, name, version)
    assert isinstance(MATRIX[key]["torch_cuda"], str) and re.match(r"^\d+\.\d+$", MATRIX[key]["torch_cuda"])
    assert isinstance(MATRIX[key]["glm5"], bool)


@pytest.mark.parametrize("key", sorted(MATRIX))
def test_every_set_is_keyed_by_its_sglang_release(key):
    assert MATRIX[key]["packages"]["sglang"] == key


@pytest.mark.parametrize("key", sorted(MATRIX))
def test_every_set_is_a_release_the_patch_catalog_covers(key):
    assert key in PATCH_CATALOG_RELEASES


@pytest.mark.parametrize("key", sorted(MATRIX))
def test_every_torch_is_built_for_a_cuda_with_sm120_kernels(key):
    major, minor = (int(part) for part in MATRIX[key]["torch_cuda"].split("."))
    assert (major, minor) >= (12, 8)


def test_the_default_set_exists_and_serves_glm5():
    assert DEFAULTS["sglang_install_version"] in MATRIX
    assert MATRIX[DEFAULTS["sglang_install_version"]]["glm5"] is True


def test_the_default_is_the_first_release_that_serves_glm5():
    def key(version):
        return tuple(int(part) for part in re.findall(r"\d+", version))

    first = min((version for version, entry in MATRIX.items() if entry["glm5"]), key=key)
    assert DEFAULTS["sglang_install_version"] == first == "0.5.9"


def test_the_argument_spec_offers_exactly_the_matrix():
    spec = _load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]["sglang_install_version"]
    assert sorted(spec["choices"]) == sorted(MATRIX)
    assert spec["default"] == DEFAULTS["sglang_install_version"]


# ---- against the wheels ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", sorted(MATRIX))
def test_every_pin_is_the_wheels_own_pin(key):
    pins = wheel_pins(wheel(key))
    for name, version in MATRIX[key]["packages"].items():
        if name != "sglang":
            assert pins.get(canonical(name)) == version, (key, name, pins.get(canonical(name)))


@pytest.mark.parametrize("key", sorted(MATRIX))
def test_glm5_is_marked_where_the_wheel_has_its_architecture(key):
    assert serves_glm5(wheel(key)) is MATRIX[key]["glm5"]


def test_the_next_release_renames_the_kernel_package():
    # Why the matrix stops at 0.5.9: 0.5.10 pins sglang-kernel, not sgl-kernel,
    # and the sm120_patches catalog has no entries for it.
    pins = wheel_pins(wheel("0.5.10"))
    assert "sgl-kernel" not in pins and "sglang-kernel" in pins

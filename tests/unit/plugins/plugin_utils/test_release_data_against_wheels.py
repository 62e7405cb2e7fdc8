# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every release of data/sglang_releases.yml read back from its real wheel.

The install set must pin what the release's own wheel pins (Requires-Dist, extras
included), or pip's resolver and the set disagree and an install cannot be both
complete and `pip check` clean. GLM-5 support, Requires-Python and the build date
are read from the wheel too. The wheels come from PyPI (`pip download --no-deps`,
4 to 40 MB each) into .cache/wheels, once.
"""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases
from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import metadata_lines, sglang_wheel, wheel_pins

DATA = sglang_releases.load()
RELEASES = sglang_releases.versions(DATA)


def serves_glm5(archive):
    source = archive.read("sglang/srt/models/glm4_moe.py").decode()
    entry_class = source[source.index("EntryClass"):]
    return "class GlmMoeDsaForCausalLM(" in source and "GlmMoeDsaForCausalLM" in entry_class


def build_date(archive):
    newest = max(info.date_time for info in archive.infolist())
    return datetime.date(*newest[:3]).isoformat()


@pytest.mark.parametrize("version", RELEASES)
def test_the_install_set_pins_exactly_what_the_wheel_requires(version):
    archive = sglang_wheel(version)
    pins = wheel_pins(archive)
    wanted = sglang_releases.install_set(DATA, version)
    for package in wanted["packages"]:
        if package["name"] == "sglang":
            continue
        assert pins[package["name"]] == (package["version"], package["extras"]), package["name"]
    # Every pin of the packages that decide SM120 support is in the set, none forgotten.
    deciding = {name for name in pins if name.startswith(("flashinfer", "sgl-kernel", "sglang-kernel")) or name == "torch"}
    assert deciding == set(wanted["versions"]) - {"sglang"}


@pytest.mark.parametrize("version", RELEASES)
def test_glm5_support_requires_python_and_date_are_the_wheel_s(version):
    archive = sglang_wheel(version)
    release = DATA["releases"][version]
    assert release["glm5"] is serves_glm5(archive)
    assert metadata_lines(archive, "Requires-Python") == [release["requires_python"]]
    assert build_date(archive) == release["date"]


def test_the_kernel_rename_and_the_cu13_extra_land_where_the_wheels_say():
    kernels = {version: [name for name in sglang_releases.install_set(DATA, version)["versions"] if "kernel" in name]
               for version in RELEASES}
    assert kernels["0.5.9"] == ["sgl-kernel"] and kernels["0.5.10"] == ["sglang-kernel"]
    extras = {version: next(package["extras"] for package in sglang_releases.install_set(DATA, version)["packages"]
                            if package["name"] == "flashinfer-python") for version in RELEASES}
    assert extras["0.5.12.post1"] == [] and extras["0.5.13"] == ["cu13"] and extras["0.5.23"] == ["cu13"]

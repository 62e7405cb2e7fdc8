# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The release data's questions and its refusal of data the roles could not rely on."""

from __future__ import annotations

import copy
import os
import pathlib
import re

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases
from ansible_collections.sm120.sglang.plugins.plugin_utils.sglang_releases import ReleaseDataError

DATA = sglang_releases.load()


def test_the_data_describes_every_release_from_0_5_8_to_0_5_23_in_order():
    releases = sglang_releases.versions(DATA)
    assert releases[0] == "0.5.8" and releases[-1] == "0.5.23" and len(releases) == 21
    assert releases.index("0.5.10.post1") < releases.index("0.5.11") < releases.index("0.5.12.post1")


def test_the_default_is_the_newest_release_that_serves_glm5():
    assert sglang_releases.default_version(DATA) == "0.5.23"
    assert sglang_releases.resolve_version(DATA, "newest") == "0.5.23"
    data = copy.deepcopy(DATA)
    data["releases"]["0.5.23"]["glm5"] = False
    assert sglang_releases.default_version(data) == "0.5.22"


def test_an_install_set_has_its_pins_cuda_build_and_driver_branch():
    wanted = sglang_releases.install_set(DATA, "0.5.9")
    assert wanted["requirements"] == ["sglang==0.5.9", "flashinfer-python==0.6.3", "flashinfer-cubin==0.6.3",
                                      "sgl-kernel==0.3.21", "torch==2.9.1"]
    assert (wanted["torch_cuda"], wanted["min_driver_branch"]) == ("12.8", 570)
    newest = sglang_releases.install_set(DATA, "newest")
    assert "flashinfer-python[cu13]==0.7.2" in newest["requirements"]
    assert (newest["torch_cuda"], newest["min_driver_branch"], newest["requires_python"]) == ("13.0", 580, ">=3.11")


def test_an_unknown_release_is_refused_naming_the_known_ones_and_the_way_to_add_it():
    with pytest.raises(ReleaseDataError, match=r"SGLang 0\.5\.99 is not in the release data \(releases: 0\.5\.8, .*0\.5\.23\)"):
        sglang_releases.install_set(DATA, "0.5.99")
    with pytest.raises(ReleaseDataError, match="upstream-watch.py"):
        sglang_releases.resolve_version(DATA, "0.4.0")


def test_a_driver_branch_too_old_for_the_cuda_build_is_named_with_both():
    assert sglang_releases.driver_problem(DATA, "0.5.9", 570) is None
    assert sglang_releases.driver_problem(DATA, "0.5.23", 580) is None
    problem = sglang_releases.driver_problem(DATA, "0.5.23", 575)
    assert "CUDA 13.0, which needs NVIDIA driver branch 580 or newer; the driver branch is 575" in problem


def test_the_oldest_branch_for_sm120_is_that_of_the_first_cuda_build_for_it_whatever_the_release():
    assert sglang_releases.sm120_min_driver_branch(DATA) == 570
    assert {sglang_releases.install_set(DATA, version)["sm120_min_driver_branch"]
            for version in sglang_releases.versions(DATA)} == {570}
    assert sglang_releases.sm120_min_driver_branch(dict(DATA, sm120_min_cuda="13.0")) == 580


def test_no_role_or_plugin_spells_the_oldest_branch_for_sm120_itself():
    """The release data owns it; a role or plugin that writes the number again is a second owner that drifts."""
    minimum = sglang_releases.sm120_min_driver_branch(DATA)
    root = pathlib.Path(sglang_releases.__file__).resolve().parents[2]
    spelled = re.compile(r"(?<![\w.])%d(?![\w.])" % minimum)
    paths = sorted(root.glob("roles/**/*.yml")) + sorted(root.glob("roles/**/*.j2")) + sorted(root.glob("plugins/**/*.py"))
    found = ["%s:%d" % (path.relative_to(root), number) for path in paths
             for number, line in enumerate(path.read_text().splitlines(), 1) if spelled.search(line)]
    assert found == []


def _broken(change):
    data = copy.deepcopy(DATA)
    change(data)
    return data


@pytest.mark.parametrize("change,message", [
    (lambda d: d["releases"]["0.5.9"].pop("torch_cuda"), "release 0.5.9 has no torch_cuda"),
    (lambda d: d["releases"]["0.5.9"].update(torch_cuda="12.1"), "torch_cuda 12.1 has no entry"),
    (lambda d: d["releases"]["0.5.9"]["packages"].append("torch>=2"), "must be an exact pin"),
    (lambda d: d["releases"]["0.5.9"]["packages"].__setitem__(0, "sglang==0.5.8"), "must pin sglang==0.5.9"),
    (lambda d: d["releases"].update({"0.5.24": dict(d["releases"]["0.5.23"], packages=["sglang==0.5.24", "torch==2.14.1"])})
     and None, None),
    (lambda d: d["gates"]["pcie_ipc_allreduce"]["entries"].pop(), "has 0 entries for SGLang 0.5.22"),
    (lambda d: d["gates"]["pcie_ipc_allreduce"]["entries"].append({"versions": ">=0.5.23", "kind": "unsupported",
                                                                  "reason": "x"}), "has 2 entries for SGLang 0.5.23"),
    (lambda d: d["gates"]["moe_runner_sm120"].pop("risk"), "gate moe_runner_sm120 has no risk"),
    (lambda d: d["gates"]["moe_runner_sm120"]["entries"][0].update(kind="maybe"), "kind must be one of"),
    (lambda d: d["gates"]["moe_runner_sm120"]["entries"][0].pop("flags"), "an option entry needs env or flags"),
    (lambda d: d["gates"]["moe_runner_sm120"]["entries"][1].pop("since"), "an upstream entry needs since"),
    (lambda d: d["gates"]["pcie_ipc_allreduce"]["entries"][2]["preconditions"][0].pop("why"), "every precondition says why"),
    (lambda d: d["gates"]["pcie_ipc_allreduce"]["entries"][2]["decisions"][0].update(sm120="no"), "needs sm120: true or false"),
    (lambda d: d.update(sm120_min_cuda="12.6"), "sm120_min_cuda 12.6 has no entry in cuda_min_driver_branch"),
])
def test_release_data_the_roles_could_not_rely_on_is_refused_naming_the_entry(change, message):
    data = _broken(change)
    if message is None:  # a new release covered by the open-ended ranges is fine
        sglang_releases.check(data)
        assert sglang_releases.default_version(data) == "0.5.24"
        return
    with pytest.raises(ReleaseDataError, match=message.replace(".", r"\.").replace("(", r"\(")):
        sglang_releases.check(data)


def test_a_data_file_that_is_not_yaml_is_named(tmp_path):
    path = tmp_path / "releases.yml"
    path.write_text("releases: [\n")
    with pytest.raises(ReleaseDataError, match="is not valid YAML"):
        sglang_releases.load(str(path))
    with pytest.raises(ReleaseDataError, match="cannot read the SGLang release data"):
        sglang_releases.load(str(tmp_path / "missing.yml"))


def test_the_data_file_is_read_anew_when_it_changes(tmp_path):
    path = tmp_path / "releases.yml"
    path.write_text(yaml.safe_dump(DATA))
    assert sglang_releases.default_version(sglang_releases.load(str(path))) == "0.5.23"
    changed = copy.deepcopy(DATA)
    changed["releases"]["0.5.23"]["glm5"] = False
    path.write_text(yaml.safe_dump(changed))
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert sglang_releases.default_version(sglang_releases.load(str(path))) == "0.5.22"

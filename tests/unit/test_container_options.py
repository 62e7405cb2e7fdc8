# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container hosts' options live in molecule/resources/container.yml: the local default and the benchmarks read
it through container_options.py, and every molecule scenario's platforms carry exactly its keys (molecule.yml cannot
include a file, so this test is what keeps the scenarios to it)."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("container_options", ROOT / "molecule" / "resources" /
                                              "container_options.py")
container_options = importlib.util.module_from_spec(spec)
spec.loader.exec_module(container_options)
OPTIONS = container_options.load()
SCENARIOS = sorted(path for path in (ROOT / "molecule").glob("*/molecule.yml")
                   if yaml.safe_load(path.read_text()).get("platforms"))


def test_the_options_become_docker_runs_arguments_with_the_image_and_systemd():
    argv = container_options.docker_run("img", OPTIONS)
    assert argv[-2:] == ["img", "/lib/systemd/systemd"]
    pairs = list(zip(argv[:-2:2], argv[1:-2:2]))
    assert ("--cap-add", "SYS_ADMIN") in pairs and ("--tmpfs", "/run") in pairs and ("--tmpfs", "/run/lock") in pairs
    assert ("-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro") in pairs and ("--security-opt", "seccomp=unconfined") in pairs
    assert len(pairs) == sum(len(OPTIONS[key]) for key in container_options.FLAGS)


def test_an_option_docker_run_is_not_given_is_named(tmp_path):
    path = tmp_path / "container.yml"
    path.write_text("privileged: true\ntmpfs: [/run]\n")
    with pytest.raises(ValueError, match="holds privileged, which container_options.py cannot give to docker run"):
        container_options.load(str(path))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda path: path.parent.name)
def test_every_platform_of_every_scenario_runs_with_the_options(scenario):
    for platform in yaml.safe_load(scenario.read_text())["platforms"]:
        assert {key: platform.get(key) for key in OPTIONS} == OPTIONS, (
            "%s: platform %s differs from molecule/resources/container.yml" % (scenario, platform["name"]))


@pytest.mark.parametrize("user", ["scripts/deploy-local.sh", "benchmarks/source_patch/run.py",
                                  "benchmarks/deploy_noop_rerun.py"])
def test_the_local_default_and_the_benchmarks_read_the_file_and_spell_no_option(user):
    text = (ROOT / user).read_text()
    assert "container_options" in text
    assert not re.search(r"seccomp=unconfined|--cap-add|/sys/fs/cgroup|--tmpfs", text)

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every flag and value the service renders is accepted by each release's own argument parser.

For each release of data/sglang_releases.yml: the GLM-5-NVFP4 profile of
roles/sglang_service/vars/profiles.yml, with every gate the release can take turned
on (their flags), two-node flags, the --config file and the tuning flags the
experiments use, rendered by the role's own launch_flags (renamed flags written
that release's way), then checked against the release's parser read from its
real server_args.py (tooling/server_flags.py).
"""

from __future__ import annotations

import functools
import pathlib

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_data, gate_plan, launch_profile, sglang_releases
from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import sglang_wheel
from ansible_collections.sm120.sglang.tooling.server_flag_problems import flag_problems
from ansible_collections.sm120.sglang.tooling.server_flags import read_server_flags

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROFILES = yaml.safe_load((ROOT / "roles" / "sglang_service" / "vars" / "profiles.yml").read_text())
PROFILE = PROFILES["__sglang_service_builtin_profiles"]["glm-5-nvfp4"]
DATA = sglang_releases.load()
RELEASES = sglang_releases.versions(DATA)
# Every tuning option of data/experiments.yml: each release must take each of their flags. Alternatives set the
# same flag (the attention pairings, the graph bounds), which the service refuses together, so each option's flags
# are laid over the others' in name order (the last one's values stand for the others', numbers alike).
TUNING = {}
for _name in sorted(experiment_data.load()["options"]):
    TUNING.update(experiment_data.tuning_settings([_name], loads=PROFILE["loads"], searched=True)["flags"])
MULTINODE = {"--nnodes": 2, "--node-rank": 1, "--dist-init-addr": "10.1.230.174:25000"}


@functools.lru_cache(maxsize=None)
def parser_of(version):
    archive = sglang_wheel(version)
    names = set(archive.namelist())
    return read_server_flags(lambda path: archive.read(path).decode() if path in names else None)


def rendered(version):
    every_gate = {gate: True for gate in DATA["gates"]
                  if sglang_releases.gate_entry(DATA, gate, version)["kind"] in ("source", "option")}
    planned = gate_plan.plan(DATA, version, every_gate, {"flashinfer-python": "99"}, 8)
    assert planned["refused"] == []
    return launch_profile.launch_flags(
        PROFILE, {}, "0.0.0.0", 30000, "/var/lib/sglang/models/glm-5-nvfp4", MULTINODE, TUNING,
        planned["options"]["flags"], "/etc/sglang/glm-5-nvfp4.yaml", DATA["flag_renames"], version)


@pytest.mark.parametrize("version", RELEASES)
def test_the_release_s_own_parser_accepts_every_flag_and_value_the_service_renders(version):
    flags = rendered(version)
    assert flag_problems(parser_of(version), flags) == []
    assert flags["--quantization"] == "modelopt_fp4"


def test_renamed_flags_are_written_each_release_s_way():
    assert "--cuda-graph-max-bs" in rendered("0.5.13") and "--cuda-graph-max-bs-decode" not in rendered("0.5.13")
    assert rendered("0.5.23")["--cuda-graph-max-bs-decode"] == TUNING["--cuda-graph-max-bs"]
    assert "--cuda-graph-max-bs" not in rendered("0.5.23")
    assert "--cuda-graph-max-bs" not in parser_of("0.5.20")
    assert rendered("0.5.9")["--enable-flashinfer-allreduce-fusion"] is True
    assert rendered("0.5.14")["--flashinfer-allreduce-fusion-backend"] == "auto"


def test_a_flag_left_unrenamed_would_be_caught():
    flags = dict(rendered("0.5.23"), **{"--cuda-graph-max-bs": 256})
    assert [problem for problem in flag_problems(parser_of("0.5.23"), flags) if "--cuda-graph-max-bs" in problem]

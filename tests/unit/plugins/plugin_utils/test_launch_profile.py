# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""launch_profile: the server's argv as its parser and the unit's ExecStart= take it, and the service port's owner."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.plugin_utils import launch_profile, router


def test_the_service_argv_leaves_out_unset_flags_and_writes_the_rest_as_the_parser_reads_them():
    flags = {"--tp-size": 8, "--enable-metrics": True, "--disable-cuda-graph": False, "--context-length": None,
             "--cuda-graph-bs": [1, 2, 4], "--json-model-override-args": {"b": 1, "a": [2]}}
    assert launch_profile.argv_words(flags) == ["--tp-size", "8", "--enable-metrics", "--cuda-graph-bs", "1", "2",
                                                "4", "--json-model-override-args", '{"a": [2], "b": 1}']


def test_the_service_port_has_one_owner_and_the_role_default_is_it():
    defaults = pathlib.Path(__file__).resolve().parents[4] / "roles" / "sglang_service" / "defaults" / "main.yml"
    assert yaml.safe_load(defaults.read_text())["sglang_service_port"] == launch_profile.SERVICE_PORT == 30000
    assert router.SERVICE_PORT is launch_profile.SERVICE_PORT


def test_the_tuning_options_recorded_read_back_as_written():
    written = launch_profile.record({"sglang": "0.5.23"}, [], ["nccl_min_nchannels_8", "max_running_requests_64"])
    assert launch_profile.recorded_tuning(written) == ["max_running_requests_64", "nccl_min_nchannels_8"]
    # No tuning option, and no environment file yet (sglang_facts reads a missing one as {}).
    assert launch_profile.recorded_tuning(launch_profile.record({"sglang": "0.5.23"}, [])) == []
    assert launch_profile.recorded_tuning({}) == []
    with pytest.raises(launch_profile.LaunchError, match="must read as a mapping"):
        launch_profile.recorded_tuning("SM120_TUNING_LIVE=a")

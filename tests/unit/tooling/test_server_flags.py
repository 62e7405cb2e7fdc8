# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The flags our launch profiles render, against each release's own parser definitions.

read_server_flags reads sglang/srt/server_args.py, and what it imports, straight out of the
real wheel (tests/unit/sglang_wheels.py; no torch, no install). The releases are those of
data/sglang_releases.yml. A flag a release lacks is not skipped: ABSENT records where and why,
and the tests prove both that it is gone there and that it is there everywhere else.
"""

from __future__ import annotations

import argparse
import functools
import types

import pytest
from packaging.specifiers import SpecifierSet

from ansible_collections.sm120.sglang.plugins.plugin_utils.sglang_releases import load, versions
from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import sglang_wheel
from ansible_collections.sm120.sglang.tooling.server_flag_problems import flag_problems
from ansible_collections.sm120.sglang.tooling.server_flags import (
    ServerFlagsError,
    read_server_flags,
)

RELEASES = versions(load())

# A two-node GLM-5 NVFP4 launch as the sglang_service role renders it (true: a switch).
PROFILE = {
    "--model-path": "X", "--served-model-name": "glm-5", "--host": "0.0.0.0", "--port": 30000,
    "--tp-size": 8, "--mem-fraction-static": 0.9, "--context-length": 8192, "--kv-cache-dtype": "bf16",
    "--quantization": "modelopt_fp4", "--moe-runner-backend": "flashinfer_cutlass",
    "--disable-shared-experts-fusion": True, "--nnodes": 2, "--node-rank": 1,
    "--dist-init-addr": "10.0.0.1:25000", "--config": "/etc/sglang/x.yaml", "--api-key": "K",
    "--cuda-graph-max-bs": 256, "--max-running-requests": 128, "--disable-custom-all-reduce": True,
}
FUSION = {"--enable-flashinfer-allreduce-fusion": True, "--flashinfer-allreduce-fusion-backend": "auto"}

# Flags some releases lack: the releases, why, and what to render there instead (None: nothing).
ABSENT = {
    "--cuda-graph-max-bs": (
        ">=0.5.20", "--cuda-graph-max-bs-decode",
        "0.5.14 split the CUDA graph settings per phase (--cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill) and kept --cuda-graph-max-bs as a deprecated alias of the "
        "decode one (DeprecatedAliasStoreAction); 0.5.20 dropped the alias"),
    "--flashinfer-allreduce-fusion-backend": (
        "<0.5.14", None,
        "added in 0.5.14 (choices auto, trtllm, mnnvl; cutedsl from 0.5.21); before it the "
        "switch --enable-flashinfer-allreduce-fusion is the only way to ask for the fusion"),
}
# Flags a release still accepts but calls deprecated, and what it points to instead.
DEPRECATED = {
    "--cuda-graph-max-bs": (">=0.5.14,<0.5.20", "--cuda-graph-max-bs-decode"),
    # Still a store_true; ServerArgs turns it into --flashinfer-allreduce-fusion-backend auto with a warning.
    "--enable-flashinfer-allreduce-fusion": (">=0.5.14", "--flashinfer-allreduce-fusion-backend"),
}
CHOICE_FLAGS = ("--kv-cache-dtype", "--quantization", "--moe-runner-backend")
# How each release defines its flags (add_argument: explicit calls in ServerArgs.add_cli_args).
STYLES = {
    "<0.5.14": "add_argument",
    ">=0.5.14,<0.5.20": "add_argument + dataclass field",  # A[T, Arg(...)] fields of ServerArgs
    ">=0.5.20": "add_argument + namespace field",  # the same, on the classes of arg_groups/fields/
}


@functools.lru_cache(maxsize=None)
def release_flags(version):
    archive = sglang_wheel(version)
    names = set(archive.namelist())
    return read_server_flags(lambda path: archive.read(path).decode() if path in names else None)


def absent_in(flag, version):
    return flag in ABSENT and SpecifierSet(ABSENT[flag][0]).contains(version, prereleases=True)


def as_rendered(version, arguments):
    """The arguments with every flag the release lacks replaced by its successor, or left out."""
    rendered = {}
    for flag, value in arguments.items():
        if not absent_in(flag, version):
            rendered[flag] = value
        elif ABSENT[flag][1]:
            rendered[ABSENT[flag][1]] = value
    return rendered


@pytest.mark.parametrize("version", RELEASES)
def test_the_reader_finds_hundreds_of_options_in_every_release_in_its_own_style(version):
    flags = release_flags(version)
    assert len(flags) >= 250
    styles = [style for releases, style in STYLES.items() if SpecifierSet(releases).contains(version, prereleases=True)]
    assert {record["style"] for record in flags.values()} == set(styles[0].split(" + "))


@pytest.mark.parametrize("version", RELEASES)
def test_every_profile_flag_and_value_is_accepted_by_the_release(version):
    assert flag_problems(release_flags(version), as_rendered(version, PROFILE)) == []


@pytest.mark.parametrize("version", RELEASES)
def test_a_flag_is_absent_exactly_in_the_releases_the_table_names(version):
    flags = release_flags(version)
    for flag in list(PROFILE) + list(FUSION):
        assert (flag not in flags) == absent_in(flag, version), flag
    for flag, (_since, successor, _why) in ABSENT.items():
        if absent_in(flag, version) and successor:
            assert flags[successor]["takes_value"] and flags[successor]["nargs"] is None
    missing = [flag for flag in PROFILE if absent_in(flag, version)]
    problems = flag_problems(flags, PROFILE)
    assert len(problems) == len(missing)
    for flag, message in zip(missing, problems):
        assert message.startswith(flag + " ") and "no such flag" in message and ABSENT[flag][1] in message


@pytest.mark.parametrize("version", RELEASES)
def test_switches_take_no_value_and_the_rest_take_exactly_one(version):
    flags = release_flags(version)
    for flag, value in as_rendered(version, dict(PROFILE, **FUSION)).items():
        assert flags[flag]["takes_value"] is (value is not True), flag
        assert flags[flag]["nargs"] == (0 if value is True else None), flag


@pytest.mark.parametrize("version", RELEASES)
def test_the_choice_flags_are_checked_against_the_release_s_own_list(version):
    flags = release_flags(version)
    for flag in CHOICE_FLAGS:
        assert flags[flag]["choices_known"] and PROFILE[flag] in flags[flag]["choices"], flag


@pytest.mark.parametrize("version", RELEASES)
def test_the_fusion_flags_are_accepted_where_the_release_has_them(version):
    flags = release_flags(version)
    assert flag_problems(flags, as_rendered(version, dict(FUSION, **{"--model-path": "X"}))) == []
    if "--flashinfer-allreduce-fusion-backend" in flags:
        assert "auto" in flags["--flashinfer-allreduce-fusion-backend"]["choices"]


@pytest.mark.parametrize("version", RELEASES)
def test_deprecated_flags_say_what_replaces_them_from_the_release_the_table_names(version):
    flags = release_flags(version)
    for flag, (releases, successor) in DEPRECATED.items():
        deprecated = flag in flags and flags[flag]["deprecated"]
        if SpecifierSet(releases).contains(version, prereleases=True):
            assert deprecated and successor in deprecated, flag
        else:
            assert not deprecated, flag


def test_cuda_graph_max_bs_is_the_decode_setting_while_it_is_an_alias():
    record = release_flags("0.5.19")["--cuda-graph-max-bs"]
    assert record["dest"] == "cuda_graph_max_bs_decode" and record["action"] == "DeprecatedAliasStoreAction"
    assert release_flags("0.5.13")["--cuda-graph-max-bs"]["dest"] == "cuda_graph_max_bs"


@pytest.mark.parametrize("version", RELEASES)
def test_an_unknown_flag_is_reported_with_its_value(version):
    problems = flag_problems(release_flags(version), {"--model-path": "X", "--tp-sizes": 8})
    assert len(problems) == 1
    assert problems[0].startswith("--tp-sizes 8: this release has no such flag; close: --tp-size")


@pytest.mark.parametrize("version", RELEASES)
def test_a_value_outside_the_choices_is_reported_with_the_choices(version):
    problems = flag_problems(release_flags(version), {"--model-path": "X", "--kv-cache-dtype": "fp9"})
    assert len(problems) == 1 and problems[0].startswith('--kv-cache-dtype "fp9": \'fp9\' is not among the choices')
    assert "auto" in problems[0] and "bf16" in problems[0]


@pytest.mark.parametrize("version", RELEASES)
def test_a_switch_given_a_value_is_reported(version):
    problems = flag_problems(release_flags(version), {"--model-path": "X", "--disable-custom-all-reduce": "yes"})
    assert problems == ['--disable-custom-all-reduce "yes": a switch in this release, it takes no value (give true)']


@pytest.mark.parametrize("version", RELEASES)
def test_a_valued_flag_without_its_value_is_reported(version):
    problems = flag_problems(release_flags(version), {"--model-path": "X", "--tp-size": True})
    assert problems == ["--tp-size (switch): this release's flag takes one value of type int, got no value"]


def test_too_many_values_a_wrong_type_and_a_value_that_looks_like_a_flag_are_reported():
    problems = flag_problems(release_flags("0.5.23"), {
        "--model-path": "X", "--tp-size": [8, 4], "--port": "abc", "--served-model-name": "-x"})
    assert problems == [
        "--tp-size [8, 4]: this release's flag takes one value of type int, got 2",
        "--port \"abc\": 'abc' is not of type int; this release's flag takes one value of type int",
        "--served-model-name \"-x\": argparse would read '-x' as a flag, not as the value",
    ]


def test_false_and_null_leave_a_flag_out_as_the_unit_template_does():
    assert flag_problems(release_flags("0.5.9"), {"--model-path": "X", "--no-such": None, "--nor-this": False}) == []


@pytest.mark.parametrize("version", ["0.5.8", "0.5.14", "0.5.23"])
def test_the_required_model_path_is_reported_missing_unless_a_config_file_may_hold_it(version):
    flags = release_flags(version)
    assert flag_problems(flags, {"--tp-size": 8}) == ["--model-path: required by this release and not given"]
    assert flag_problems(flags, {"--config": "/etc/sglang/x.yaml"}) == []


def test_a_flag_the_release_refuses_or_ignores_is_reported():
    problems = flag_problems(release_flags("0.5.19"), {
        "--model-path": "X", "--enable-expert-distribution-metrics": True, "--collect-tokens-histogram": True})
    assert problems[0].startswith("--enable-expert-distribution-metrics (switch): the release's parser refuses it: "
                                  "--enable-expert-distribution-metrics is no longer supported.")
    assert problems[1] == ("--collect-tokens-histogram (switch): accepted but ignored, "
                           "its action DeprecatedAction stores nothing")


# --reasoning-parser: list(ReasoningParser.DetectorMap.keys()); --sampling-backend: a list that
# gains "token_oracle" when SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE is set (module level until 0.5.18,
# inside add_cli_args from 0.5.19).
@pytest.mark.parametrize("version, flag", [("0.5.8", "--reasoning-parser"), ("0.5.23", "--reasoning-parser"),
                                           ("0.5.13", "--sampling-backend"), ("0.5.23", "--sampling-backend")])
def test_choices_computed_at_run_time_are_reported_unknown_not_guessed(version, flag):
    record = release_flags(version)[flag]
    assert record["choices"] is None and record["choices_known"] is False
    assert "computed at run time" in record["choices_from"]
    assert flag_problems(release_flags(version), {"--model-path": "X", flag: "anything"}) == []


def test_boolean_optional_flags_accept_their_no_spelling():
    flags = release_flags("0.5.12")
    negative = [option for option, record in flags.items() if record["action"] == "BooleanOptionalAction"
                and option.startswith("--no-")]
    assert negative and all(flags[option]["nargs"] == 0 for option in negative)


def config_merger(version):
    """The release's own ConfigArgumentMerger (it imports only argparse, json, logging, pathlib, yaml)."""
    archive = sglang_wheel(version)
    path = next(name for name in ("sglang/srt/utils/server_args_config_parser.py",
                                  "sglang/srt/server_args_config_parser.py") if name in archive.namelist())
    module = types.ModuleType("server_args_config_parser")
    exec(compile(archive.read(path), path, "exec"), module.__dict__)  # noqa: S102 - the release's own code
    return module.ConfigArgumentMerger


@pytest.mark.parametrize("version", RELEASES)
def test_a_config_file_spells_its_keys_with_dashes_like_the_flags(version, tmp_path):
    flags = release_flags(version)
    assert flags["--config"]["takes_value"] and flags["--config"]["nargs"] is None
    parser = argparse.ArgumentParser()
    for flag in ("--tp-size", "--disable-custom-all-reduce", "--config"):
        record = flags[flag]
        parser.add_argument(flag, dest=record["dest"], **({"action": "store_true"} if record["nargs"] == 0 else {}))
    for keys, understood in (("tp-size: 8\ndisable-custom-all-reduce: true\n", True),
                             ("tp_size: 8\ndisable_custom_all_reduce: true\n", False)):
        config = tmp_path / "x.yaml"
        config.write_text(keys)
        argv = config_merger(version)(parser).merge_config_with_args(["--config", str(config)])
        parsed, unknown = parser.parse_known_args(argv)
        if understood:
            assert unknown == [] and getattr(parsed, flags["--tp-size"]["dest"]) == "8"
            assert parsed.disable_custom_all_reduce is True
        else:  # the merger writes `--{key}` verbatim; argparse knows no --tp_size
            assert unknown == ["--tp_size", "8", "--disable_custom_all_reduce"]


def test_a_release_without_server_args_is_refused_naming_the_files_looked_at():
    with pytest.raises(ServerFlagsError, match="no ServerArgs.add_cli_args found; looked at "
                                               "sglang/srt/server_args.py, sglang/srt/server_args/__init__.py"):
        read_server_flags(lambda path: None)


def test_a_parser_in_no_known_style_is_refused():
    source = "class ServerArgs:\n    @staticmethod\n    def add_cli_args(parser):\n        register(parser)\n"
    with pytest.raises(ServerFlagsError, match="none of the known styles .* looked at sglang/srt/server_args.py"):
        read_server_flags(lambda path: source if path == "sglang/srt/server_args.py" else None)


def test_a_release_whose_dataclass_rules_changed_is_refused_until_they_are_read():
    archive = sglang_wheel("0.5.14")

    def read(path):
        text = archive.read(path).decode() if path in archive.namelist() else None
        return text.replace('nargs = arg_meta.nargs or "+"', 'nargs = arg_meta.nargs or "*"') if text else None

    with pytest.raises(ServerFlagsError, match="sglang/srt/arg_groups/arg_utils.py: .* not taught"):
        read_server_flags(read)


def test_the_dataclass_rules_are_mirrored_on_a_small_release():
    arg_utils = sglang_wheel("0.5.14").read("sglang/srt/arg_groups/arg_utils.py").decode()
    server_args = '''
import argparse
from typing import List, Literal, Optional
from sglang.srt.arg_groups.arg_utils import A, Arg, add_cli_args_from_dataclass
MODES = ["a", "b"]
MODES_TOO = [*MODES, "c"]

class ServerArgs:
    path: A[str, Arg(help="p", aliases=["--model"])]
    mode: A[Optional[Literal["x", "y"]], "m"] = None
    size: A[int, Arg(help="s", cli_name="--size-of-it")] = 1
    paths: A[Optional[List[str]], "ps"] = None
    flag: A[bool, "f"] = False
    hidden: A[bool, Arg(no_cli=True)] = False
    plain: int = 0
    kind: A[str, Arg(help="k", choices=MODES_TOO)] = "a"
    toggle: A[Optional[bool], Arg(help="t", action=argparse.BooleanOptionalAction)] = None

    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
'''
    sources = {"sglang/srt/server_args.py": server_args, "sglang/srt/arg_groups/arg_utils.py": arg_utils}
    flags = read_server_flags(sources.get)
    shape = {option: (record["dest"], record["nargs"], record["choices"], record["required"])
             for option, record in flags.items()}
    assert shape == {
        "--path": ("path", None, None, True), "--model": ("path", None, None, True),
        "--mode": ("mode", None, ("x", "y"), False), "--size-of-it": ("size", None, None, False),
        "--paths": ("paths", "+", None, False), "--flag": ("flag", 0, None, False),
        "--kind": ("kind", None, ("a", "b", "c"), False),
        "--toggle": ("toggle", 0, None, False), "--no-toggle": ("toggle", 0, None, False),
    }
    assert flags["--size-of-it"]["type"] == "int" and flags["--kind"]["choices_from"] == "MODES_TOO"

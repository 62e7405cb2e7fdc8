# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The effect check on small sources whose answers are known; the real wheels are in test_gates_against_wheels.py."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.tooling.gate_effect import (
    EffectError,
    check_effect,
    check_native,
    evaluate_decision,
    read_env_declarations,
)

SHIPPED = '''
from sglang.srt.utils import is_cuda, is_sm90_supported, is_sm100_supported

_is_cuda = is_cuda()
_is_sm90_supported = _is_cuda and is_sm90_supported()
_is_sm100_supported = _is_cuda and is_sm100_supported()
MAX = 2048


def fusion_applies(batch_size: int):
    return (
        (_is_sm90_supported or _is_sm100_supported)
        and batch_size <= MAX
        and get_args().enabled
    )
'''

GATED = SHIPPED.replace("is_sm100_supported\n", "is_sm100_supported, is_sm120_supported\n").replace(
    "_is_sm100_supported = _is_cuda and is_sm100_supported()\n",
    "_is_sm100_supported = _is_cuda and is_sm100_supported()\n_is_sm120_supported = _is_cuda and is_sm120_supported()\n",
).replace("(_is_sm90_supported or _is_sm100_supported)", "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)")

DECISION = {"id": "applies", "file": "x.py", "function": "fusion_applies", "condition": "return", "sm120": True,
            "scope": {"batch_size": 8, "get_args": {"__call__": {"enabled": True}}}}
# get_args is read but neither imported nor defined in SHIPPED: the scope must bind it too.
SHIPPED = SHIPPED.replace("MAX = 2048\n", "MAX = 2048\nfrom sglang.srt.args import get_args\n")
GATED = GATED.replace("MAX = 2048\n", "MAX = 2048\nfrom sglang.srt.args import get_args\n")


def test_a_gate_that_widens_the_check_flips_sm120_and_leaves_sm90_and_sm100_as_shipped():
    values, problems = check_effect(SHIPPED, GATED, DECISION)
    assert problems == []
    assert values["sm120"] == {"shipped": False, "gated": True}
    assert values["sm90"]["gated"] is values["sm90"]["shipped"] is True
    assert values["sm100"]["gated"] is values["sm100"]["shipped"] is True


def test_an_edit_that_anchors_but_changes_nothing_is_reported():
    untouched = SHIPPED.replace("MAX = 2048", "MAX = 2048  # edited")
    _values, problems = check_effect(SHIPPED, untouched, DECISION)
    assert any("on SM120 the gated code decides False" in problem for problem in problems)
    assert any("already decides True" not in problem for problem in problems)


def test_a_gate_that_also_changes_sm90_is_reported():
    too_wide = GATED.replace("(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)", "(False or _is_sm120_supported)")
    _values, problems = check_effect(SHIPPED, too_wide, DECISION)
    assert [problem for problem in problems if "SM90" in problem and "shipped code decides True" in problem]
    assert [problem for problem in problems if "SM100" in problem]


def test_a_patched_file_that_uses_a_helper_it_never_imports_fails_as_it_would_on_the_gpu():
    no_import = GATED.replace("is_sm100_supported, is_sm120_supported\n", "is_sm100_supported\n")
    with pytest.raises(EffectError, match="is_sm120_supported is neither imported, assigned nor a parameter"):
        check_effect(SHIPPED, no_import, DECISION)


def test_a_name_the_scope_does_not_give_is_named_never_guessed():
    decision = dict(DECISION, scope={"get_args": {"__call__": {"enabled": True}}})
    with pytest.raises(EffectError, match="reads batch_size; give its value in the decision's scope"):
        evaluate_decision(SHIPPED, decision, (12, 0))
    decision = dict(DECISION, scope={"batch_size": 8, "get_args": {"__call__": {}}})
    with pytest.raises(EffectError, match=r"get_args\(\)\.enabled, which its scope does not give"):
        evaluate_decision(SHIPPED, decision, (9, 0))


def test_an_if_test_is_located_by_the_text_it_contains_and_must_be_the_only_match():
    source = '''
import torch
from sglang.srt.utils import is_sm120_supported


class CustomAllreduce:
    def should_custom_ar(self, inp):
        if self.disabled:
            return False
        if self.world_size == 2 or self.full_nvlink or is_sm120_supported():
            return True
        return False
'''
    decision = {"id": "serves", "file": "c.py", "function": "CustomAllreduce.should_custom_ar",
                "condition": "self.world_size == 2", "sm120": True,
                "scope": {"self": {"world_size": 8, "full_nvlink": False, "disabled": False}}}
    assert evaluate_decision(source, decision, (12, 0)) is True
    assert evaluate_decision(source, decision, (9, 0)) is False
    with pytest.raises(EffectError, match="2 if tests of CustomAllreduce.should_custom_ar contain"):
        evaluate_decision(source, dict(decision, condition="self."), (12, 0))
    with pytest.raises(EffectError, match="0 definitions of CustomAllreduce.missing"):
        evaluate_decision(source, dict(decision, function="CustomAllreduce.missing"), (12, 0))


def test_torch_capability_and_get_platform_model_the_gpu():
    source = '''
import torch
from sglang.srt.runtime_context import get_platform


def gate(device, group):
    world_size = group.size()
    if world_size > 2 and torch.cuda.get_device_capability(device) != (12, 0) and not get_platform().is_sm120:
        return
'''
    decision = {"id": "d", "file": "u.py", "function": "gate", "condition": "world_size > 2", "sm120": False,
                "scope": {"world_size": 8, "device": 0}}
    assert evaluate_decision(source, decision, (12, 0)) is False
    assert evaluate_decision(source, decision, (10, 0)) is True
    # A local the function never assigns is a NameError in SGLang too, whatever the scope says.
    with pytest.raises(EffectError, match="world_count is neither imported"):
        evaluate_decision(source.replace("world_size > 2", "world_count > 2"),
                          dict(decision, condition="world_count > 2", scope={"world_count": 8, "device": 0}), (12, 0))


ENVIRON = '''
class Envs:
    SGLANG_ENABLE_PCIE_IPC_ALLREDUCE = EnvBool(False)
    SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2 = EnvBool(True)
    SGLANG_PCIE_IPC_MAX_NUMEL = EnvInt(0)
'''

ELIGIBLE = '''
from sglang.srt.environ import envs

_ELIGIBLE_GROUP_NAMES = frozenset({"tp"})


def eligible_group(*, group_name, world_size, deterministic):
    if not (
        envs.SGLANG_ENABLE_PCIE_IPC_ALLREDUCE.get()
        and world_size > 1
        and group_name in _ELIGIBLE_GROUP_NAMES
    ):
        return False
    return True
'''


def test_an_option_gate_flips_its_decision_through_the_environment_the_service_renders():
    declarations = read_env_declarations(ENVIRON)
    assert declarations["SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2"] == ("EnvBool", True)
    decision = {"id": "refused", "file": "p.py", "function": "eligible_group", "condition": "SGLANG_ENABLE_PCIE",
                "sm120": False, "scope": {"world_size": 8, "group_name": "tp", "deterministic": False}}
    values, problems = check_effect(ELIGIBLE, ELIGIBLE, decision, declarations, {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"})
    assert problems == []
    assert values["sm120"] == {"shipped": True, "gated": False}
    _values, problems = check_effect(ELIGIBLE, ELIGIBLE, decision, declarations, {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"})
    assert problems == ["p.py eligible_group (refused): on SM120 the gated code decides True, the gate needs False"]


def test_an_environment_variable_the_release_does_not_declare_is_an_error():
    source = ELIGIBLE.replace("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", "SGLANG_NO_SUCH_SWITCH")
    decision = {"id": "d", "file": "p.py", "function": "eligible_group", "condition": "SGLANG_NO_SUCH", "sm120": False,
                "scope": {"world_size": 8, "group_name": "tp"}}
    with pytest.raises(EffectError, match="envs.SGLANG_NO_SUCH_SWITCH is not declared"):
        evaluate_decision(source, decision, (12, 0), read_env_declarations(ENVIRON))


def test_an_upstream_gate_must_already_decide_so_on_sm120():
    source = '''
from sglang.srt.utils import is_sm120_supported


def pick(view):
    if moe_runner_backend == "auto" and view.quantization == "modelopt_fp4" and is_sm120_supported():
        moe_runner_backend = "flashinfer_cutlass"
'''
    decision = {"id": "native", "file": "o.py", "function": "pick", "condition": "modelopt_fp4", "sm120": True,
                "scope": {"moe_runner_backend": "auto", "view": {"quantization": "modelopt_fp4"}}}
    assert check_native(source, decision) == (True, [])
    value, problems = check_native(source.replace("is_sm120_supported()", "False"), decision)
    assert value is False and "not True as the upstream entry says" in problems[0]


def test_a_file_that_does_not_parse_is_named():
    with pytest.raises(EffectError, match="x.py:fusion_applies: does not parse"):
        evaluate_decision("def fusion_applies(:\n", DECISION, (12, 0))

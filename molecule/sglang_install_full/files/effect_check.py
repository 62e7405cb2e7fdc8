# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Take the decisions the gates change with the real, installed SGLang, on a GPU of a given capability.

    /opt/sglang/bin/python effect_check.py 12.0 [ARGV_JSON]

Imports SGLang's own modules, as the server does, with CUDA faked as eight GPUs
of that compute capability, calls the functions that decide (fusion applies,
the fusion backend, the PCIe-IPC allreduce, the MoE runner) and prints each
result as JSON. With ARGV_JSON it also builds SGLang's own argument parser and
parses the launch flags, printing what the parser made of each.

Test doubles, for what a host without a GPU cannot have: torch.cuda answers as
eight GPUs of the capability asked (the real CUDA calls fail without a driver),
and sgl_kernel, SGLang's compiled CUDA kernels, which load the driver's
libcuda.so.1 on import, is an empty module. The server's running state the
fusion check reads (its execution settings) is given as the service sets it:
the fusion backend asked for ("auto"), no data-parallel attention.
"""

import argparse
import importlib.abc
import importlib.machinery
import json
import os
import sys
import types

CAPABILITY = tuple(int(part) for part in sys.argv[1].split("."))
NAMES = {(9, 0): "NVIDIA H200", (10, 0): "NVIDIA B200", (12, 0): "NVIDIA RTX PRO 6000 Blackwell Server Edition"}


class _Stub:
    """Anything sgl_kernel is asked for: callable, with attributes, iterable as empty."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Stub()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub()

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (object,)


class _KernelModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub()


class _KernelFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "sgl_kernel" or name.startswith("sgl_kernel."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _KernelModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def fake_gpus():
    sys.meta_path.insert(0, _KernelFinder())
    # DeepGEMM JIT-compiles with the CUDA toolkit, which a host without a GPU lacks (its import asserts a
    # CUDA_HOME); GLM-5-NVFP4 on SM120 runs without it, and no gate's decision reads it.
    os.environ.setdefault("SGLANG_ENABLE_JIT_DEEPGEMM", "0")
    import torch

    name = NAMES[CAPABILITY]
    torch.cuda.is_available = lambda: True
    torch.cuda.is_initialized = lambda: True
    torch.cuda.device_count = lambda: 8
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_capability = lambda device=None: CAPABILITY
    torch.cuda.get_device_name = lambda device=None: name
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        major=CAPABILITY[0], minor=CAPABILITY[1], name=name, total_memory=96 * 2**30, multi_processor_count=188,
        gcnArchName="", uuid="stand-in", L2_cache_size=128 * 2**20, warp_size=32)


def decisions():
    from sglang.srt.layers import flashinfer_comm_fusion
    from sglang.srt.layers.layer_boundary.residual import add_norm
    from sglang.srt.distributed.device_communicators import pcie_ipc_ar
    from sglang.srt.arg_groups import overrides

    add_norm.get_exec = lambda: types.SimpleNamespace(comm=types.SimpleNamespace(flashinfer_allreduce_fusion_backend="auto"))
    add_norm.is_dp_attention_enabled = lambda: False
    add_norm.uses_cutedsl_ar_fusion = lambda: False
    add_norm.is_flashinfer_allreduce_unavailable = lambda: False
    found = {"fusion_applies": bool(add_norm.flashinfer_ar_fusion_applies(8))}
    try:
        found["fusion_backend"] = flashinfer_comm_fusion._resolve_backend("auto", False)
        found["fusion_backend_refused"] = False
    except ValueError as exc:
        found["fusion_backend"] = "raises ValueError: %s" % exc
        found["fusion_backend_refused"] = True
    found["pcie_ipc_refused"] = not pcie_ipc_ar.eligible_group(group_name="tp", world_size=8, deterministic=False)
    view = types.SimpleNamespace(moe_runner_backend="auto", quantization="modelopt_fp4", moe_a2a_backend="none")
    found["moe_runner"] = overrides._moe_runner_backend_quant_constraints(view).get("moe_runner_backend", "auto")
    found["moe_runner_selected"] = found["moe_runner"] == "flashinfer_cutlass"
    return found


def parse(argv):
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(allow_abbrev=False)
    ServerArgs.add_cli_args(parser)
    namespace = parser.parse_args(argv)
    actions = {option: action for action in parser._actions for option in action.option_strings}
    parsed = {}
    for word in argv:
        if word in actions:
            action = actions[word]
            parsed[word] = {"dest": action.dest, "value": getattr(namespace, action.dest),
                            "nargs": 0 if action.nargs == 0 else action.nargs,
                            "choices": sorted(map(str, action.choices)) if action.choices else None}
    return parsed


def main():
    fake_gpus()
    report = {"capability": "%d.%d" % CAPABILITY, "pcie_ipc_env": os.environ.get("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"),
              "decisions": decisions()}
    if len(sys.argv) > 2:
        report["parsed"] = parse(json.loads(sys.argv[2]))
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main()

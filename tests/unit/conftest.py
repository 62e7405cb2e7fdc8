# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared fixtures: run a module's main() the way community.general's unit tests do, the molecule stand-in of SGLang
on a free port, and the molecule nvidia-smi stand-in on a copy of a capture."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

from ansible.plugins.loader import init_plugin_loader

# Ansible's collection loader must own the ansible_collections package before
# anything imports it, so that templates calling the collection's filters
# (sm120.sglang.*) find them in the checkout as ansible-playbook does.
for _name in [name for name in sys.modules if name == "ansible_collections" or name.startswith("ansible_collections.")]:
    del sys.modules[_name]
init_plugin_loader([os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".collections"))])

import pytest  # noqa: E402
from ansible.module_utils import basic  # noqa: E402
from ansible.module_utils.testing import patch_module_args  # noqa: E402

from ansible_collections.sm120.sglang.tests.unit.utils import ModuleExit, ModuleFail  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
STANDIN = ROOT / "molecule" / "resources" / "standin_server" / "sglang_standin.py"
NVIDIA_SMI = ROOT / "molecule" / "resources" / "nvidia-smi" / "nvidia_smi_standin.py"
GPU_CAPTURES = ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "gpu"


@pytest.fixture
def run_module(monkeypatch):
    """Call a module's main() with args; return its result or raise ModuleFail."""

    def exit_json(self, **kwargs):
        raise ModuleExit(kwargs)

    def fail_json(self, msg, **kwargs):
        kwargs["msg"] = msg
        raise ModuleFail(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)

    def _run(main, args):
        with patch_module_args(args):
            try:
                main()
            except ModuleExit as done:
                # What a controller would see: the result survives JSON.
                return json.loads(json.dumps(done.result))
        raise AssertionError("module returned without exit_json or fail_json")

    return _run


@pytest.fixture
def start_standin(tmp_path):
    """Starts the molecule stand-in of SGLang (the real server needs a GPU and a model) on a free port with the given
    extra flags (``--enable-metrics``) and environment (``env=``) and returns its URL: 300 tok/s a request, its first 16 requests after the
    start at 0.7 of that (SGLANG_STANDIN_COLD_REQUESTS). Stopped when the test ends."""
    started = []

    def start(*flags, env=None):
        model = tmp_path / "model"
        model.mkdir(exist_ok=True)
        (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "vocab_size": 32000}))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        environment = dict(os.environ, SGLANG_STANDIN_TOKENS_PER_SECOND="300", SGLANG_STANDIN_COLD_REQUESTS="16",
                           SGLANG_STANDIN_COLD_FACTOR="0.7", SGLANG_STANDIN_POWER_FILE=str(tmp_path / "power"),
                           **(env or {}))
        server = subprocess.Popen([sys.executable, str(STANDIN), "--model-path", str(model), "--port", str(port),
                                   "--standin-warmup", "0", "--standin-load", "0", *flags], env=environment,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(server)
        url = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    return url
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)

    yield start
    for server in started:
        server.kill()
        server.wait()


@pytest.fixture
def standin(start_standin):
    """The URL of the molecule stand-in of SGLang as start_standin starts it, without extra flags."""
    return start_standin()


@pytest.fixture
def standin_nvidia_smi(tmp_path):
    """The molecule nvidia-smi stand-in on a copy of an RTX PRO 6000 x8 capture, its draw and utilisation from a power
    file (written by the test, or by the SGLang stand-in under load): (the script, the power file, the copied
    capture set, the environment the GPU exporter runs it in)."""
    captures = tmp_path / "captures"
    shutil.copytree(GPU_CAPTURES / "rtx-pro-6000-server-x8", captures / "rtx-pro-6000-server-x8")
    script = tmp_path / "nvidia-smi"
    script.write_text('#!/bin/sh\nexec "%s" "%s" "$@"\n' % (sys.executable, NVIDIA_SMI))
    script.chmod(0o755)
    power = tmp_path / "power"
    env = dict(os.environ, NVIDIA_SMI_STANDIN_CAPTURES=str(captures),
               NVIDIA_SMI_STANDIN_FIXTURE="rtx-pro-6000-server-x8", NVIDIA_SMI_STANDIN_POWER_FILE=str(power),
               PYTHONPATH=str(ROOT / ".collections"))
    return script, power, captures / "rtx-pro-6000-server-x8", env

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the role tests that run a real ansible-playbook against a server share."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

STANDIN = pathlib.Path(__file__).resolve().parents[3] / "molecule" / "resources" / "standin_server" / "sglang_standin.py"


@pytest.fixture
def standin(tmp_path):
    """The molecule stand-in of SGLang (the real server needs a GPU and a model) on a free port, its URL: 300 tok/s a
    request, its first 16 requests after the start at 0.7 of that (SGLANG_STANDIN_COLD_REQUESTS)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "vocab_size": 32000}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, SGLANG_STANDIN_TOKENS_PER_SECOND="300", SGLANG_STANDIN_COLD_REQUESTS="16",
               SGLANG_STANDIN_COLD_FACTOR="0.7", SGLANG_STANDIN_POWER_FILE=str(tmp_path / "power"))
    server = subprocess.Popen([sys.executable, str(STANDIN), "--model-path", str(model), "--port", str(port),
                               "--standin-warmup", "0", "--standin-load", "0"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise
            time.sleep(0.2)
    yield url
    server.kill()
    server.wait()

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-in for sglang.launch_server, and the unit's readiness check against it.

molecule/resources/standin_server/sglang_standin.py answers the HTTP SGLang
answers; the role's ExecStartPost check (files/sglang-service-wait-health.py)
must return once /health says 200 and fail when the server is gone. Both run
here as the subprocesses systemd would start.

The stand-in also plays the FlashInfer allreduce-fusion gate's measured
regression when the gate's edits are in the installed SGLang's communicator.py:
generation about 15.85 times slower (3,740 -> 236 tok/s) and a per-GPU draw of
125 W instead of 480 W under load, written to its power file. The installed
SGLang is the real 0.5.9 file from .cache/wheels when it is there, patched with
the catalog's own edits, so the stand-in is shown to see what the role writes.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import pathlib
import socket
import stat
import subprocess
import sys
import time
import zipfile

import pytest
import yaml
from packaging.specifiers import SpecifierSet

ROOT = pathlib.Path(__file__).resolve().parents[3]
STANDIN = ROOT / "molecule" / "resources" / "standin_server" / "sglang_standin.py"
WAIT = ROOT / "roles" / "sglang_service" / "files" / "sglang-service-wait-health.py"
CATALOG = ROOT / "roles" / "sm120_patches" / "vars" / "catalog.yml"
WHEEL = ROOT / ".cache" / "wheels" / "sglang-0.5.9-py3-none-any.whl"
COMMUNICATOR = "sglang/srt/layers/communicator.py"
KEY = "test-key"

# Used only where .cache/wheels has no 0.5.9 wheel: the lines of the shipped
# communicator.py the gate's edits anchor on, in their order.
COMMUNICATOR_SNIPPET = """from sglang.srt.utils import (
    is_cuda,
    is_sm90_supported,
    is_sm100_supported,
)

_is_cuda = is_cuda()
_is_sm90_supported = _is_cuda and is_sm90_supported()
_is_sm100_supported = _is_cuda and is_sm100_supported()


def apply_flashinfer_allreduce_fusion(batch_size: int):
    return (
        (_is_sm90_supported or _is_sm100_supported)
        and _is_flashinfer_available
        and batch_size > 0
    )
"""


def _load_standin():
    spec = importlib.util.spec_from_file_location("sglang_standin", STANDIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shipped_communicator():
    if WHEEL.exists():
        with zipfile.ZipFile(WHEEL) as wheel:
            return wheel.read(COMMUNICATOR).decode("utf-8")
    return COMMUNICATOR_SNIPPET


def _fusion_gate_edits():
    with open(CATALOG) as handle:
        catalog = yaml.safe_load(handle)["__sm120_patches_catalog"]
    gate = next(gate for gate in catalog["gates"] if gate["id"] == "flashinfer_allreduce_fusion")
    release = next(release for release in gate["releases"] if SpecifierSet(release["versions"]).contains("0.5.9"))
    return next(entry["edits"] for entry in release["files"] if entry["path"] == COMMUNICATOR)


def _sglang_site_packages(root, patched):
    """A site-packages directory holding SGLang's communicator.py, shipped or with the fusion gate's edits."""
    source = _shipped_communicator()
    if patched:
        for edit in _fusion_gate_edits():
            assert source.count(edit["old"]) == 1, edit["id"]
            source = source.replace(edit["old"], edit["new"])
    path = root / ("patched" if patched else "shipped")
    (path / "sglang" / "srt" / "layers").mkdir(parents=True)
    (path / COMMUNICATOR).write_text(source)
    return path


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _request(port, method, path, body=None, key=KEY):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    conn.request(method, path, json.dumps(body) if body is not None else None, headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def _wait_listening(port, proc):
    for _attempt in range(100):
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read())
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the stand-in did not listen")


def _start(model_dir, power_file, warmup="0.6", rate="2000", package_dir=None):
    model_dir.mkdir(exist_ok=True)
    (model_dir / "config.json").write_text("{}")
    port = _free_port()
    env = dict(os.environ, SGLANG_STANDIN_TOKENS_PER_SECOND=rate, SGLANG_STANDIN_POWER_FILE=str(power_file))
    env.pop("SGLANG_STANDIN_SGLANG_PACKAGE_DIR", None)
    if package_dir is not None:
        env["SGLANG_STANDIN_SGLANG_PACKAGE_DIR"] = str(package_dir)
    proc = subprocess.Popen(
        [sys.executable, str(STANDIN), "--model-path", str(model_dir), "--port", str(port), "--tp-size", "8",
         "--quantization", "modelopt_fp4", "--disable-shared-experts-fusion", "--served-model-name", "glm-5",
         "--api-key", KEY, "--standin-warmup", warmup],
        env=env, stderr=subprocess.PIPE, text=True)
    _wait_listening(port, proc)
    return port, proc


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
    proc.wait(timeout=10)
    stderr = proc.stderr.read()
    proc.stderr.close()
    return stderr


@pytest.fixture
def standin(tmp_path):
    port, proc = _start(tmp_path, tmp_path / "standin-power-draw")
    yield port, proc
    _stop(proc)


@pytest.fixture
def pair(tmp_path):
    """Two stand-ins at the default rate: one on the shipped SGLang, one with the fusion gate's edits."""
    servers = {}
    for patched in (False, True):
        name = "patched" if patched else "shipped"
        package = _sglang_site_packages(tmp_path, patched)
        power = tmp_path / ("%s-power-draw" % name)
        port, proc = _start(tmp_path / ("%s-model" % name), power, warmup="0", rate="400", package_dir=package)
        servers[name] = {"port": port, "proc": proc, "power": power}
    yield servers
    for server in servers.values():
        if server["proc"].poll() is None:
            _stop(server["proc"])


def test_health_is_503_during_warm_up_and_models_answer_early(standin):
    port, _proc = standin
    assert _request(port, "GET", "/health")[0] == 503
    status, data = _request(port, "GET", "/v1/models")
    assert status == 200 and json.loads(data)["data"][0]["id"] == "glm-5"
    time.sleep(0.8)
    assert _request(port, "GET", "/health", key=None)[0] == 200


def test_the_api_wants_the_key_and_health_does_not(standin):
    port, _proc = standin
    assert _request(port, "GET", "/v1/models", key=None)[0] == 401
    assert _request(port, "POST", "/v1/completions", {"prompt": "x"}, key="wrong")[0] == 401
    assert _request(port, "GET", "/health", key=None)[0] in (200, 503)


def test_completion_generates_max_tokens_and_honours_ignore_eos(standin):
    port, _proc = standin
    status, data = _request(port, "POST", "/v1/completions", {"model": "glm-5", "prompt": "a b c", "max_tokens": 5})
    body = json.loads(data)
    assert status == 200
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    assert body["choices"][0]["finish_reason"] == "length"
    # Without ignore_eos the stand-in stops at an end-of-sequence, as a model does.
    body = json.loads(_request(port, "POST", "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100})[1])
    assert body["usage"]["completion_tokens"] < 100 and body["choices"][0]["finish_reason"] == "stop"
    body = json.loads(_request(port, "POST", "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100,
                                "ignore_eos": True})[1])
    assert body["usage"]["completion_tokens"] == 100


def test_streaming_chat_sends_one_chunk_per_token_then_usage_then_done(standin):
    port, _proc = standin
    status, data = _request(port, "POST", "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 7, "ignore_eos": True,
                             "stream": True, "stream_options": {"include_usage": True}})
    assert status == 200
    events = [line[len("data: "):] for line in data.decode().split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) == 7
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 7


def test_fail_at_start_exits_1_with_the_reason_on_stderr(tmp_path):
    env = dict(os.environ, SGLANG_STANDIN_FAIL_AT_START="1")
    result = subprocess.run([sys.executable, str(STANDIN), "--model-path", str(tmp_path), "--port", "1"],
                            env=env, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 1
    assert "failing at start on purpose (SGLANG_STANDIN_FAIL_AT_START=1)" in result.stderr


def test_a_missing_model_directory_is_refused(tmp_path):
    result = subprocess.run([sys.executable, str(STANDIN), "--model-path", str(tmp_path / "absent"), "--port", "1"],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2 and "is not a directory" in result.stderr


def test_the_readiness_check_returns_once_health_answers_200(standin):
    port, proc = standin
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(WAIT), "http://127.0.0.1:%d/health" % port, "0.1"],
                            env=dict(os.environ, MAINPID=str(proc.pid)), capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    # It waited out the warm-up.
    assert time.monotonic() - started >= 0.3


def test_the_readiness_check_fails_when_the_server_is_gone():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    result = subprocess.run([sys.executable, str(WAIT), "http://127.0.0.1:%d/health" % _free_port(), "0.1"],
                            env=dict(os.environ, MAINPID=str(dead.pid)), capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 1
    assert "exited before" in result.stderr


# ------------------------------------------------------------------ the fusion gate's regression

def test_the_fusion_gate_is_live_only_when_communicator_lets_sm120_in(tmp_path):
    standin = _load_standin()
    assert standin.fusion_gate_live(None) == (False, "SGLANG_STANDIN_SGLANG_PACKAGE_DIR is not set")
    live, why = standin.fusion_gate_live(str(tmp_path / "absent"))
    assert not live and why.startswith("cannot read %s" % (tmp_path / "absent" / COMMUNICATOR))
    live, why = standin.fusion_gate_live(str(_sglang_site_packages(tmp_path, patched=False)))
    assert not live and "leaves SM120 out" in why
    live, why = standin.fusion_gate_live(str(_sglang_site_packages(tmp_path, patched=True)))
    assert live and "includes _is_sm120_supported" in why


def test_sm120_elsewhere_in_communicator_does_not_make_the_gate_live(tmp_path):
    # Only the fusion condition counts: the gate's import and cached flag alone change nothing at run time.
    standin = _load_standin()
    source = _shipped_communicator()
    edits = {edit["id"]: edit for edit in _fusion_gate_edits()}
    for edit_id in ("import_is_sm120_supported", "cache_is_sm120_supported"):
        source = source.replace(edits[edit_id]["old"], edits[edit_id]["new"])
    source += "\n\ndef elsewhere():\n    return (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n"
    (tmp_path / "sglang" / "srt" / "layers").mkdir(parents=True)
    (tmp_path / COMMUNICATOR).write_text(source)
    assert standin.fusion_gate_live(str(tmp_path))[0] is False


def test_the_slowdown_is_the_measured_one():
    standin = _load_standin()
    assert standin.tokens_per_second(False) / standin.tokens_per_second(True) == pytest.approx(3740 / 236)
    assert (standin.load_watts(False), standin.load_watts(True), standin.IDLE_W) == (480.0, 125.0, 60.0)


def _timed_completion(port, max_tokens):
    started = time.monotonic()
    status, data = _request(port, "POST", "/v1/completions",
                            {"model": "glm-5", "prompt": "a b c", "max_tokens": max_tokens, "ignore_eos": True})
    assert status == 200 and json.loads(data)["usage"]["completion_tokens"] == max_tokens
    return time.monotonic() - started


def test_with_the_fusion_gate_live_generation_collapses(pair):
    shipped = _timed_completion(pair["shipped"]["port"], 40)  # 40 tokens at 400 tok/s: 0.1 s
    patched = _timed_completion(pair["patched"]["port"], 40)  # at 400 / 15.85 tok/s: 1.59 s
    assert patched >= 1.4
    assert patched >= 5 * shipped, (shipped, patched)
    for name, answer in (("shipped", "no"), ("patched", "yes")):
        log = _stop(pair[name]["proc"])
        assert "FlashInfer allreduce-fusion gate patch live: %s" % answer in log, log


def _power(path):
    return float(path.read_text())


def _open_stream(port, max_tokens):
    """A streamed completion, read up to its first token, when the server is generating for sure."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/completions",
                 json.dumps({"model": "glm-5", "prompt": "x", "max_tokens": max_tokens, "ignore_eos": True,
                             "stream": True}),
                 {"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    response = conn.getresponse()
    assert response.status == 200
    while not response.readline().startswith(b"data: "):
        pass
    return conn, response


@pytest.mark.parametrize("name, load_w", [("shipped", 480.0), ("patched", 125.0)])
def test_the_power_file_holds_the_load_draw_while_generating_and_idle_otherwise(pair, name, load_w):
    server = pair[name]
    assert _power(server["power"]) == 60.0  # written at start
    conn, response = _open_stream(server["port"], 8)
    assert _power(server["power"]) == load_w
    assert response.read().rstrip().endswith(b"data: [DONE]")
    conn.close()
    # The draw goes back to idle before the last token's stream ends, so it is idle now.
    assert _power(server["power"]) == 60.0
    assert stat.S_IMODE(server["power"].stat().st_mode) == 0o644
    assert not [p for p in server["power"].parent.iterdir() if p.name.startswith(".standin-power-draw.")]


def test_the_draw_stays_up_while_any_request_is_in_flight(pair):
    server = pair["shipped"]
    long_conn, _long = _open_stream(server["port"], 4000)  # 10 s at 400 tok/s; closed long before
    status, _data = _request(server["port"], "POST", "/v1/completions",
                             {"model": "glm-5", "prompt": "x", "max_tokens": 4, "ignore_eos": True})
    assert status == 200
    assert _power(server["power"]) == 480.0
    # A client that goes away ends its request, and the draw falls back to idle.
    long_conn.close()
    deadline = time.monotonic() + 10
    while _power(server["power"]) != 60.0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _power(server["power"]) == 60.0


def test_stopping_mid_request_leaves_the_gpus_idle(pair):
    server = pair["patched"]
    conn, _response = _open_stream(server["port"], 400)
    assert _power(server["power"]) == 125.0
    server["proc"].terminate()
    assert server["proc"].wait(timeout=10) == 0
    conn.close()
    assert _power(server["power"]) == 60.0


def test_an_unwritable_power_file_is_reported_once_and_serving_goes_on(tmp_path):
    port, proc = _start(tmp_path / "model", tmp_path / "absent-dir" / "standin-power-draw", warmup="0")
    for _attempt in range(2):
        assert _request(port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})[0] == 200
    log = _stop(proc)
    assert log.count("cannot write the power draw to %s" % (tmp_path / "absent-dir" / "standin-power-draw")) == 1

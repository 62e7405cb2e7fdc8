# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-in for sglang.launch_server, and the unit's readiness check against it.

molecule/resources/standin_server/sglang_standin.py answers the HTTP SGLang
answers; the role's ExecStartPost check (files/sglang-service-wait-health.py)
must return once /health says 200 and fail when the server is gone. Both run
here as the subprocesses systemd would start.

The stand-in also plays the gates: with the FlashInfer allreduce-fusion gate's
edits in the installed SGLang (here the real 0.5.23 wheel's add_norm.py, patched
with the release data's own edits) and the fusion asked for on its command line,
generation is about 15.85 times slower (3,740 -> 236 tok/s) and the per-GPU draw
125 W instead of 480 W under load. Like the real server it finds the installed
SGLang through its own interpreter's sys.path (PYTHONPATH here).
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import socket
import stat
import statistics
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils.source_patch import render
from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases
from ansible_collections.sm120.sglang.tests.unit.sglang_wheels import sglang_wheel
from ansible_collections.sm120.sglang.tests.unit.utils import load_script

ROOT = pathlib.Path(__file__).resolve().parents[3]
STANDIN_DIR = ROOT / "molecule" / "resources" / "standin_server"
STANDIN = STANDIN_DIR / "sglang_standin.py"
WAIT = ROOT / "roles" / "sglang_service" / "files" / "sglang-service-wait-health.py"
KEY = "test-key"
FUSION_FLAG = ["--flashinfer-allreduce-fusion-backend", "auto"]


def _load_standin_gpu():
    return load_script(STANDIN_DIR / "sglang_standin_gpu.py", "sglang_standin_gpu", beside=False)


def _load_standin(name):
    """The stand-in server's module (it imports its siblings), read with the environment set now."""
    return load_script(STANDIN, name)


def _sglang_site_packages(root, patched, version="0.5.23", gate="flashinfer_allreduce_fusion"):
    """A site-packages directory with SGLang's dist-info and the gate's files, shipped or gated."""
    archive = sglang_wheel(version)
    entry = sglang_releases.gate_entry(sglang_releases.load(), gate, version)
    path = root / ("patched" if patched else "shipped")
    info = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
    (path / os.path.dirname(info)).mkdir(parents=True)
    (path / info).write_bytes(archive.read(info))
    for file_entry in entry["files"]:
        source = archive.read(file_entry["path"]).decode()
        if patched:
            source = render(source, file_entry["edits"], path=file_entry["path"])[0]
        (path / file_entry["path"]).parent.mkdir(parents=True, exist_ok=True)
        (path / file_entry["path"]).write_text(source)
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


def _start(model_dir, power_file, warmup="0.6", rate="2000", package_dir=None, flags=(), config=None, load="0",
           wait=True, env_extra=None):
    model_dir.mkdir(exist_ok=True)
    (model_dir / "config.json").write_text("{}")
    port = _free_port()
    env = dict(os.environ, SGLANG_STANDIN_TOKENS_PER_SECOND=rate, SGLANG_STANDIN_POWER_FILE=str(power_file),
               SGLANG_STANDIN_LOAD=load, **(env_extra or {}))
    env.pop("PYTHONPATH", None)
    if package_dir is not None:
        env["PYTHONPATH"] = str(package_dir)
    key = ["--config", str(config)] if config else ["--api-key", KEY]
    proc = subprocess.Popen(
        [sys.executable, str(STANDIN), "--model-path", str(model_dir), "--port", str(port), "--tp-size", "8",
         "--quantization", "modelopt_fp4", "--disable-shared-experts-fusion", "--served-model-name", "glm-5",
         "--standin-warmup", warmup] + key + list(flags),
        env=env, stderr=subprocess.PIPE, text=True)
    if wait:
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
        port, proc = _start(tmp_path / ("%s-model" % name), power, warmup="0", rate="400", package_dir=package,
                            flags=FUSION_FLAG)
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


def test_it_refuses_while_it_loads_then_answers_models_before_health_as_sglang_does(tmp_path):
    # The real 0.5.16 server: refused 55 to 135 s, then /v1/models 200 with /health 503 for 2 to 13 s, then 200.
    port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0.6", load="1.0", wait=False)
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        _wait_listening(port, proc)
        assert _request(port, "GET", "/v1/models")[0] == 200
        assert _request(port, "GET", "/health")[0] == 503
        time.sleep(0.8)
        assert _request(port, "GET", "/health")[0] == 200
    finally:
        _stop(proc)


def test_metrics_count_what_was_served_under_sglangs_names_only_when_enabled(tmp_path):
    port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0", flags=["--enable-metrics"])
    try:
        for prompt in ([11, 12, 13, 14, 15], "three words here"):
            body = {"model": "glm-5", "prompt": prompt, "max_tokens": 4, "ignore_eos": True}
            assert _request(port, "POST", "/v1/completions", body)[0] == 200
        status, data = _request(port, "GET", "/metrics", key=None)
        text = data.decode()
        labels = '{engine_type="unified",model_name="glm-5"}'
        assert status == 200
        assert "sglang:prompt_tokens_total%s 8.0" % labels in text
        assert "sglang:generation_tokens_total%s 8.0" % labels in text
        assert "sglang:num_requests_total%s 2.0" % labels in text
        assert "sglang:time_to_first_token_seconds_count%s 2.0" % labels in text
        assert 'sglang:e2e_request_latency_seconds_bucket{engine_type="unified",model_name="glm-5",le="+Inf"} 2.0' in text
        assert 'sglang:cached_tokens_total{cache_source="device",engine_type="unified",model_name="glm-5"} 0.0' in text
        # The first prompt again, then one sharing its first three tokens: 4 of 5 and 3 of 5 from the cache.
        for prompt in ([11, 12, 13, 14, 15], [11, 12, 13, 99, 98]):
            body = {"model": "glm-5", "prompt": prompt, "max_tokens": 4, "ignore_eos": True}
            assert _request(port, "POST", "/v1/completions", body)[0] == 200
        text = _request(port, "GET", "/metrics", key=None)[1].decode()
        assert 'sglang:cached_tokens_total{cache_source="device",engine_type="unified",model_name="glm-5"} 7.0' in text
        assert "sglang:prompt_tokens_total%s 18.0" % labels in text
    finally:
        _stop(proc)
    port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0")
    try:
        assert _request(port, "GET", "/metrics", key=None)[0] == 404
    finally:
        _stop(proc)


def test_two_starts_may_end_a_text_differently_but_begin_it_alike(tmp_path):
    texts = []
    for seed in ("0", "1", "0"):
        port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0",
                            env_extra={"SGLANG_STANDIN_START_SEED": seed})
        try:
            body = {"model": "glm-5", "prompt": "The capital of France is", "max_tokens": 10, "temperature": 0,
                    "ignore_eos": True}
            texts.append(json.loads(_request(port, "POST", "/v1/completions", body)[1])["choices"][0]["text"])
        finally:
            _stop(proc)
    first, other, again = (text.split(" ")[1:] for text in texts)
    assert first == again
    assert first[:6] == other[:6] and first[6:] != other[6:]


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


def test_a_server_started_with_the_cutlass_moe_runner_on_0_5_23_exits_1_with_not_implemented(tmp_path):
    package = _sglang_site_packages(tmp_path, False, version="0.5.23")
    port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0", package_dir=package, wait=False,
                        flags=("--moe-runner-backend", "cutlass"))
    proc.wait(timeout=30)
    stderr = _stop(proc)
    assert proc.returncode == 1, stderr
    assert "NotImplementedError: moe_runner_backend=cutlass is not supported for NVFP4 MoE" in stderr
    assert "SGLang 0.5.23" in stderr and port


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


# ------------------------------------------------------------------ the gates, as a real server would see them

def test_the_fusion_gate_is_live_only_with_the_edits_in_place_and_the_fusion_asked_for(tmp_path):
    gpu = _load_standin_gpu()
    shipped = str(_sglang_site_packages(tmp_path, patched=False))
    patched = str(_sglang_site_packages(tmp_path, patched=True))
    assert gpu.live_gates(None, FUSION_FLAG, {}) == {}
    assert gpu.live_gates(shipped, FUSION_FLAG, {}) == {}
    assert gpu.live_gates(patched, [], {}) == {}
    why = gpu.live_gates(patched, FUSION_FLAG, {})["flashinfer_allreduce_fusion"]
    assert "add_norm.py lets SM120 in and --flashinfer-allreduce-fusion-backend asks for it" in why


def test_the_other_gates_are_read_from_their_edits_and_from_the_environment(tmp_path):
    gpu = _load_standin_gpu()
    custom = str(_sglang_site_packages(tmp_path, patched=True, version="0.5.9", gate="custom_allreduce_pcie"))
    assert list(gpu.live_gates(custom, [], {})) == ["custom_allreduce_pcie"]
    assert list(gpu.live_gates(None, [], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"})) == ["pcie_ipc_allreduce"]


def test_the_slowdown_is_the_measured_one_and_effects_come_from_data():
    gpu = _load_standin_gpu()
    fusion = ["flashinfer_allreduce_fusion"]
    assert gpu.tokens_per_second() / gpu.tokens_per_second(fusion) == pytest.approx(3740 / 236)
    assert (gpu.load_watts(), gpu.load_watts(fusion), gpu.IDLE_W) == (480.0, 125.0, 60.0)
    chosen = gpu.effects({"SGLANG_STANDIN_EFFECTS": json.dumps({"pcie_ipc_allreduce": {"speed": 1.08}})})
    assert gpu.tokens_per_second(["pcie_ipc_allreduce"], chosen) == pytest.approx(gpu.tokens_per_second() * 1.08)
    assert gpu.load_watts(["pcie_ipc_allreduce"], chosen) == 480.0


def test_tuning_options_are_live_by_their_environment_and_flags():
    gpu = _load_standin_gpu()
    chosen = gpu.effects({"SGLANG_STANDIN_EFFECTS": json.dumps({
        "nccl_min_nchannels_8": {"speed": 1.08, "env": {"NCCL_MIN_NCHANNELS": "8"}},
        "cuda_graph_max_bs_128": {"flags": {"--cuda-graph-max-bs": 128}}})})
    argv = ["--model-path", "/m", "--cuda-graph-max-bs", "128"]
    assert sorted(gpu.live_options(chosen, argv, {"NCCL_MIN_NCHANNELS": "8"})) == [
        "cuda_graph_max_bs_128", "nccl_min_nchannels_8"]
    assert gpu.live_options(chosen, ["--cuda-graph-max-bs=64"], {"NCCL_MIN_NCHANNELS": "4"}) == {}


def test_an_effect_naming_a_release_is_live_where_that_release_is_installed():
    gpu = _load_standin_gpu()
    chosen = gpu.effects({"SGLANG_STANDIN_EFFECTS": json.dumps({"sglang_0_5_22": {"speed": 0.5, "release": "0.5.22"}})})
    assert gpu.live_releases(chosen, "0.5.22") == {"sglang_0_5_22": "SGLang 0.5.22 is installed"}
    assert gpu.live_releases(chosen, "0.5.23") == {} and gpu.live_releases(chosen, None) == {}
    # Not a tuning option: no environment or flags make it live.
    assert gpu.live_options(chosen, [], {}) == {}
    assert gpu.tokens_per_second(["sglang_0_5_22"], chosen) == pytest.approx(gpu.tokens_per_second() * 0.5)


def test_a_load_dependent_effect_helps_at_low_concurrency_and_hurts_at_high():
    gpu = _load_standin_gpu()
    chosen = {"max_running_requests_64": {"speed": 1.25, "speed_above": {"in_flight": 4, "speed": 0.7}}}
    base = gpu.tokens_per_second()
    assert gpu.tokens_per_second(["max_running_requests_64"], chosen, in_flight=2) == pytest.approx(base * 1.25)
    assert gpu.tokens_per_second(["max_running_requests_64"], chosen, in_flight=8) == pytest.approx(base * 0.7)


def test_speculative_decoding_yields_its_accept_length_at_the_measured_cost_of_a_drafting_step():
    gpu = _load_standin_gpu()
    # The real server's decode log (seventh H200 run): drafting never accepted ran at 0.39 of the plain rate with 1
    # request running, 0.27 with 16, 0.065 with 256.
    assert gpu.DRAFT_STEP_COST == ((1, 0.39), (16, 0.27), (256, 0.065))
    base = gpu.tokens_per_second()
    never_accepted = {"spec": {"flags": {"--speculative-algorithm": "STANDALONE"}, "accept_length": 1.0}}
    assert gpu.tokens_per_second(["spec"], never_accepted, in_flight=1) == pytest.approx(base * 0.39)
    assert gpu.tokens_per_second(["spec"], never_accepted, in_flight=16) == pytest.approx(base * 0.27)
    assert gpu.tokens_per_second(["spec"], never_accepted, in_flight=256) == pytest.approx(base * 0.065)
    # Between the points, a straight line over log(running): 4 is halfway from 1 to 16, 64 halfway from 16 to 256;
    # flat beyond the ends.
    assert gpu.tokens_per_second(["spec"], never_accepted, in_flight=4) == pytest.approx(base * 0.33)
    assert gpu.tokens_per_second(["spec"], never_accepted, in_flight=64) == pytest.approx(base * 0.1675)
    assert gpu.tokens_per_second(["spec"], never_accepted, in_flight=1024) == pytest.approx(base * 0.065)
    assert gpu.tokens_per_second(["spec"], never_accepted, in_flight=0) == pytest.approx(base * 0.39)
    # A head whose drafts are accepted (GLM-5's MTP: 2.19-2.80 on RTX PRO 6000) pays at low load and not at high;
    # a cheaper draft is its own cost curve.
    mtp = {"mtp": {"accept_length": 2.5, "step_cost": [[1, 0.6], [8, 0.3]]}}
    assert gpu.tokens_per_second(["mtp"], mtp, in_flight=1) == pytest.approx(base * 1.5)
    assert gpu.tokens_per_second(["mtp"], mtp, in_flight=2) == pytest.approx(base * 1.25)
    assert gpu.tokens_per_second(["mtp"], mtp, in_flight=8) == pytest.approx(base * 0.75)


def test_the_model_s_own_head_drafts_at_the_cost_measured_on_glm_5_s_architecture():
    gpu = _load_standin_gpu()
    # docs/evidence/real-sglang-glm5-arch-h100-2026-12-06.md, accept length 1.00: 1 draft step 937.6 of 1,249.2
    # output tok/s at 4 running and 6,207.8 of 8,031.8 at 64; 3 steps 687.2 of 1,250.8 at 4.
    assert gpu.MTP_STEP_COST[1] == ((4, round(937.6 / 1249.2, 3)), (64, round(6207.8 / 8031.8, 3)))
    assert gpu.MTP_STEP_COST[3] == ((4, round(687.2 / 1250.8, 3)),)
    base = gpu.tokens_per_second()

    def rate(flags, in_flight, accept=1.0):
        effect = {"mtp": {"accept_length": accept, "flags": flags}}
        return gpu.tokens_per_second(["mtp"], effect, in_flight=in_flight) / base

    one = {"--speculative-algorithm": "NEXTN", "--speculative-num-draft-tokens": 2}
    three = {"--speculative-algorithm": "NEXTN", "--speculative-num-steps": 3, "--speculative-num-draft-tokens": 4}
    assert rate(one, 4) == pytest.approx(0.751) and rate(one, 64) == pytest.approx(0.773)
    assert rate(one, 1) == pytest.approx(0.751) and rate(one, 256) == pytest.approx(0.773)
    assert rate(three, 4) == pytest.approx(0.549) and rate(three, 64) == pytest.approx(0.549)
    # 2 steps, not measured: the mean of 1 and 3.
    assert rate({"--speculative-algorithm": "NEXTN", "--speculative-num-draft-tokens": 3}, 4) == pytest.approx(0.65)
    # Accepted drafts multiply it: 3 steps at GLM-5's accept length of 2.5 on RTX PRO 6000 gain x1.37.
    assert rate(three, 64, accept=2.5) == pytest.approx(1.3725)
    # A draft model of its own, and steps not measured, keep the draft model's cost.
    own = {"--speculative-algorithm": "EAGLE", "--speculative-draft-model-path": "/m", "--speculative-num-steps": 1}
    assert rate(own, 16) == pytest.approx(0.27)
    assert rate({"--speculative-algorithm": "NEXTN", "--speculative-num-steps": 5}, 16) == pytest.approx(0.27)
    assert rate({"--speculative-algorithm": "STANDALONE", "--speculative-num-steps": 1}, 16) == pytest.approx(0.27)


def test_a_first_token_hold_delays_the_first_token_and_not_the_end_of_the_request():
    gpu = _load_standin_gpu()
    # --num-continuous-decode-steps: decode steps run on while a new request waits for its prefill.
    effects = {"steps": {"speed": 1.3, "first_token_hold_ms": 115}, "other": {"first_token_hold_ms": 40},
               "plain": {"speed": 1.1}}
    assert gpu.first_token_hold_s(["steps", "other", "plain"], effects) == pytest.approx(0.115)
    assert gpu.first_token_hold_s(["other"], effects) == pytest.approx(0.04)
    assert gpu.first_token_hold_s(["plain"], effects) == 0.0 and gpu.first_token_hold_s([], effects) == 0.0
    # 16 tokens at 130 tok/s from t = 100 s: the first due at 100.115 s instead of 100.0077 s, the second right
    # after it (it was due at 100.0154 s), the 16th on its pace at 100.123 s, as without the hold.
    interval = 1.0 / 130
    assert gpu.first_token_due(100.0, 0, interval, 0.115) == pytest.approx(100.115)
    assert gpu.first_token_due(100.0, 1, interval, 0.115) == pytest.approx(100.0 + 2.0 / 130)
    assert gpu.first_token_due(100.0, 15, interval, 0.115) == pytest.approx(100.0 + 16.0 / 130)
    assert gpu.first_token_due(100.0, 0, interval, 0.0) == pytest.approx(100.0 + 1.0 / 130)


def test_the_cutlass_moe_runner_raises_at_start_up_on_nvfp4_from_0_5_16_as_the_real_server_does():
    gpu = _load_standin_gpu()
    argv = ["--quantization", "modelopt_fp4", "--moe-runner-backend", "cutlass"]
    live = gpu.live_options(gpu.effects({}), argv, {})
    assert "moe_runner_cutlass" in live
    assert gpu.start_error(live, gpu.effects({}), "0.5.16") == (
        "NotImplementedError: moe_runner_backend=cutlass is not supported for NVFP4 MoE (moe_runner_cutlass on SGLang "
        "0.5.16)")
    assert gpu.start_error(live, gpu.effects({}), "0.5.23") is not None
    # The release before, and no release to judge: it starts.
    assert gpu.start_error(live, gpu.effects({}), "0.5.15.post1") is None
    assert gpu.start_error(live, gpu.effects({}), None) is None
    # FlashInfer's CUTLASS runner, the profile's, or cutlass on another quantization: not the raising backend.
    flashinfer = gpu.live_options(gpu.effects({}), ["--quantization", "modelopt_fp4", "--moe-runner-backend",
                                                    "flashinfer_cutlass"], {})
    assert "moe_runner_cutlass" not in flashinfer
    assert "moe_runner_cutlass" not in gpu.live_options(gpu.effects({}), ["--moe-runner-backend", "cutlass"], {})


def test_the_cutlass_moe_runner_before_0_5_16_differs_by_the_requests_running():
    gpu = _load_standin_gpu()
    argv = ["--quantization", "modelopt_fp4", "--moe-runner-backend", "cutlass"]
    live = gpu.live_options(gpu.effects({}), argv, {})
    assert gpu.start_error(live, gpu.effects({}), "0.5.15") is None

    def factor(in_flight):
        return gpu.tokens_per_second(live, gpu.effects({}), in_flight) / gpu.tokens_per_second([], {}, in_flight)

    # The published shape (sglang pull 31470): 23 % slower at 32 running, 11 % at 128, even at 1,024; flat beyond.
    assert factor(1) == factor(32) == pytest.approx(1 / 1.23)
    assert factor(128) == pytest.approx(1 / 1.11) and factor(1024) == factor(4096) == pytest.approx(1.0)
    assert factor(32) < factor(64) < factor(128) < factor(512) < 1.0


def test_noise_spreads_the_rate_and_wrong_output_garbles_the_text():
    import random
    gpu = _load_standin_gpu()
    rates = [gpu.tokens_per_second([], {}, 1, 0.05, random.Random(seed)) for seed in range(200)]
    spread = (sum((rate / 400 - 1) ** 2 for rate in rates) / len(rates)) ** 0.5
    assert 0.03 < spread < 0.07
    assert gpu.wrong_output(["kv_fp8"], {"kv_fp8": {"wrong_output": True}})
    assert not gpu.wrong_output(["kv_fp8"], {"kv_fp8": {"speed": 2}})


def test_the_same_prompt_gets_the_same_text_and_another_prompt_another(tmp_path):
    port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0")
    try:
        def text(prompt):
            body = {"model": "glm-5", "prompt": prompt, "max_tokens": 6, "temperature": 0, "ignore_eos": True}
            status, data = _request(port, "POST", "/v1/completions", body)
            assert status == 200
            return json.loads(data)["choices"][0]["text"]
        assert text("The capital of France is") == text("The capital of France is")
        assert text("The capital of France is") != text("Two plus two is")
    finally:
        _stop(proc)


def test_the_api_key_comes_from_the_config_file_as_sglang_reads_it(tmp_path):
    config = tmp_path / "glm-5-nvfp4.yaml"
    config.write_text(json.dumps({"api-key": KEY}))
    port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0", config=config)
    try:
        assert _request(port, "GET", "/v1/models", key=None)[0] == 401
        assert _request(port, "GET", "/v1/models")[0] == 200
    finally:
        _stop(proc)


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
    for name, answer in (("shipped", "live gates: none"), ("patched", "live gates: flashinfer_allreduce_fusion (")):
        log = _stop(pair[name]["proc"])
        assert answer in log, log


def _power(path):
    return float(path.read_text().split()[0])


def _util(path):
    """The file's second number: the utilisation the nvidia-smi stand-in reports."""
    return float(path.read_text().split()[1])


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


@pytest.mark.parametrize("name, load_w, util", [("shipped", 480.0, 96.0), ("patched", 125.0, 100.0)])
def test_the_power_file_holds_the_load_draw_while_generating_and_idle_otherwise(pair, name, load_w, util):
    server = pair[name]
    assert _power(server["power"]) == 60.0 and _util(server["power"]) == 0.0  # written at start
    conn, response = _open_stream(server["port"], 8)
    # The fusion's collapse draws little with busy SMs: a spin-wait, not an idle GPU.
    assert (_power(server["power"]), _util(server["power"])) == (load_w, util)
    assert response.read().rstrip().endswith(b"data: [DONE]")
    conn.close()
    # The draw goes back to idle before the last token's stream ends, so it is idle now.
    assert (_power(server["power"]), _util(server["power"])) == (60.0, 0.0)
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


def test_a_cold_start_slows_the_first_requests_as_measured_on_the_real_server(tmp_path, monkeypatch):
    gpu = _load_standin_gpu()
    assert [gpu.cold_factor(before, 12, 0.82) for before in (0, 11, 12, 40)] == [0.82, 0.82, 1.0, 1.0]
    assert gpu.cold_factor(0, 0, 0.82) == 1.0
    monkeypatch.setenv("SGLANG_STANDIN_TOKENS_PER_SECOND", "400")
    module = _load_standin("sglang_standin_cold")
    args = module.argparse.Namespace(served_model_name="glm-5", model_path=str(tmp_path), api_key=None,
                                     context_length=None, enable_metrics=False)
    assert [module.Standin(args, power_file=str(tmp_path / "power")).request_rate() for _start in range(3)] == [400.0] * 3
    monkeypatch.setenv("SGLANG_STANDIN_COLD_REQUESTS", "2")
    standin = module.Standin(args, power_file=str(tmp_path / "power"))
    assert [standin.request_rate() for _request in range(4)] == [pytest.approx(328.0)] * 2 + [400.0] * 2


def test_the_prefix_cache_counts_what_a_radix_cache_would_serve_and_forgets_when_full(monkeypatch):
    module = _load_standin("sglang_standin_cache")
    cache = module.PrefixCache(capacity=10)
    assert cache.served([1, 2, 3, 4]) == 0
    # A repeat: all but the last token, as the real server counted 255 of a repeated 256-token prompt.
    assert cache.served([1, 2, 3, 4]) == 3
    assert cache.served([1, 2, 9]) == 2
    assert cache.served([1, 2, 9, 10]) == 3
    # The same ids shifted by one share no prefix (bench_serving's random-ids prompts differ so).
    assert cache.served([2, 3, 4, 5]) == 0
    assert cache.size == 10
    # Past its capacity the whole cache is forgotten, and the prompt is held alone.
    assert cache.served([7, 8]) == 0
    assert cache.size == 2
    assert cache.served([1, 2, 3, 4]) == 0
    assert cache.served([7]) == 0


def test_server_info_reports_the_accept_length_once_speculative_decoding_has_served(tmp_path):
    mtp = {"mtp_nextn_3_4": {"flags": {"--speculative-algorithm": "NEXTN"}, "accept_length": 3.2}}
    port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0",
                        flags=["--speculative-algorithm", "NEXTN"],
                        env_extra={"SGLANG_STANDIN_EFFECTS": json.dumps(mtp)})
    try:
        assert _request(port, "GET", "/server_info", key=None)[0] == 401
        status, data = _request(port, "GET", "/server_info")
        info = json.loads(data)
        assert status == 200 and info["speculative_algorithm"] == "NEXTN"
        # As SGLang's scheduler: no accept length before a speculative step has run.
        assert "avg_spec_accept_length" not in info["internal_states"][0]
        body = {"model": "glm-5", "prompt": [11, 12, 13], "max_tokens": 4, "ignore_eos": True}
        assert _request(port, "POST", "/v1/completions", body)[0] == 200
        info = json.loads(_request(port, "GET", "/server_info")[1])
        assert info["internal_states"][0]["avg_spec_accept_length"] == 3.2
    finally:
        _stop(proc)
    # The same effect without the flag that makes it live: no speculative decoding, no accept length.
    port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0",
                        env_extra={"SGLANG_STANDIN_EFFECTS": json.dumps(mtp)})
    try:
        body = {"model": "glm-5", "prompt": [11, 12, 13], "max_tokens": 4, "ignore_eos": True}
        assert _request(port, "POST", "/v1/completions", body)[0] == 200
        info = json.loads(_request(port, "GET", "/server_info")[1])
        assert info["speculative_algorithm"] is None
        assert "avg_spec_accept_length" not in info["internal_states"][0]
    finally:
        _stop(proc)


def test_a_power_limit_below_the_knee_slows_the_server_as_a_card_does(tmp_path, monkeypatch):
    gpu = _load_standin_gpu()
    assert gpu.power_limit_w(str(tmp_path / "none")) is None
    for index, watts in enumerate(("600.00", "300.00")):
        (tmp_path / ("power-limit-%d" % index)).write_text(watts + "\n")
    (tmp_path / "power-limit-2").write_text("garbage\n")
    assert gpu.power_limit_w(str(tmp_path)) == 300.0
    assert [gpu.power_factor(limit, 450.0) for limit in (600.0, 450.0, None)] == [1.0, 1.0, 1.0]
    assert gpu.power_factor(225.0, 450.0) == pytest.approx(0.125)
    assert gpu.power_factor(225.0, 0) == 1.0
    monkeypatch.setattr(gpu, "power_limit_w", lambda state_dir=str(tmp_path): 300.0)
    monkeypatch.setenv("SGLANG_STANDIN_TOKENS_PER_SECOND", "400")
    monkeypatch.delenv("SGLANG_STANDIN_POWER_KNEE_W", raising=False)
    assert gpu.tokens_per_second() == 400.0
    monkeypatch.setenv("SGLANG_STANDIN_POWER_KNEE_W", "400")
    assert gpu.tokens_per_second() == pytest.approx(400.0 * (300 / 400) ** 3)


def _most_running(port, requests, max_tokens=40):
    """Send ``requests`` completions at once; the most /metrics counted decoding at once while they ran, and
    whether every one answered 200."""
    statuses, most = [], 0

    def send():
        body = {"model": "glm-5", "prompt": [11, 12, 13], "max_tokens": max_tokens, "ignore_eos": True}
        statuses.append(_request(port, "POST", "/v1/completions", body)[0])

    threads = [threading.Thread(target=send) for _request_number in range(requests)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        text = _request(port, "GET", "/metrics", key=None)[1].decode()
        running = [line for line in text.splitlines() if line.startswith("sglang:num_running_reqs{")]
        most = max(most, float(running[0].rsplit(" ", 1)[1]))
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    return most, statuses


@pytest.mark.parametrize("flags, expected_info, capped", [
    # SGLang 0.5.16 resets an unset --max-running-requests to 48 for speculative decoding.
    (["--speculative-algorithm", "NEXTN"], 48, True),
    # Set explicitly, as the mtp option's max_running_requests: highest_load does, the 48 is not applied.
    (["--speculative-algorithm", "NEXTN", "--max-running-requests", "64"], 64, False),
    # Without speculative decoding the real 0.5.16 server left it null in /server_info.
    ([], None, False),
])
def test_speculative_decoding_caps_the_running_requests_at_48_unless_they_are_set(tmp_path, flags, expected_info,
                                                                                  capped):
    # 40 tokens at 40 tok/s: each request decodes for about a second, so 56 sent at once overlap.
    port, proc = _start(tmp_path / "model", tmp_path / "power", warmup="0", rate="40",
                        flags=["--enable-metrics"] + flags)
    try:
        info = json.loads(_request(port, "GET", "/server_info")[1])
        assert info["max_running_requests"] == expected_info
        most, statuses = _most_running(port, 56)
        assert statuses == [200] * 56
        if capped:
            assert 40 <= most <= 48
        else:
            assert most > 48
    finally:
        _stop(proc)


def test_the_real_noise_s_shape_size_by_load_shared_by_a_period_and_drift_between_starts(tmp_path, monkeypatch):
    gpu = _load_standin_gpu()
    # Its size by load: the coefficient of variation measured on the H100, at the loads measured and between them.
    draws = {running: [gpu.shared_noise(gpu.H100_RUN_NOISE, running, period * 5.0, 5.0, "seed")
                       for period in range(4000)] for running in (1, 64, 256)}
    for running, cv in ((1, 0.006), (64, 0.045), (256, 0.106)):
        values = draws[running]
        assert statistics.stdev(values) / statistics.mean(values) == pytest.approx(cv, rel=0.1)
    # One draw a period, shared by every request of it whatever its load (a whole run swings, not each request).
    first, last = (gpu.shared_noise(gpu.H100_RUN_NOISE, 256, now, 5.0, "s") for now in (10.0, 14.9))
    assert first == last
    low, high = (gpu.shared_noise(gpu.H100_RUN_NOISE, n, 10.0, 5.0, "s") - 1 for n in (16, 256))
    assert low * high > 0 and abs(high) == pytest.approx(abs(low) * 0.106 / 0.008)
    # In the server: "h100" picks the measured shape, and a start drift draws one factor a start.
    monkeypatch.setenv("SGLANG_STANDIN_TOKENS_PER_SECOND", "400")
    monkeypatch.setenv("SGLANG_STANDIN_RUN_NOISE", "h100")
    monkeypatch.setenv("SGLANG_STANDIN_START_DRIFT", "0.05")
    module = _load_standin("sglang_standin_noise")
    args = module.argparse.Namespace(served_model_name="glm-5", model_path=str(tmp_path), api_key=None,
                                     context_length=None, enable_metrics=False)
    starts = [module.Standin(args, power_file=str(tmp_path / "power")) for _start in range(200)]
    assert all(standin.run_noise == gpu.H100_RUN_NOISE for standin in starts)
    factors = [standin.start_factor for standin in starts]
    assert statistics.stdev(factors) == pytest.approx(0.05, rel=0.25)
    rates = [standin.tokens_per_second(1) for standin in starts]
    assert min(rates) < 400 < max(rates)

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/real_gpu/decode_log.py: SGLang's decode log split by server start, on lines written as SGLang 0.5.16
writes them (copied from the seventh real-GPU run's server.log, numbers changed to round ones)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "real_gpu" / "decode_log.py"
spec = importlib.util.spec_from_file_location("decode_log", SCRIPT)
decode_log = importlib.util.module_from_spec(spec)
spec.loader.exec_module(decode_log)

ARGS_OFF = ("[2026-12-04 10:22:16] server_args=ServerArgs(model_path='/m', max_running_requests=None, "
            "speculative_algorithm=None, speculative_draft_model_path=None, speculative_num_steps=None, "
            "speculative_eagle_topk=None, speculative_num_draft_tokens=None, ep_size=1)")
ARGS_ON = ("[2026-12-04 10:26:28] server_args=ServerArgs(model_path='/m', max_running_requests=256, "
           "speculative_algorithm='STANDALONE', speculative_draft_model_path='/d', speculative_num_steps=3, "
           "speculative_eagle_topk=1, speculative_num_draft_tokens=4, ep_size=1)")


def pool(cap):
    return (f"[2026-12-04 10:23:13] max_total_num_tokens=3780435, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests={cap}, context_len=4096, available_gpu_mem=11.50 GB")


def off(running, tput):
    return (f"[2026-12-04 10:24:01] Decode batch, #running-req: {running}, #token: 900, token usage: 0.00, "
            f"cuda graph: True, gen throughput (token/s): {tput}, #queue-req: 0")


def on(running, tput, accept="1.00"):
    return (f"[2026-12-04 10:29:25] Decode batch, #running-req: {running}, #token: 69887, token usage: 0.03, "
            f"accept len: {accept}, accept rate: 0.00, cuda graph: True, gen throughput (token/s): {tput}, #queue-req: 0")


LOG = "\n".join([
    "noise before any start",
    off(1, 999.0),  # before the first start: not counted
    "-- systemd-standin: starting sglang-x.service: /p -m sglang.launch_server --model-path /m",
    ARGS_OFF, pool(4096), off(1, 250.0), off(1, 260.0), off(1, 240.0), off(256, 30000.0), off(3, 700.0),
    "-- systemd-standin: starting sglang-x.service: /p -m sglang.launch_server --model-path /m --mem-fraction-static 0.01",
    ARGS_OFF, "ValueError: Loaded weights leave no GPU memory for the KV cache",
    "-- systemd-standin: starting sglang-x.service: /p -m sglang.launch_server --max-running-requests 256",
    ARGS_ON, pool(256), on(1, 100.0), on(1, 110.0, "1.50"), on(256, 3000.0), on(256, 1500.0),
])


def test_each_start_is_named_by_what_sglang_took_and_measured_alone():
    starts = decode_log.summarize(LOG, [1, 16, 256])
    assert [s["label"] for s in starts] == [
        "spec off, max_running_requests 4096",
        "spec off, never served (no memory pool line)",
        "STANDALONE, 4 draft tokens, max_running_requests 256",
    ]
    assert [s["argv_has_max_running"] for s in starts] == [False, False, True]
    assert starts[0]["by_running"] == {
        1: {"lines": 3, "median_gen_tput": 250.0, "median_accept": None, "ratio_to_first": 1.0},
        256: {"lines": 1, "median_gen_tput": 30000.0, "median_accept": None, "ratio_to_first": 1.0},
    }
    assert starts[1]["by_running"] == {}
    assert starts[2]["by_running"] == {
        1: {"lines": 2, "median_gen_tput": 105.0, "median_accept": 1.25, "ratio_to_first": 0.42},
        256: {"lines": 2, "median_gen_tput": 2250.0, "median_accept": 1.0, "ratio_to_first": 0.075},
    }


def test_the_command_prints_the_table_and_refuses_what_is_not_a_server_log(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text(LOG)
    assert decode_log.main([str(log), "--running", "1,256", "--json", str(tmp_path / "out.json")]) == 0
    out = capsys.readouterr().out
    assert "| 3. STANDALONE, 4 draft tokens, max_running_requests 256 | 256 | 2 | 2,250.0 | 1.00 | 0.07 |" in out
    assert "| 2. spec off, never served (no memory pool line) | – | 0 | – | – | – |" in out
    assert (tmp_path / "out.json").is_file()
    other = tmp_path / "other.log"
    other.write_text(off(1, 5.0))
    with pytest.raises(SystemExit):
        decode_log.main([str(other)])
    assert "not a harness server log" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        decode_log.main([str(log), "--running", "1,x"])
    assert "--running takes integers" in capsys.readouterr().err

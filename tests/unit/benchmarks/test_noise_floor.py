# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/noise_floor.py: the steady window and the ways of counting a run, on runs whose answer is known."""

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.sm120.sglang.tests.unit.utils import load_script

ROOT = pathlib.Path(__file__).resolve().parents[3]
BENCHMARKS = ROOT / "benchmarks"


def _noise_floor():
    return load_script(BENCHMARKS / "noise_floor.py", "noise_floor")  # it imports its sibling h200_power_sampling.py


def _two_waves():
    """A closed loop of 2 at a time, 4 requests of 10 tokens, 1 token every 100 ms after a 300 ms prefill: requests
    0 and 1 stream 0.3 to 1.3 s; 2 and 3 start at 1.3 s and stream 1.6 to 2.6 s."""
    requests = [[0, 300, 1300, 10], [0, 300, 1300, 10], [1300, 1600, 2600, 10], [1300, 1600, 2600, 10]]
    bins = [0.0] * 27
    for _start, first, _end, tokens in requests:
        for index in range(tokens):
            bins[int(first / 100) + index] += 1
    return {"concurrency": 2, "requests": requests, "tokens_by_100ms": bins, "output_tokens_per_s": 40 / 2.6,
            "duration_s": 2.6, "began": 0.0, "ended": 2.7, "server": {"generation_tokens": 54}}


def test_the_steady_window_runs_from_the_first_moment_the_load_streams_to_the_last():
    floor = _noise_floor()
    run = _two_waves()
    assert floor.steady_window(run["requests"], 2) == (0.3, 2.6)
    # A load above the requests of the run is its requests.
    assert floor.steady_window(run["requests"][:1], 8) == (0.3, 1.3)
    # Never all streaming at once: no window.
    assert floor.steady_window([[0, 100, 200, 1], [300, 400, 500, 1]], 2) is None


def test_each_way_of_counting_one_run():
    floor = _noise_floor()
    found = floor.ways(_two_waves())
    assert found["whole"] == pytest.approx(40 / 2.6)
    # The second wave's prefill (1.3 to 1.6 s) stays in the window; the first wave's (0 to 0.3 s) does not.
    assert found["steady"] == pytest.approx(40 / 2.3)
    assert found["left_out"] == pytest.approx(0.3 / 2.6)
    assert found["server"] == pytest.approx(54 / 2.7)


def test_a_constant_run_is_never_called_a_change_and_a_ten_per_cent_change_is(tmp_path, capsys):
    floor = _noise_floor()
    rows = []
    for start in (1, 2):
        for number in range(3):
            run = _two_waves()
            rows.append(dict(run, start=start, round=number, position=0, load="c2", began=start * 100.0 + number))
    path = tmp_path / "noise.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert floor.main([str(path), "--k", "2"]) == 0
    printed = capsys.readouterr().out
    # Three runs a start hold no two disjoint pairs: every A/A pair is across the starts.
    assert "| c2 | whole | 0 / 18 | - / 0 (0 %) | ±3.0 % | 100 % | 100 % | 100 % | 100 % |" in printed
    # With a run budget, runs drawn as these were (no spread): none added, none called a change, every change seen.
    assert "| c2 | within | 0.0 % | 0.0 % | 100 % / 100 % / 100 % / 100 % | 2.0, 2 |" in printed
    assert "| c2 | across | 0.0 % | 0.0 % | 100 % / 100 % / 100 % / 100 % | 2.0, 2 |" in printed

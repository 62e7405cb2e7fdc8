# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The smoke test's measurement (tasks_from: measure) with a run budget, by a real ansible-playbook (local
connection) against the molecule stand-in of SGLang (molecule/resources/standin_server/sglang_standin.py: the real
server needs a GPU and a model): a load whose runs spread gets the runs more its noise needs for the resolution
goal, a quiet one keeps its repeats, and without a budget every load keeps its repeats.

The spread is the stand-in's cold start, not chance: its first 16 requests after a start run at 0.7 of the rate
(SGLANG_STANDIN_COLD_REQUESTS, the real server's first run after a start was 17 to 20 % slow), so with no warm-up
the first run of the load "noisy" (the loop's first) is 30 % slower than its second: a run-to-run CV of about 25 %,
which at a goal of 50 % needs about 6 runs a side (noise_band.runs_needed)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAYBOOK = """
- name: Measure the stand-in as the experiments role asks the smoke test to
  hosts: gpu_hosts
  gather_facts: false
  tasks:
    - name: Measure the configuration the server runs
      ansible.builtin.include_role:
        name: sm120.sglang.smoke_test
        tasks_from: measure
    - name: Write the runs of each load
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ smoke_test_measured.loads | to_json }}"
        mode: "0644"
"""


def _measure(tmp_path, url, budget_s):
    out = tmp_path / ("runs-%s.json" % budget_s)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"gpu_hosts": {"hosts": {"gpu1": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "out": str(out),
        "smoke_test_url": url, "smoke_test_model": "m", "smoke_test_repeats": 2, "smoke_test_num_warmup": 0,
        "smoke_test_warmup_runs": 0, "smoke_test_run_budget_s": budget_s,
        "smoke_test_from_experiments": {"comparison": {"resolution": 0.5}},
        "smoke_test_parity_prompts": [], "smoke_test_measure_config": [], "smoke_test_measure_label": "test",
        "smoke_test_state": {"configs": {}}, "__smoke_test_measurements": [],
        "smoke_test_loads": {"noisy": {"concurrency": 4, "num_requests": 16, "input_tokens": 16, "output_tokens": 16},
                             "quiet": {"concurrency": 1, "num_requests": 4, "input_tokens": 16, "output_tokens": 16}},
    }}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    done = subprocess.run([sys.executable, str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i",
                           str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return {load: [run["output_tokens_per_s"] for run in runs] for load, runs in json.loads(out.read_text()).items()}


def test_a_noisy_load_gets_the_runs_its_noise_needs_and_a_quiet_one_keeps_its_repeats(tmp_path, standin):
    runs = _measure(tmp_path, standin, 60)
    assert len(runs["quiet"]) == 2, runs
    # The cold first run is the slowest; the runs added after it are warm.
    assert len(runs["noisy"]) > 2 and runs["noisy"][0] < 0.85 * min(runs["noisy"][1:]), runs


def test_without_a_budget_every_load_keeps_its_repeats(tmp_path, standin):
    runs = _measure(tmp_path, standin, 0)
    assert len(runs["quiet"]) == 2 and len(runs["noisy"]) == 2, runs

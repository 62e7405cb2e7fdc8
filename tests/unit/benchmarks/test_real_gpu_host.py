# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-GPU harness's decisions (benchmarks/real_gpu/host.py) that need no GPU."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
HARNESS = ROOT / "benchmarks" / "real_gpu"


def _host():
    sys.path.insert(0, str(HARNESS))  # host.py imports its sibling summarize.py
    try:
        spec = importlib.util.spec_from_file_location("real_gpu_host", HARNESS / "host.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(HARNESS))


# The smoke test's message as ansible-playbook printed it for the spec-unset start (plugin_utils/experiments.py).
CAPPED_LOG = ("fatal: [h200]: FAILED! => {\"msg\": \"h200: The server ran fewer requests at once than the load asks: "
              "load c64 runs 64 requests at once, the server at most 48 (max_running_requests of its /server_info)\"}")


def test_a_speculative_start_with_the_bound_unset_failing_on_the_cap_is_its_finding():
    host = _host()
    starts = dict(host.SPECULATIVE_STARTS)
    assert host.cap_is_the_finding(starts["spec-unset"], CAPPED_LOG) is True
    # The same failure where the bound was given, or for a start that does not draft, is a failure.
    assert host.cap_is_the_finding(starts["spec-256"], CAPPED_LOG) is False
    assert host.cap_is_the_finding(starts["steps-4"], CAPPED_LOG) is False
    # Another failure of the unset start (a server that did not come up) is a failure.
    assert host.cap_is_the_finding(starts["spec-unset"], "fatal: [h200]: FAILED! => the server exited") is False


def test_the_tuning_the_experiments_phase_adds_is_checked_against_the_data_before_any_device_time(monkeypatch, capsys):
    monkeypatch.setenv("SM120_REAL_TUNING", "continuous_decode_steps_2,continuous_decode_steps_4,nccl_fast")
    host = _host()
    assert host.TUNING == ["continuous_decode_steps_2", "continuous_decode_steps_4", "nccl_fast"]
    assert {"continuous_decode_steps_2", "continuous_decode_steps_8", "mtp_nextn_1_2"} <= host.tuning_options()
    try:
        host.main(["go", "--only", "experiments"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("an unknown tuning option was not refused")
    assert "SM120_REAL_TUNING names nccl_fast, not a tuning option of data/experiments.yml" in capsys.readouterr().err
    monkeypatch.delenv("SM120_REAL_TUNING")
    assert _host().TUNING == ["cuda_graph_max_bs_128", "max_running_requests_64"]

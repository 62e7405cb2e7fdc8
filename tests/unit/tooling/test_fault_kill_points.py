# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/faults/controller_kill.py --while-out draws its kill points where a host was out of the router."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _controller_kill():
    spec = importlib.util.spec_from_file_location("controller_kill", ROOT / "tests" / "faults" / "controller_kill.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A rollout of two batches as ansible-playbook prints it: each host drained (through the router host), restarted
# and measured, then restored.
ROLLOUT = """PLAY [Deploy, batch by batch] ***
TASK [sm120.sglang.sglang_service : Write the environment file] ***
changed: [gpu-1]
TASK [sm120.sglang.sglang_router : Remove the worker from the router] ***
changed: [gpu-1 -> router-1]
TASK [sm120.sglang.sglang_service : Restart the server] ***
changed: [gpu-1]
TASK [sm120.sglang.smoke_test : Drive the server at every load] ***
ok: [gpu-1]
TASK [sm120.sglang.sglang_router : Add the worker to the router] ***
changed: [gpu-1 -> router-1]
TASK [sm120.sglang.sglang_service : Write the environment file] ***
changed: [gpu-2]
TASK [sm120.sglang.sglang_router : Remove the worker from the router] ***
ok: [gpu-2 -> router-1]
TASK [sm120.sglang.sglang_service : Restart the server] ***
changed: [gpu-2]
TASK [sm120.sglang.sglang_router : Add the worker to the router] ***
changed: [gpu-2 -> router-1]
TASK [Give this run's deploy lock back] ***
ok: [gpu-2]
"""


def test_the_kill_points_are_the_tasks_begun_with_a_host_out_of_the_router():
    # Tasks 3 to 5 for gpu-1 (its restart, its smoke test, its restore) and 8 to 9 for gpu-2.
    assert _controller_kill().out_of_router_tasks(ROLLOUT) == [3, 4, 5, 8, 9]


def test_a_rollout_without_routers_has_none():
    assert _controller_kill().out_of_router_tasks("TASK [a] ***\nok: [gpu-1]\nTASK [b] ***\nok: [gpu-1]\n") == []

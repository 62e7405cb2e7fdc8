# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deploy lock's steps on a host, on a real filesystem."""

from __future__ import annotations

import json
import os

from ansible_collections.sm120.sglang.plugins.module_utils import deploy_lock as lock
from ansible_collections.sm120.sglang.plugins.modules import deploy_lock as module

A = {"run_id": "a-1-100", "controller": "a", "pid": 1, "started": 100}
B = {"run_id": "b-2-200", "controller": "b", "pid": 2, "started": 200}


def owner_at(path):
    with open(os.path.join(path, "owner.json")) as handle:
        return json.load(handle)


def test_a_free_lock_is_taken_with_its_parents_and_a_held_one_is_not_touched(tmp_path):
    path = str(tmp_path / "state" / "deploy.lock")
    assert lock.take(path, A) == {"taken": True, "changed": True, "holder": None, "replaced": None}
    assert owner_at(path) == A and oct(os.stat(path).st_mode & 0o777) == "0o700"
    assert lock.take(path, A) == {"taken": True, "changed": False, "holder": A, "replaced": None}
    assert lock.take(path, B) == {"taken": False, "changed": False, "holder": A, "replaced": None}
    assert owner_at(path) == A


def test_a_stale_holder_is_replaced_only_by_its_run_id(tmp_path):
    path = str(tmp_path / "deploy.lock")
    lock.take(path, A)
    assert lock.take(path, B, replace="someone-else")["taken"] is False and owner_at(path) == A
    assert lock.take(path, B, replace="a-1-100") == {"taken": True, "changed": True, "holder": A, "replaced": A}
    assert owner_at(path) == B and sorted(os.listdir(tmp_path)) == ["deploy.lock"]


def test_a_lock_without_a_readable_owner_is_reported_malformed_and_can_be_replaced(tmp_path):
    path = tmp_path / "deploy.lock"
    path.mkdir()
    holder = lock.take(str(path), A)["holder"]
    assert holder["run_id"] == "malformed" and "has no readable owner.json" in holder["problem"]
    assert lock.take(str(path), A, replace="malformed")["taken"] is True and owner_at(str(path)) == A


def test_only_the_holder_gives_the_lock_back(tmp_path):
    path = str(tmp_path / "deploy.lock")
    lock.take(path, A)
    assert lock.release(path, "b-2-200") == {"released": False, "changed": False, "holder": A}
    assert lock.release(path, "a-1-100") == {"released": True, "changed": True, "holder": A}
    assert not os.path.exists(path)
    assert lock.release(path, "a-1-100") == {"released": False, "changed": False, "holder": None}


def test_check_mode_writes_nothing(tmp_path):
    path = str(tmp_path / "deploy.lock")
    assert lock.take(path, A, check_mode=True)["taken"] is True and not os.path.exists(path)
    lock.take(path, A)
    assert lock.take(path, B, replace="a-1-100", check_mode=True)["taken"] is True and owner_at(path) == A
    assert lock.release(path, "a-1-100", check_mode=True)["released"] is True and owner_at(path) == A


def test_the_module_takes_and_gives_back_and_names_a_missing_run_id(run_module, tmp_path):
    path = str(tmp_path / "deploy.lock")
    assert run_module(module.main, {"path": path, "owner": A})["taken"] is True
    assert run_module(module.main, {"path": path, "owner": B})["holder"] == A
    assert run_module(module.main, {"path": path, "state": "absent", "run_id": "a-1-100"})["released"] is True
    from ansible_collections.sm120.sglang.tests.unit.utils import ModuleFail
    try:
        run_module(module.main, {"path": path, "owner": {"controller": "x"}})
    except ModuleFail as failed:
        assert "owner needs a run_id" in failed.result["msg"]
    else:
        raise AssertionError("an owner without a run_id was accepted")

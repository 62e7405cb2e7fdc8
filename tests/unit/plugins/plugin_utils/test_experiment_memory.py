# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host records as turned off: the record and this run's rejections merged in one place."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_memory
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import ExperimentError

OLD = {"reason": "smoke test R1: rejected, -90 %", "rejected_at": "2026-12-01T00:00:00Z", "run_id": "R1"}
NEW = {"reason": "smoke test R2: no gain, +0.4 %", "rejected_at": "2026-12-05T00:00:00Z", "run_id": "R2"}


def test_this_run_s_rejections_are_added_to_the_record_and_replace_an_entry_of_the_same_name():
    recorded = {"flashinfer_allreduce_fusion": OLD, "nccl_min_nchannels_8": OLD}
    record = experiment_memory.rejected_record(recorded, {"nccl_min_nchannels_8": NEW, "pcie_ipc_allreduce": NEW}, False)
    assert record == {"flashinfer_allreduce_fusion": OLD, "nccl_min_nchannels_8": NEW, "pcie_ipc_allreduce": NEW}
    assert recorded == {"flashinfer_allreduce_fusion": OLD, "nccl_min_nchannels_8": OLD}, "the record read is not changed"


def test_a_retry_forgets_the_record_and_keeps_what_this_run_rejected():
    recorded = {"flashinfer_allreduce_fusion": OLD}
    assert experiment_memory.rejected_record(recorded, {}, True) == {}
    assert experiment_memory.rejected_record(recorded, {"pcie_ipc_allreduce": NEW}, True) == {"pcie_ipc_allreduce": NEW}


@pytest.mark.parametrize("recorded, now", [({}, {}), (None, None), (None, {})])
def test_no_record_and_no_rejection_leave_nothing_to_record(recorded, now):
    assert experiment_memory.rejected_record(recorded, now, False) == {}


@pytest.mark.parametrize("recorded, now, retry, message", [
    ({}, {}, "false", "true or false, got 'false'"),
    ({}, {}, None, "true or false, got None"),
    (["flashinfer_allreduce_fusion"], {}, False, "the record of rejected experiments maps each name"),
    ({}, ["flashinfer_allreduce_fusion"], False, "this run's rejections maps each name"),
])
def test_what_is_not_a_record_or_a_boolean_is_refused_naming_it(recorded, now, retry, message):
    with pytest.raises(ExperimentError, match=message.replace("(", r"\(")):
        experiment_memory.rejected_record(recorded, now, retry)

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Experiments: each new gate or tuning option decided alone, by repeated measurement at several loads. Pure.

Each job has its module, and this one names them all for the callers that import from here:

- experiment_settings: the decisions and per-load verdicts, the checked settings, the key of a configuration;
- experiment_compare: two measurements compared per load (the band of noise_band.py, what a verdict could see),
  parity, the latency objective, the server"s own bound on running requests;
- experiment_verdicts: one experiment"s verdict, and those given without measuring (untried, stopped, superseded);
- experiment_plan: the search (plan_step: what to measure next, in which order, what is held at the start);
- experiment_memory: verdicts kept across hosts and runs, and what a host records as turned off;
- experiment_io: what the roles hand in and out (measurements from their loops, switches, warm-up, report rows).
"""

from __future__ import annotations

from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_settings import (  # noqa: F401
    DEFAULTS,
    GAIN,
    KEPT,
    NEUTRAL,
    NO_GAIN,
    REGRESSION,
    REJECTED,
    SLO_FIELDS,
    SUPERSEDED,
    UNTRIED,
    ExperimentError,
    check_loads,
    check_slo,
    config_key,
    loads_by_concurrency,
    settings_of,
    slo_of,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_compare import (  # noqa: F401
    CAP_BOUND,
    agreement,
    cap_misses,
    capped_loads,
    compare_load,
    describe_cap,
    describe_load,
    describe_miss,
    latency_p99,
    loads_of,
    median,
    objective_against,
    objective_misses,
    parity_check,
    spread,
    summary,
    throughputs,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_verdicts import (  # noqa: F401
    decided_verdict,
    experiment_verdict,
    remembered_verdict,
    stopped_verdict,
    superseded_verdict,
    untried_verdict,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_plan import (  # noqa: F401
    decision_order,
    experiment_rounds,
    held_at_start,
    plan_step,
    smoke_decides,
    smoke_named,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_memory import (  # noqa: F401
    memory_key,
    rejected_record,
    rejections,
    remember,
    remember_runs,
    remembered_verdicts,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.experiment_io import (  # noqa: F401
    final_rows,
    measurement_of,
    report_entries,
    switch_problem,
    switch_to,
    threshold_load,
    warmup_requests,
)

__all__ = [
    "DEFAULTS",
    "GAIN",
    "KEPT",
    "NEUTRAL",
    "NO_GAIN",
    "REGRESSION",
    "REJECTED",
    "SLO_FIELDS",
    "SUPERSEDED",
    "UNTRIED",
    "ExperimentError",
    "check_loads",
    "check_slo",
    "config_key",
    "loads_by_concurrency",
    "settings_of",
    "slo_of",
    "CAP_BOUND",
    "agreement",
    "cap_misses",
    "capped_loads",
    "compare_load",
    "describe_cap",
    "describe_load",
    "describe_miss",
    "latency_p99",
    "loads_of",
    "median",
    "objective_against",
    "objective_misses",
    "parity_check",
    "spread",
    "summary",
    "throughputs",
    "decided_verdict",
    "experiment_verdict",
    "remembered_verdict",
    "stopped_verdict",
    "superseded_verdict",
    "untried_verdict",
    "decision_order",
    "experiment_rounds",
    "held_at_start",
    "plan_step",
    "smoke_decides",
    "smoke_named",
    "memory_key",
    "rejected_record",
    "rejections",
    "remember",
    "remember_runs",
    "remembered_verdicts",
    "final_rows",
    "measurement_of",
    "report_entries",
    "switch_problem",
    "switch_to",
    "threshold_load",
    "warmup_requests",
]

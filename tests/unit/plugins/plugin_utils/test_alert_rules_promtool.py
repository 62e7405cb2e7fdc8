# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The alert rules under Prometheus's own evaluator: promtool check rules, then promtool test rules.

The rules are rendered as the role renders them (alert_rules through to_nice_yaml) for the built-in glm-5-nvfp4
profile. Each case feeds one host 40 minutes of series, a reading a minute, and says which alerts fire at 30 minutes
(and every other alert of the file is expected silent then): the seed's regression (8 GPUs busy at 125 W of 600 W
with requests running, after 20 healthy minutes at 420 W) must raise spin-wait on each GPU within its 10 minute
window; a healthy server raises nothing; each other cause raises its own alert alone. The expected labels and
messages are written out by hand.

promtool is Debian's prometheus package; scripts/setup.sh --tests installs it. Without it these tests fail naming
that command, as a missing wheel does (tests/unit/sglang_wheels.py): a skip would pass the unit stage unchecked.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from ansible.plugins.filter.core import to_nice_yaml

from ansible_collections.sm120.sglang.plugins.plugin_utils.alert_rules import alert_rules

# The glm-5-nvfp4 profile's loads, as profiles.yml writes them: objectives 15 s TTFT and 1 s ITL at most, queue 64.
GLM5_LOADS = {
    "low": {"concurrency": 4, "slo": {"ttft_p99_ms": 3000, "itl_p99_ms": 150}},
    "high": {"concurrency": 64, "slo": {"ttft_p99_ms": 15000, "itl_p99_ms": 1000}},
}
HOST = "gpu-a"
WORKER = "http://10.0.0.11:30000"
DCGM = 'job="dcgm",instance="gpu-a:9400",host="gpu-a"'
SGLANG = 'job="sglang",instance="gpu-a:30000",host="gpu-a",worker="%s"' % WORKER
ROUTER = 'job="sglang-router",instance="router:29000",host="router"'
MINUTES = 40


def steady(value):
    return "%sx%d" % (value, MINUTES)


def gpu(index, power="420", util="98", clock="2400", reasons="0", temperature="60", limit="600", top="2617"):
    """One GPU's dcgm-exporter series: an RTX PRO 6000 (600 W, 2617 MHz) at work by default, 0.70 of its limit."""
    labels = '{%s,gpu="%d"}' % (DCGM, index)
    series = {"DCGM_FI_DEV_POWER_USAGE": power, "DCGM_FI_DEV_POWER_MGMT_LIMIT": steady(limit),
              "DCGM_FI_DEV_GPU_UTIL": util, "DCGM_FI_DEV_SM_CLOCK": clock, "DCGM_FI_DEV_MAX_SM_CLOCK": steady(top),
              "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": reasons, "DCGM_FI_DEV_GPU_TEMP": temperature}
    return {name + labels: values if "x" in values or "+" in values else steady(values)
            for name, values in series.items() if values is not None}


def histogram(name, bounds, counting):
    """Cumulative buckets: those in ``counting`` gain 10 observations a minute, the others none."""
    return {'%s_bucket{%s,le="%s"}' % (name, SGLANG, bound): ("0+10x%d" % MINUTES if bound in counting else steady(0))
            for bound in bounds}


TTFT_BOUNDS = ("0.5", "1", "5", "10", "20", "+Inf")
ITL_BOUNDS = ("0.05", "0.1", "0.5", "1", "2", "+Inf")


def server(running="64", queued="2", ttft=TTFT_BOUNDS, itl=ITL_BOUNDS, up="1", in_router="1"):
    """The SGLang server's, the router's and the scrape's series; by default a server well inside its objectives."""
    series = {
        "sglang:num_running_reqs{%s,tp_rank=\"0\"}" % SGLANG: steady(running),
        "sglang:num_queue_reqs{%s,tp_rank=\"0\"}" % SGLANG: steady(queued),
        "up{%s}" % SGLANG: steady(up),
        "up{%s}" % DCGM: steady(1),
        "up{%s}" % ROUTER: steady(1),
        'smg_worker_health{%s,worker="%s"}' % (ROUTER, WORKER): steady(in_router),
    }
    series.update(histogram("sglang:time_to_first_token_seconds", TTFT_BOUNDS, ttft))
    series.update(histogram("sglang:inter_token_latency_seconds", ITL_BOUNDS, itl))
    return series


def gpu_labels(alertname, cause, severity, index):
    return {"alertname": alertname, "cause": cause, "severity": severity, "host": HOST, "gpu": str(index),
            "job": "dcgm", "instance": "gpu-a:9400"}


def spin_wait(index):
    return {"exp_labels": gpu_labels("SglangGpuSpinWait", "spin-wait", "critical", index),
            "exp_annotations": {
                "summary": "gpu-a GPU %d is spin-waiting" % index,
                "description": "Busy at least 80 % of the time with requests running, yet drawing a median 0.21 of "
                               "its power limit with the SM clock not pulled down (0.9 of its maximum or more), over "
                               "the last 10m: kernels spin on a flag, GPUs wait on each other. Look for a "
                               "synchronisation bug (a fusion or allreduce gate), not for more load."}}


def seed_regression():
    """8 GPUs at 420 W for 20 minutes, then busy at 125 W of 600 W (the fusion patch's collapse), requests running."""
    series = server()
    for index in range(8):
        series.update(gpu(index, power="420x19 125x20", util="98x19 100x20"))
    return series


CASES = {
    "seed regression": (seed_regression(), {"SglangGpuSpinWait": [spin_wait(index) for index in range(8)]}),
    "healthy server": (dict(server(), **gpu(0)), {}),
    "underfed": (dict(server(running="4", queued="10"), **gpu(0, power="100", util="30")), {"SglangGpuUnderfed": [{
        "exp_labels": gpu_labels("SglangGpuUnderfed", "underfed", "warning", 0),
        "exp_annotations": {
            "summary": "gpu-a GPU 0 is underfed",
            "description": "Requests are running or queued, yet the GPU is busy less than 80 % of the time or its "
                           "kernels fill it too little to draw more than a median 0.17 of its power limit, over the "
                           "last 10m: too small a batch, a starved scheduler or host gaps between kernels."}}]}),
    "power-capped": (dict(server(), **gpu(0, power="590", util="100", clock="1900", reasons="4")),
                     {"SglangGpuPowerCapped": [{
                         "exp_labels": gpu_labels("SglangGpuPowerCapped", "power-capped", "info", 0),
                         "exp_annotations": {
                             "summary": "gpu-a GPU 0 is power-capped",
                             "description": "At a median 0.98 of its power limit with the SM clock pulled under 0.9 "
                                            "of its maximum and the power cap holding it, over the last 10m: the "
                                            "power limit, not the load, bounds this GPU."}}]}),
    "thermal by its reason": (
        dict(server(), **gpu(0, power="400", util="100", clock="1500", reasons="32", temperature="92")),
        {"SglangGpuThermal": [{
            "exp_labels": gpu_labels("SglangGpuThermal", "thermal", "warning", 0),
            "exp_annotations": {
                "summary": "gpu-a GPU 0 is thermally throttled",
                "description": "The SM clock is pulled down to a median 0.57 of its maximum by a thermal slowdown "
                               "(or, where the exporter reads no reasons, at 85 °C or more while busy), over the last "
                               "10m: check the cooling and the airflow."}}]}),
    "thermal by temperature where no reasons are read": (
        dict(server(), **gpu(0, power="400", util="100", clock="1500", reasons=None, temperature="90")),
        {"SglangGpuThermal": [{
            "exp_labels": gpu_labels("SglangGpuThermal", "thermal", "warning", 0),
            "exp_annotations": {
                "summary": "gpu-a GPU 0 is thermally throttled",
                "description": "The SM clock is pulled down to a median 0.57 of its maximum by a thermal slowdown "
                               "(or, where the exporter reads no reasons, at 85 °C or more while busy), over the "
                               "last 10m: check the cooling and the airflow."}}]}),
    "server down": (
        dict({name: values for name, values in server(up="0", in_router="0").items() if not name.startswith("sglang:")},
             **gpu(0, power="80", util="0", clock="345", reasons="1")),
        {"SglangServerDown": [{
            "exp_labels": {"alertname": "SglangServerDown", "cause": "server-down", "severity": "critical",
                           "host": HOST, "job": "sglang", "instance": "gpu-a:30000", "worker": WORKER},
            "exp_annotations": {
                "summary": "gpu-a: the SGLang server does not answer its metrics scrape",
                "description": "gpu-a:30000 (job sglang) has not answered /metrics for 2m: the service is down or "
                               "hangs; journalctl -u 'sglang-*' on the host says why."}}]}),
    "requests queueing": (dict(server(queued="100"), **gpu(0)), {"SglangRequestsQueueing": [{
        "exp_labels": {"alertname": "SglangRequestsQueueing", "cause": "queueing", "severity": "warning",
                       "host": HOST},
        "exp_annotations": {
            "summary": "gpu-a has requests queueing",
            "description": "A median 100 requests waited in the queue over the last 10m, more than 64: the server "
                           "takes requests slower than they arrive."}}]}),
    "ttft over the objective": (dict(server(ttft=("20", "+Inf")), **gpu(0)), {"SglangTtftOverObjective": [{
        "exp_labels": {"alertname": "SglangTtftOverObjective", "cause": "ttft-over-objective",
                       "severity": "warning", "host": HOST},
        "exp_annotations": {
            "summary": "gpu-a: p99 time to first token over the objective",
            "description": "p99 time to first token 19.9s over the last 10m, over the objective of 15 s (the "
                           "largest bound of the profile's loads)."}}]}),
    "itl over the objective": (dict(server(itl=("2", "+Inf")), **gpu(0)), {"SglangItlOverObjective": [{
        "exp_labels": {"alertname": "SglangItlOverObjective", "cause": "itl-over-objective",
                       "severity": "warning", "host": HOST},
        "exp_annotations": {
            "summary": "gpu-a: p99 inter-token latency over the objective",
            "description": "p99 inter-token latency 1.99s over the last 10m, over the objective of 1 s (the "
                           "largest bound of the profile's loads)."}}]}),
    "gpu exporter down": (dict(server(), **{"up{%s}" % DCGM: steady(0)}), {"SglangMonitoringTargetDown": [{
        "exp_labels": {"alertname": "SglangMonitoringTargetDown", "cause": "target-down", "severity": "warning",
                       "host": HOST, "job": "dcgm", "instance": "gpu-a:9400"},
        "exp_annotations": {
            "summary": "gpu-a: dcgm does not answer its scrape",
            "description": "gpu-a:9400 has not answered for 2m; while it does not, the alerts that read it cannot "
                           "fire."}}]}),
    "out of the router": (dict(server(in_router="-1"), **gpu(0)), {"SglangHostOutOfRouter": [{
        "exp_labels": {"alertname": "SglangHostOutOfRouter", "cause": "out-of-router", "severity": "critical",
                       "host": HOST, "job": "sglang", "instance": "gpu-a:30000", "worker": WORKER},
        "exp_annotations": {
            "summary": "gpu-a serves but the router sends it nothing",
            "description": "http://10.0.0.11:30000 answers its scrape, yet the router lists it unhealthy, removed "
                           "or not at all (smg_worker_health is not 1) for 2m: a drain that was not undone, or "
                           "health checks that fail; GET /workers on the router shows it."}}]}),
}


def promtool(*args, cwd):
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed, so the alert rules cannot be checked: run `bash scripts/setup.sh "
                    "--tests` (it installs Debian's prometheus package, which has promtool)")
    return subprocess.run([path, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def render(directory, **kwargs):
    rules = alert_rules(GLM5_LOADS, 20000, **kwargs)
    (directory / "rules.yml").write_text(to_nice_yaml(rules))
    return [rule["alert"] for rule in rules["groups"][1]["rules"]]


def unit_tests(alert_names, cases, eval_time="30m"):
    tests = []
    for name, (series, expected) in cases.items():
        tests.append({
            "name": name,
            "interval": "1m",
            "input_series": [{"series": key, "values": values} for key, values in sorted(series.items())],
            "alert_rule_test": [{"eval_time": eval_time, "alertname": alert, "exp_alerts": expected.get(alert, [])}
                                for alert in alert_names],
        })
    return {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}


def run_cases(directory, alert_names, cases, eval_time="30m"):
    (directory / "tests.yml").write_text(yaml.safe_dump(unit_tests(alert_names, cases, eval_time), sort_keys=False,
                                                        allow_unicode=True))
    return promtool("test", "rules", "tests.yml", cwd=directory)


def test_promtool_accepts_the_rendered_rules(tmp_path):
    render(tmp_path)
    checked = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 27 rules found" in checked.stdout


def test_each_cause_raises_its_own_alert_alone_and_a_healthy_server_none(tmp_path):
    alert_names = render(tmp_path)
    assert set(alert_names) >= {alert for _series, expected in CASES.values() for alert in expected}
    tested = run_cases(tmp_path, alert_names, CASES)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_the_seed_regression_is_silent_until_its_spin_outweighs_the_healthy_minutes_of_the_window(tmp_path):
    # One minute after the collapse the window's median is still the healthy 420 W.
    alert_names = render(tmp_path)
    tested = run_cases(tmp_path, alert_names, {"seed regression, a minute in": (seed_regression(), {})}, "21m")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_seed_regression_is_missed_where_the_spin_power_threshold_is_set_below_it(tmp_path):
    # The rules read the verdict's threshold: at 0.2 of the limit the seed's 0.21 is no longer spin, and the case fails.
    alert_names = render(tmp_path, thresholds={"spin_max_power_fraction": 0.2})
    tested = run_cases(tmp_path, alert_names, {"seed regression": CASES["seed regression"]})
    assert tested.returncode != 0
    assert "alertname: SglangGpuSpinWait, time: 30m" in tested.stdout + tested.stderr

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch, end to end, with a real Prometheus (Debian's 2.42, the one playbooks/monitoring.yml installs): the
collection's scrape configuration and alert rules (plugin_utils/prometheus_config.py, alert_rules.py, at a window of
15 s instead of 10 minutes), the collection's GPU exporter (module_utils/gpu_exporter.py) and the SGLang stand-in
with --enable-metrics. What cannot exist here stands in: the GPUs are the molecule nvidia-smi stand-in on an RTX PRO
6000 x8 capture, whose draw and utilisation follow the SGLang stand-in's load (its power file), and the server is
the SGLang stand-in. Under a steady load the server starts to spin (its draw falls to 125 W of 600 W at 100 %
utilisation, the seed's regression): SglangGpuSpinWait fires for each GPU, naming host, GPU and cause; the server
restarted healthy, it clears. Every query of the Grafana dashboard returns data meanwhile."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from ansible_collections.sm120.sglang.plugins.plugin_utils import alert_rules, grafana_dashboard, prometheus_config

ROOT = pathlib.Path(__file__).resolve().parents[3]
STANDIN = ROOT / "molecule" / "resources" / "standin_server" / "sglang_standin.py"
EXPORTER = "ansible_collections.sm120.sglang.plugins.module_utils.gpu_exporter"
# The seed's regression as the stand-in plays it: a live option whose GPUs draw 125 W at 100 % while they serve.
SPIN = {"spin": {"load_w": 125, "util_pct": 100, "env": {"STANDIN_SPIN": "1"}}}
WINDOW, HOLD = "15s", "3s"


def _port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_listening(port, process, what, limit=60):
    deadline = time.monotonic() + limit
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError("%s did not listen on %d: %s" % (what, port, process.communicate()[1]))
            time.sleep(0.2)


def _get_json(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


class Fleet:
    """One GPU host of the stand-ins and a real Prometheus scraping it: ``nvidia_smi`` is the standin_nvidia_smi
    fixture, whose power file the SGLang stand-in writes under load."""

    def __init__(self, tmp_path, nvidia_smi):
        self.tmp = tmp_path
        self.nvidia_smi, self.power, _captures, self.exporter_env = nvidia_smi
        self.model = tmp_path / "model"
        self.model.mkdir()
        (self.model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "vocab_size": 32000}')
        self.server_port, self.exporter_port, self.prometheus_port = _port(), _port(), _port()
        self.url = "http://127.0.0.1:%d" % self.server_port
        self.prometheus = "http://127.0.0.1:%d" % self.prometheus_port
        self.processes = {}
        self.loading = threading.Event()

    def start_server(self, spinning):
        old = self.processes.pop("server", None)
        if old is not None:
            old.kill()
            old.wait()
        env = dict(os.environ, SGLANG_STANDIN_POWER_FILE=str(self.power), SGLANG_STANDIN_TOKENS_PER_SECOND="300",
                   SGLANG_STANDIN_EFFECTS=json.dumps(SPIN))
        if spinning:
            env["STANDIN_SPIN"] = "1"
        process = subprocess.Popen([sys.executable, str(STANDIN), "--model-path", str(self.model), "--port",
                                    str(self.server_port), "--standin-warmup", "0", "--standin-load", "0",
                                    "--enable-metrics"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True)
        self.processes["server"] = process
        _wait_listening(self.server_port, process, "the SGLang stand-in")

    def start_exporter(self):
        process = subprocess.Popen([sys.executable, "-m", EXPORTER, "--listen-address", "127.0.0.1", "--port",
                                    str(self.exporter_port), "--nvidia-smi", str(self.nvidia_smi)],
                                   env=self.exporter_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.processes["exporter"] = process
        _wait_listening(self.exporter_port, process, "the GPU exporter")

    def start_prometheus(self):
        groups = {"gpu_hosts": ["gpu1"]}
        hostvars = {"gpu1": {"ansible_host": "127.0.0.1", "sglang_service_port": self.server_port}}
        rules_file = self.tmp / "rules.yml"
        loads = {"high": {"concurrency": 4, "slo": {"ttft_p99_ms": 15000, "itl_p99_ms": 1000}}}
        rules_file.write_text(yaml.safe_dump(alert_rules.alert_rules(loads=loads, window=WINDOW, hold=HOLD)))
        config = prometheus_config.scrape_config(groups, hostvars, exporter_port=self.exporter_port,
                                                 scrape_interval="1s", evaluation_interval="1s",
                                                 rules_file=str(rules_file))
        (self.tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
        process = subprocess.Popen([shutil.which("prometheus"), "--config.file", str(self.tmp / "prometheus.yml"),
                                    "--storage.tsdb.path", str(self.tmp / "tsdb"), "--web.listen-address",
                                    "127.0.0.1:%d" % self.prometheus_port], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        self.processes["prometheus"] = process
        _wait_listening(self.prometheus_port, process, "Prometheus")

    def load(self, concurrency=4):
        """Requests kept in flight until stop_load: the server's running requests, and the GPUs' draw under load."""
        body = json.dumps({"model": "m", "prompt": "the GPU is", "max_tokens": 300, "ignore_eos": True}).encode()

        def client():
            while self.loading.is_set():
                request = urllib.request.Request(self.url + "/v1/completions", data=body,
                                                 headers={"Content-Type": "application/json"})
                try:
                    urllib.request.urlopen(request, timeout=30).close()
                except OSError:
                    time.sleep(0.2)  # the server restarting
        self.loading.set()
        for _client in range(concurrency):
            threading.Thread(target=client, daemon=True).start()

    def alerts(self, name):
        found = _get_json(self.prometheus + "/api/v1/alerts")["data"]["alerts"]
        return [alert for alert in found if alert["labels"]["alertname"] == name]

    def query(self, expr):
        return _get_json(self.prometheus + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["data"]["result"]

    def stop(self):
        self.loading.clear()
        for process in self.processes.values():
            process.kill()
            process.wait()


def _until(condition, limit, what):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(1)
    raise AssertionError("%s within %d s" % (what, limit))


@pytest.fixture
def fleet(tmp_path, standin_nvidia_smi):
    if shutil.which("prometheus") is None:
        pytest.fail("Prometheus is not installed: run `bash scripts/setup.sh --tests` (Debian's prometheus package)")
    running = Fleet(tmp_path, standin_nvidia_smi)
    try:
        yield running
    finally:
        running.stop()


def test_a_server_that_starts_to_spin_raises_the_spin_wait_alert_per_gpu_and_clears_once_healthy(fleet):
    fleet.start_server(spinning=True)
    fleet.start_exporter()
    fleet.start_prometheus()
    fleet.load()
    firing = _until(lambda: [a for a in fleet.alerts("SglangGpuSpinWait") if a["state"] == "firing"], 90,
                    "SglangGpuSpinWait did not fire on the spinning server")
    assert {alert["labels"]["gpu"] for alert in firing} <= {str(gpu) for gpu in range(8)}
    assert all(alert["labels"]["host"] == "gpu1" and alert["labels"]["cause"] == "spin-wait" for alert in firing)
    assert firing[0]["annotations"]["summary"].startswith("gpu1 GPU ")
    # Every query of the dashboard answers while the fleet serves (the cause alerts' table with the alert firing).
    empty = [expr for expr in grafana_dashboard.queries(grafana_dashboard.dashboard(WINDOW)) if not fleet.query(expr)]
    assert empty == []
    # The server restarted healthy under the same load: its GPUs draw 480 W of 600 at 96 %, and the alert clears.
    fleet.start_server(spinning=False)
    _until(lambda: not fleet.alerts("SglangGpuSpinWait"), 90, "SglangGpuSpinWait did not clear once healthy")

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's GPU exporter: what it serves, read back by a strict parser of Prometheus's text format, by
promtool, and by the alert rules themselves.

A stand-in GPU source (FakeSource below stands in for gpu_power's NVML or nvidia-smi source) gives the readings for
the pure parts; the process tests run the module as the role's unit runs it, against the molecule nvidia-smi
stand-in (molecule/resources/nvidia-smi), over HTTP. The names checked are taken from the rendered alert rules'
expressions, not from dcgm_fields: a rule that starts reading a field the exporter does not serve fails here.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml
from ansible.plugins.filter.core import to_nice_yaml

from ansible_collections.sm120.sglang.plugins.module_utils import gpu_exporter
from ansible_collections.sm120.sglang.plugins.module_utils.dcgm_fields import OLD_REASONS_METRIC
from ansible_collections.sm120.sglang.plugins.module_utils.gpu_power import GpuReading, PowerSourceUnavailable
from ansible_collections.sm120.sglang.plugins.plugin_utils.alert_rules import alert_rules

MODULE = "ansible_collections.sm120.sglang.plugins.module_utils.gpu_exporter"

# An RTX PRO 6000 spinning as in the seed's regression (125 W of 600 W, busy, clock at its top), and one that
# cannot report its temperature or reasons.
SPINNING = GpuReading(0, 125.0, 600.0, 100.0, 2617.0, 2617.0, 61.0, ())
UNREADABLE = GpuReading(1, 480.5, 600.0, 96.0, 2400.0, 2617.0, None, None)


class FakeSource:
    """Stands in for a gpu_power.PowerSource (and so for NVML and the GPUs): its readings, counted, or a failure."""

    def __init__(self, readings, name="nvml", fail=None):
        self.name = name
        self.readings = readings
        self.fail = fail
        self.reads = 0
        self.closed = False

    def read(self):
        self.reads += 1
        if self.fail is not None:
            raise self.fail
        return self.readings

    def close(self):
        self.closed = True


# ---------------------------------------------------------------- a strict parser of the text format

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(r"^(%s)(?:\{(.*)\})? (\S+)$" % _NAME)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse(text):
    """{name: {"help", "type", "samples": [(labels, value)]}}; AssertionError on anything the format does not allow.

    The format (Prometheus's exposition format 0.0.4): HELP then TYPE before a family's samples, a family once,
    labels name="value" with \\\\, \\" and \\n escaped, a float value, a newline after the last line.
    """
    assert text.endswith("\n"), "the text does not end with a newline"
    families, current = {}, None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, _space, description = line[len("# HELP "):].partition(" ")
            assert re.fullmatch(_NAME, name) and name not in families, line
            families[name] = current = {"help": description, "type": None, "samples": []}
            current["name"] = name
        elif line.startswith("# TYPE "):
            name, _space, kind = line[len("# TYPE "):].partition(" ")
            assert current is not None and current["name"] == name and current["type"] is None, line
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            current["type"] = kind
        else:
            match = _SAMPLE.match(line)
            assert match, "not a sample line: %r" % line
            name, labels_text, value = match.groups()
            assert current is not None and name == current["name"] and current["type"], line
            labels, rest = {}, labels_text or ""
            while rest:
                label = _LABEL.match(rest)
                assert label and label.group(1) not in labels, "bad labels in %r" % line
                labels[label.group(1)] = label.group(2)
                rest = rest[label.end():]
            current["samples"].append((labels, float(value)))
    return families


def rule_fields():
    """The dcgm-exporter fields the rendered rules read, from their expressions."""
    rules = alert_rules({"high": {"concurrency": 64, "slo": {"ttft_p99_ms": 15000, "itl_p99_ms": 1000}}})
    expressions = " ".join(rule["expr"] for group in rules["groups"] for rule in group["rules"])
    return set(re.findall(r"DCGM_FI_[A-Z_]+", expressions))


# ---------------------------------------------------------------- what is served

def test_every_field_the_rules_read_is_served_once_per_gpu_with_its_gpu_label():
    capped = GpuReading(1, 480.5, 600.0, 96.0, 2400.0, 2617.0, 70.0, ("sw_power_cap",))
    families = parse(gpu_exporter.render([SPINNING, capped], "nvml", 0.01, "gpu-a"))
    # The reasons are read under either name; this exporter serves the DCGM 3.3 one, as dcgm-exporter does today.
    wanted = rule_fields() - {OLD_REASONS_METRIC}
    assert wanted == {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_GPU_UTIL",
                      "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MAX_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP",
                      "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}
    for name in wanted:
        assert families[name]["type"] == "gauge", name
        assert [labels["gpu"] for labels, _value in families[name]["samples"]] == ["0", "1"], name


def test_the_values_are_the_readings_in_dcgm_exporters_units_and_the_reasons_nvmls_mask():
    families = parse(gpu_exporter.render([GpuReading(3, 412.5, 575.0, 97.0, 2400.0, 2617.0, 70.0,
                                                     ("sw_power_cap", "sw_thermal_slowdown"))], "nvml", 0.01, "gpu-a"))
    values = {name: family["samples"][0][1] for name, family in families.items() if name.startswith("DCGM_")}
    assert values == {"DCGM_FI_DEV_POWER_USAGE": 412.5, "DCGM_FI_DEV_POWER_MGMT_LIMIT": 575.0,
                      "DCGM_FI_DEV_GPU_UTIL": 97.0, "DCGM_FI_DEV_SM_CLOCK": 2400.0,
                      "DCGM_FI_DEV_MAX_SM_CLOCK": 2617.0, "DCGM_FI_DEV_GPU_TEMP": 70.0,
                      "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": float(0x4 | 0x20)}
    assert families["DCGM_FI_DEV_POWER_USAGE"]["samples"][0][0] == {"gpu": "3", "device": "nvidia3",
                                                                    "Hostname": "gpu-a"}


def test_a_value_the_gpu_cannot_report_is_left_out_not_served_as_zero():
    families = parse(gpu_exporter.render([SPINNING, UNREADABLE], "nvidia-smi", 0.2, "gpu-a"))
    for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"):
        assert [labels["gpu"] for labels, _value in families[name]["samples"]] == ["0"], name
    # No reason at all is a reading too: mask 0, served.
    assert families["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]["samples"][0][1] == 0.0
    assert families["DCGM_FI_DEV_POWER_USAGE"]["samples"][1][1] == 480.5


def test_no_series_carries_the_host_label_the_scrape_configuration_sets():
    families = parse(gpu_exporter.render([SPINNING, UNREADABLE], "nvml", 0.01, 'odd"host\\name'))
    labels = [labels for family in families.values() for labels, _value in family["samples"]]
    assert labels and not any("host" in label or "job" in label or "instance" in label for label in labels)
    assert families["DCGM_FI_DEV_GPU_UTIL"]["samples"][0][0]["Hostname"] == 'odd\\"host\\\\name'


def test_the_exporter_says_which_source_it_reads_and_how_long_the_read_took():
    families = parse(gpu_exporter.render([SPINNING], "nvidia-smi", 0.123456789, "gpu-a"))
    assert families["sm120_gpu_exporter_source_info"]["samples"] == [({"source": "nvidia-smi"}, 1.0)]
    assert families["sm120_gpu_exporter_read_seconds"]["samples"] == [({}, 0.123457)]


def test_promtool_reads_what_is_served_without_a_complaint(tmp_path):
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: run `bash scripts/setup.sh --tests` (Debian's prometheus package)")
    served = gpu_exporter.render([SPINNING, UNREADABLE], "nvml", 0.01, "gpu-a")
    checked = subprocess.run([path, "check", "metrics"], input=served, capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0 and not checked.stdout.strip() and not checked.stderr.strip(), (
        checked.stdout + checked.stderr)


def _alert_test(directory, exposition, expected_gpus):
    """promtool test rules over 40 minutes of the served samples (labelled as the scrape labels them) beside a server
    with requests running: which GPUs raise SglangGpuSpinWait at 30 minutes."""
    (directory / "rules.yml").write_text(to_nice_yaml(alert_rules({"high": {"concurrency": 64}})))
    target = 'job="dcgm",instance="10.0.0.11:9400",host="gpu-a"'
    series = []
    for name, family in parse(exposition).items():
        for labels, value in family["samples"]:
            text = ",".join('%s="%s"' % item for item in labels.items())
            series.append({"series": "%s{%s%s}" % (name, target, "," + text if text else ""),
                           "values": "%gx40" % value})
    series.append({"series": 'sglang:num_running_reqs{job="sglang",instance="10.0.0.11:30000",host="gpu-a"}',
                   "values": "64x40"})
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "promql_expr_test": [{
            "expr": 'count by (host, gpu) (ALERTS{alertname="SglangGpuSpinWait",alertstate="firing"})',
            "eval_time": "30m",
            "exp_samples": [{"labels": '{host="gpu-a",gpu="%s"}' % gpu, "value": 1} for gpu in expected_gpus]}]}]}
    (directory / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: run `bash scripts/setup.sh --tests` (Debian's prometheus package)")
    return subprocess.run([path, "test", "rules", "tests.yml"], cwd=directory, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_rules_read_a_spinning_gpu_from_what_this_exporter_serves(tmp_path):
    # GPU 0 spins (the seed's 125 W of 600 W, busy, clock up); GPU 1 works at 480 W: only GPU 0 fires.
    exposition = gpu_exporter.render([SPINNING, GpuReading(1, 480.0, 600.0, 97.0, 2400.0, 2617.0, 60.0, ())],
                                     "nvml", 0.01, "gpu-a")
    tested = _alert_test(tmp_path, exposition, ["0"])
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_alert_test_fails_where_the_spinning_gpu_is_not_expected(tmp_path):
    # The check above can fail: the same series, with no GPU expected to fire, do not pass.
    exposition = gpu_exporter.render([SPINNING], "nvml", 0.01, "gpu-a")
    tested = _alert_test(tmp_path, exposition, [])
    assert tested.returncode != 0 and "SglangGpuSpinWait" in tested.stdout + tested.stderr


# ---------------------------------------------------------------- one bounded read per scrape

def test_scrapes_close_together_share_one_read_and_a_later_one_reads_again():
    source = FakeSource([SPINNING])
    now = [100.0]
    scraper = gpu_exporter.Scraper(lambda: source, "gpu-a", min_interval=1.0, clock=lambda: now[0])
    first = scraper.metrics()
    now[0] += 0.5
    assert scraper.metrics() == first and source.reads == 1
    now[0] += 1.0
    scraper.metrics()
    assert source.reads == 2


def test_a_scrape_does_not_queue_behind_a_read_that_hangs():
    reading, release = threading.Event(), threading.Event()

    class Hanging(FakeSource):
        def read(self):
            reading.set()
            release.wait(10)
            return super().read()

    scraper = gpu_exporter.Scraper(lambda: Hanging([SPINNING]), "gpu-a", wait=0.2)
    first = threading.Thread(target=scraper.metrics)
    first.start()
    assert reading.wait(10), "the first scrape never began its read"
    started = time.monotonic()
    with pytest.raises(gpu_exporter.ScrapeBusy, match="more than 0.2s"):
        scraper.metrics()
    assert time.monotonic() - started < 2
    release.set()
    first.join(5)


def test_a_failed_read_is_raised_and_the_next_scrape_opens_the_source_again():
    sources = [FakeSource([], fail=PowerSourceUnavailable("nvidia-smi exited with 9: no devices")),
               FakeSource([SPINNING])]
    opened = []

    def open_source():
        opened.append(sources[len(opened)])
        return opened[-1]

    scraper = gpu_exporter.Scraper(open_source, "gpu-a", min_interval=0)
    with pytest.raises(PowerSourceUnavailable, match="exited with 9"):
        scraper.metrics()
    assert sources[0].closed
    assert 'DCGM_FI_DEV_POWER_USAGE{gpu="0"' in scraper.metrics() and len(opened) == 2


def test_once_prints_one_read_and_fails_without_a_gpu_that_reports_its_power(capsys):
    assert gpu_exporter.main(["--once"], open_source=lambda: FakeSource([SPINNING])) == 0
    assert parse(capsys.readouterr().out)["DCGM_FI_DEV_POWER_USAGE"]["samples"][0][1] == 125.0
    assert gpu_exporter.main(["--once"], open_source=lambda: FakeSource([GpuReading(0, None, 600.0)])) == 1
    assert "no GPU reported its power draw" in capsys.readouterr().err


def test_without_any_gpu_source_the_exporter_exits_saying_why(capsys):
    def nothing():
        raise PowerSourceUnavailable("the Python module pynvml (nvidia-ml-py) is not installed; nvidia-smi not found")

    assert gpu_exporter.main(["--port", "9400"], open_source=nothing) == 1
    assert "no GPU to read: the Python module pynvml" in capsys.readouterr().err


def test_an_nvidia_smi_past_its_timeout_at_the_start_ends_the_exporter_saying_so(capsys):
    hung = FakeSource([], name="nvidia-smi", fail=subprocess.TimeoutExpired(["nvidia-smi"], 10))
    assert gpu_exporter.main(["--port", "9400"], open_source=lambda: hung) == 1
    assert "no GPU to read: Command '['nvidia-smi']' timed out after 10 seconds" in capsys.readouterr().err
    assert hung.closed


def test_a_listen_name_that_resolves_to_loopback_is_warned_of_and_a_lan_address_is_not(monkeypatch):
    # Debian's /etc/hosts maps the host's own name to 127.0.1.1: Prometheus on another host would never reach it.
    addresses = {"gpu1": "127.0.1.1", "10.0.0.11": "10.0.0.11"}
    monkeypatch.setattr(gpu_exporter.socket, "getaddrinfo", lambda name, *rest: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", (addresses[name], 0))])
    assert "gpu1 resolves to 127.0.1.1, a loopback address" in gpu_exporter._loopback_warning("gpu1")
    assert gpu_exporter._loopback_warning("10.0.0.11") is None
    # Asked for on purpose: a Prometheus on this host.
    assert gpu_exporter._loopback_warning("127.0.0.1") is None


def test_a_port_outside_the_range_is_refused(capsys):
    with pytest.raises(SystemExit):
        gpu_exporter.main(["--port", "70000"], open_source=lambda: FakeSource([SPINNING]))
    assert "--port 70000 is outside 1-65535" in capsys.readouterr().err


# ---------------------------------------------------------------- the process, over HTTP, on the nvidia-smi stand-in

def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as answer:
            return answer.status, answer.headers.get("Content-Type"), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type"), error.read().decode()


def _serve(script, env, port):
    process = subprocess.Popen([sys.executable, "-m", MODULE, "--listen-address", "127.0.0.1", "--port", str(port),
                                "--nvidia-smi", str(script)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError("the exporter did not listen: %s" % process.communicate()[1])
            time.sleep(0.1)


def test_the_process_serves_the_stand_ins_gpus_at_metrics_and_follows_their_load(standin_nvidia_smi):
    script, power, _captures, env = standin_nvidia_smi
    power.write_text("125 100\n")
    port = _free_port()
    process = _serve(script, env, port)
    try:
        status, content_type, text = _get("http://127.0.0.1:%d/metrics" % port)
        assert status == 200 and content_type == "text/plain; version=0.0.4; charset=utf-8"
        families = parse(text)
        assert families["sm120_gpu_exporter_source_info"]["samples"] == [({"source": "nvidia-smi"}, 1.0)]
        for name, value in (("DCGM_FI_DEV_POWER_USAGE", 125.0), ("DCGM_FI_DEV_POWER_MGMT_LIMIT", 600.0),
                            ("DCGM_FI_DEV_GPU_UTIL", 100.0), ("DCGM_FI_DEV_SM_CLOCK", 2597.0),
                            ("DCGM_FI_DEV_MAX_SM_CLOCK", 2597.0)):
            assert [(labels["gpu"], sample) for labels, sample in families[name]["samples"]] == [
                (str(gpu), value) for gpu in range(8)], name
        # The stand-in prints [N/A] for what it does not emulate, as a driver does for what it cannot read.
        assert families["DCGM_FI_DEV_GPU_TEMP"]["samples"] == []
        assert families["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]["samples"] == []
        power.write_text("480 96\n")
        time.sleep(gpu_exporter.MIN_READ_INTERVAL_S + 0.2)
        families = parse(_get("http://127.0.0.1:%d/metrics" % port)[2])
        assert {sample for _labels, sample in families["DCGM_FI_DEV_POWER_USAGE"]["samples"]} == {480.0}
        assert _get("http://127.0.0.1:%d/other" % port)[0] == 404
    finally:
        process.terminate()
        process.wait(10)


def test_the_process_answers_503_while_nvidia_smi_fails_and_serves_again_once_it_works(standin_nvidia_smi,
                                                                                       tmp_path):
    script, power, captures, env = standin_nvidia_smi
    power.write_text("480 96\n")
    port = _free_port()
    process = _serve(script, env, port)
    try:
        # The GPUs' rows disappear under the running exporter (nvidia-smi fails), as they do when the driver goes.
        (captures / "query-gpu.csv").rename(tmp_path / "query-gpu.csv")
        time.sleep(gpu_exporter.MIN_READ_INTERVAL_S + 0.2)
        status, _type, text = _get("http://127.0.0.1:%d/metrics" % port)
        assert status == 503 and "cannot read the GPUs" in text
        (tmp_path / "query-gpu.csv").rename(captures / "query-gpu.csv")
        status, _type, text = _get("http://127.0.0.1:%d/metrics" % port)
        assert status == 200 and 'DCGM_FI_DEV_POWER_USAGE{gpu="7"' in text
    finally:
        process.terminate()
        _stdout, stderr = process.communicate(timeout=10)
    assert "cannot read the GPUs" in stderr

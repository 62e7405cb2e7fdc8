# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serve the GPUs' power, limit, utilisation, SM clocks, temperature and clock event reasons as Prometheus text.

The collection's own GPU exporter, for hosts without NVIDIA's dcgm-exporter.
It reads the GPUs through gpu_power, the reader of gpu_facts and of the smoke
test's sampler (NVML through the pynvml of nvidia-ml-py where the Python that
runs it has it, as SGLang's venv does; else nvidia-smi), and serves at
/metrics the series the alert rules read, under dcgm-exporter's names and
its ``gpu`` label (dcgm_fields): the same rules read either exporter.

Each scrape reads the GPUs at most once, and scrapes that come together share
that read: one waits up to READ_WAIT_S for a read in flight, then gets 503
rather than queueing behind a reader that hangs; nvidia-smi's read is bounded by
gpu_power.NVIDIA_SMI_TIMEOUT_S. A read that fails answers 503 (Prometheus's
``up`` is 0 and SglangMonitoringTargetDown fires) and the next scrape opens the
source again: a driver upgraded under the exporter is read again without a
restart. A value the GPU cannot report is left out, as dcgm-exporter leaves out
a blank field, never served as 0.

The role sm120.sglang.gpu_exporter installs this file, gpu_power.py and
dcgm_fields.py under their package path and runs
``python -m ansible_collections.sm120.sglang.plugins.module_utils.gpu_exporter``:
the copy on the host is byte for byte the code tested here.

Standard library only (http.server): it runs on the GPU host with the Python
of SGLang's venv, and adds no dependency to it.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ansible_collections.sm120.sglang.plugins.module_utils.dcgm_fields import (
    CLOCKS_EVENT_REASONS,
    COUNTERS,
    GPU_LABEL,
    GPU_TEMP,
    GPU_UTIL,
    MAX_SM_CLOCK,
    POWER_MGMT_LIMIT,
    POWER_USAGE,
    SM_CLOCK,
)
from ansible_collections.sm120.sglang.plugins.module_utils.gpu_power import (
    open_power_source,
    throttle_reason_mask,
)

DEFAULT_PORT = 9400  # dcgm-exporter's, which the prometheus role scrapes by default
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# How long a scrape waits for a read another scrape started; Prometheus's own scrape timeout is 10 s by default.
READ_WAIT_S = 8.0
# Scrapes closer together than this share one read (Prometheus HA pairs scrape the same target).
MIN_READ_INTERVAL_S = 1.0
# A client that sends nothing for this long is dropped, so that slow clients cannot hold every thread.
CLIENT_TIMEOUT_S = 10.0

# The exporter's own series, apart from the GPUs'.
SOURCE_INFO = "sm120_gpu_exporter_source_info"
READ_SECONDS = "sm120_gpu_exporter_read_seconds"

# The series of a GpuReading, each in COUNTERS: dcgm-exporter name -> the value of a reading, None where unknown.
_VALUES = {
    POWER_USAGE: lambda reading: reading.watts,
    POWER_MGMT_LIMIT: lambda reading: reading.limit_watts,
    GPU_UTIL: lambda reading: reading.util_pct,
    SM_CLOCK: lambda reading: reading.sm_clock_mhz,
    MAX_SM_CLOCK: lambda reading: reading.max_sm_clock_mhz,
    GPU_TEMP: lambda reading: reading.temperature_c,
    CLOCKS_EVENT_REASONS: lambda reading: (None if reading.throttle_reasons is None
                                           else throttle_reason_mask(reading.throttle_reasons)),
}


class ScrapeBusy(Exception):
    """A read another scrape started has not ended within READ_WAIT_S."""


def _label_value(value):
    """A label value as the text format writes it: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value):
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def render(readings, source_name, read_seconds, hostname):
    """The text format of one read: per field of COUNTERS its HELP and TYPE, then a sample per GPU that has it.

    Labels as dcgm-exporter's: ``gpu`` the index, ``device`` nvidia<index>, ``Hostname`` the host's name. Never
    ``host``: the scrape configuration puts the inventory name there, and a served one would be renamed to
    exported_host.
    """
    lines = []
    for name, kind, description in COUNTERS:
        lines += ["# HELP %s %s" % (name, description), "# TYPE %s %s" % (name, kind)]
        for reading in sorted(readings, key=lambda reading: reading.index):
            value = _VALUES[name](reading)
            if value is None:
                continue
            lines.append('%s{%s="%d",device="nvidia%d",Hostname="%s"} %s' % (
                name, GPU_LABEL, reading.index, reading.index, _label_value(hostname), _number(value)))
    lines += ["# HELP %s Where the GPU readings come from: nvml or nvidia-smi." % SOURCE_INFO,
              "# TYPE %s gauge" % SOURCE_INFO,
              '%s{source="%s"} 1' % (SOURCE_INFO, _label_value(source_name)),
              "# HELP %s How long the last read of every GPU took." % READ_SECONDS,
              "# TYPE %s gauge" % READ_SECONDS,
              "%s %s" % (READ_SECONDS, _number(round(read_seconds, 6)))]
    return "\n".join(lines) + "\n"


class Scraper:
    """What /metrics answers: one read of every GPU, shared by scrapes that come within ``min_interval``.

    ``open_source``: a callable that returns a gpu_power.PowerSource (open_power_source in use, a stand-in in tests).
    """

    def __init__(self, open_source, hostname, min_interval=MIN_READ_INTERVAL_S, wait=READ_WAIT_S,
                 clock=time.monotonic):
        self._open = open_source
        self._hostname = hostname
        self._min_interval = min_interval
        self._wait = wait
        self._clock = clock
        self._lock = threading.Lock()
        self._source = None
        self._last = None  # (when, text)

    def metrics(self):
        if not self._lock.acquire(timeout=self._wait):
            raise ScrapeBusy("a read of the GPUs started by another scrape has run for more than %gs" % self._wait)
        try:
            if self._last is not None and self._clock() - self._last[0] < self._min_interval:
                return self._last[1]
            if self._source is None:
                self._source = self._open()
            started = self._clock()
            try:
                readings = self._source.read()
            except Exception:
                # Opened again at the next scrape: a driver reloaded under NVML leaves its handles dead.
                self.close()
                raise
            text = render(readings, self._source.name, self._clock() - started, self._hostname)
            self._last = (self._clock(), text)
            return text
        finally:
            self._lock.release()

    def close(self):
        source, self._source = self._source, None
        if source is not None:
            try:
                source.close()
            except Exception:  # nothing to do about a source that fails to close; it is dropped all the same
                pass


def _handler(scraper):
    class Handler(BaseHTTPRequestHandler):
        timeout = CLIENT_TIMEOUT_S
        server_version = "sm120-gpu-exporter"

        def _answer(self, status, body, content_type="text/plain; charset=utf-8"):
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_GET(self):  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                try:
                    text = scraper.metrics()
                except Exception as exc:
                    sys.stderr.write("sm120-gpu-exporter: cannot read the GPUs: %s\n" % exc)
                    self._answer(503, "cannot read the GPUs: %s\n" % exc)
                    return
                self._answer(200, text, CONTENT_TYPE)
            elif path == "/":
                self._answer(200, "sm120.sglang GPU exporter: /metrics\n")
            else:
                self._answer(404, "not found: %s serves /metrics\n" % self.server_version)

        do_HEAD = do_GET  # noqa: N815 (http.server's name)

        def log_message(self, format, *args):  # noqa: A002 (http.server's signature)
            # One line per scrape every 15 s would fill the journal; failures are written in do_GET.
            pass

    return Handler


def _server_class(address):
    """ThreadingHTTPServer for the address's family (an IPv6 address or name needs AF_INET6)."""
    family = socket.getaddrinfo(address, None, 0, socket.SOCK_STREAM)[0][0]

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True

    return Server


def make_server(scraper, address, port):
    return _server_class(address)((address, port), _handler(scraper))


def _loopback_warning(address):
    """A name that resolves to loopback listens where no other host reaches it: Debian's /etc/hosts maps the host's
    own name to 127.0.1.1."""
    if address in ("localhost", "127.0.0.1", "::1"):
        return None
    try:
        resolved = socket.getaddrinfo(address, None, 0, socket.SOCK_STREAM)[0][4][0]
    except OSError:
        return None
    if resolved.startswith("127.") or resolved == "::1":
        return ("sm120-gpu-exporter: %s resolves to %s, a loopback address: Prometheus on another host cannot scrape "
                "it. Set ansible_host to the host's address, or gpu_exporter_listen_address.\n" % (address, resolved))
    return None


def _arguments(argv):
    parser = argparse.ArgumentParser(prog="sm120-gpu-exporter", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--listen-address", default="127.0.0.1",
                        help="the address to listen on (default 127.0.0.1; 0.0.0.0 for every IPv4 address)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="the port (default %d)" % DEFAULT_PORT)
    parser.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi, where the Python has no pynvml")
    parser.add_argument("--once", action="store_true",
                        help="print one read of /metrics and exit: 0 with at least one GPU's power, 1 otherwise")
    arguments = parser.parse_args(argv)
    if not 1 <= arguments.port <= 65535:
        parser.error("--port %d is outside 1-65535" % arguments.port)
    return arguments


def main(argv=None, open_source=None):
    arguments = _arguments(sys.argv[1:] if argv is None else argv)
    if open_source is None:
        def open_source():
            return open_power_source(arguments.nvidia_smi, activity=True, settings_once=False)
    scraper = Scraper(open_source, socket.gethostname())
    try:
        text = scraper.metrics()
    except Exception as exc:  # no source (PowerSourceUnavailable), or nvidia-smi past its timeout: say which, and go
        sys.stderr.write("sm120-gpu-exporter: no GPU to read: %s\n" % (str(exc) or type(exc).__name__))
        return 1
    if arguments.once:
        sys.stdout.write(text)
        if "\n%s{" % POWER_USAGE not in text:
            sys.stderr.write("sm120-gpu-exporter: no GPU reported its power draw\n")
            return 1
        return 0
    warning = _loopback_warning(arguments.listen_address)
    if warning:
        sys.stderr.write(warning)
    try:
        server = make_server(scraper, arguments.listen_address, arguments.port)
    except OSError as exc:
        sys.stderr.write("sm120-gpu-exporter: cannot listen on %s port %d: %s\n"
                         % (arguments.listen_address, arguments.port, exc))
        return 1
    sys.stderr.write("sm120-gpu-exporter: serving /metrics on %s port %d\n" % (arguments.listen_address, arguments.port))
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        scraper.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

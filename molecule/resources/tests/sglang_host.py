"""Helpers for testinfra verifiers: an installed SGLang's RECORD, and the gate entries of the release data."""

import base64
import csv
import io
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases  # noqa: E402

DATA = sglang_releases.load()
# molecule.yml's sglang_service_api_key (it spells the dollar sign $$): quotes, a $ and a % travel intact.
API_KEY = 'molecule-key $with "quotes" and 100%'


def site_packages(host, venv):
    out = host.check_output("%s/bin/python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'" % venv)
    return out.strip()


def installed_version(host, venv):
    return host.check_output(
        "%s/bin/python -c 'from importlib.metadata import version; print(version(\"sglang\"))'" % venv).strip()


def record_sha256(host, venv):
    """Path relative to site-packages -> sha256 hex, from the installed wheel's RECORD."""
    site = site_packages(host, venv)
    record = host.check_output("ls -d %s/sglang-*.dist-info" % site).strip() + "/RECORD"
    hashes = {}
    for row in csv.reader(io.StringIO(host.file(record).content_string)):
        if len(row) >= 2 and row[1].startswith("sha256="):
            digest = row[1][len("sha256="):]
            hashes[row[0]] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return site, hashes


def gate_files(version, gates=None):
    """(gate id, relative path, edits) of the source entries of these gates (all: None) for the release."""
    for gate in DATA["gates"]:
        if gates is not None and gate not in gates:
            continue
        entry = sglang_releases.gate_entry(DATA, gate, version)
        for file_entry in entry.get("files") or []:
            yield gate, file_entry["path"], file_entry["edits"]


def processes_holding(host, secret):
    """PIDs whose command line holds the text. It travels hex-encoded, so that no process of this check holds it."""
    script = ("import os,sys\n"
              "s=bytes.fromhex(sys.argv[1])\n"
              "for p in os.listdir('/proc'):\n"
              "    if p.isdigit():\n"
              "        try: c=open('/proc/%s/cmdline'%p,'rb').read()\n"
              "        except OSError: continue\n"
              "        if s in c: print(p)\n")
    return host.check_output("python3 -c %s %s" % (_quote(script), secret.encode().hex())).split()


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"

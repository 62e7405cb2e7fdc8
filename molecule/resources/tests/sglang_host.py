"""Helpers for testinfra verifiers: an installed SGLang's RECORD and the catalog."""

import base64
import csv
import io
import os

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CATALOG_PATH = os.path.join(ROOT, "roles", "sm120_patches", "vars", "catalog.yml")
GATES_RANGE = ">=0.5.8,<0.5.10"


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


def catalog_files():
    """(gate id, relative path, edits) of every gate's 0.5.8-0.5.9 entry."""
    with open(CATALOG_PATH) as handle:
        catalog = yaml.safe_load(handle)["__sm120_patches_catalog"]
    for gate in catalog["gates"]:
        for release in gate["releases"]:
            if release["versions"] == GATES_RANGE:
                for entry in release["files"]:
                    yield gate["id"], entry["path"], entry["edits"]

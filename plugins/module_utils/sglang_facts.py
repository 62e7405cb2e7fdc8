# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an SGLang environment holds, read from its distribution metadata: pure helpers of sglang_facts.

Nothing here imports SGLang or torch (that would take seconds and a GPU stack);
it reads what pip wrote: versions, RECORD hashes, torch/version.py, direct_url.json.
"""

from __future__ import annotations

import base64
import json
import re

# Run with the environment's own interpreter: where its packages live, and its version.
INTERPRETER_PROBE = (
    "import json, sys, sysconfig; "
    "paths = sysconfig.get_paths(); "
    "print(json.dumps({'python_version': '%d.%d.%d' % sys.version_info[:3], "
    "'purelib': paths['purelib'], 'platlib': paths['platlib'], 'sys_path': [p for p in sys.path if p]}))"
)

_TORCH_CUDA = re.compile(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)


class FactsError(Exception):
    """The environment cannot be read; the message names what and why."""


def canonical_name(name):
    """PEP 503's normalised distribution name: Flashinfer_Python -> flashinfer-python."""
    return re.sub(r"[-_.]+", "-", name).lower()


def public_version(version):
    """The version without its local part: 2.9.1+cu128 -> 2.9.1."""
    return version.split("+", 1)[0] if version else version


def parse_interpreter_probe(stdout):
    try:
        data = json.loads(stdout)
        return {"python_version": data["python_version"], "purelib": data["purelib"], "platlib": data["platlib"],
                "sys_path": list(data["sys_path"])}
    except (ValueError, KeyError, TypeError) as exc:
        raise FactsError("the interpreter's answer is not what was asked for (%s): %r" % (exc, stdout[:200]))


def record_sha256(entries):
    """``path -> sha256 hex`` from RECORD entries given as (path, hash mode, urlsafe-base64 digest)."""
    hashes = {}
    for path, mode, digest in entries:
        if mode == "sha256" and digest:
            hashes[str(path)] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return hashes


def parse_torch_cuda(version_py):
    """The CUDA release torch was built for, from torch/version.py; None for a CPU build or no file."""
    if not version_py:
        return None
    found = _TORCH_CUDA.search(version_py)
    return found.group(1) if found else None


def parse_direct_url(text):
    """Where pip took a distribution from when it was a direct URL (PEP 610), else None."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    vcs = data.get("vcs_info") or {}
    return {"url": data.get("url"), "ref": vcs.get("requested_revision"), "commit": vcs.get("commit_id"),
            "subdirectory": data.get("subdirectory")}


def parse_environment_file(text):
    """An EnvironmentFile= the collection wrote (roles/sglang_service/templates/sglang.env.j2): name -> value, its
    comments and blank lines left out, a double-quoted value unquoted the way systemd reads it."""
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        name, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        values[name.strip()] = value
    return values


def parse_state_file(name, path, text):
    """A record the collection keeps on the host: {} when absent. JSON (the patch ledger …), or, for a path ending in
    .env, the service's environment file (what the server was started on)."""
    if text is None:
        return {}
    if path.endswith(".env"):
        return parse_environment_file(text)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FactsError("%s (%s) is not JSON: %s. Move it away and run again; the collection rewrites it."
                         % (path, name, exc))
    if not isinstance(data, dict):
        raise FactsError("%s (%s) holds %s, not a JSON object. Move it away and run again." % (path, name, type(data).__name__))
    return data


def not_installed(python, reason, python_version=None, location=None):
    return {"installed": False, "python": python, "python_version": python_version, "reason": reason,
            "version": None, "location": location, "packages": {}, "torch_cuda": None, "sglang_source": None,
            "files": {}}

#!/usr/bin/python
# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_facts
short_description: Read an SGLang environment - release, package directory, shipped hashes - into facts
version_added: "0.2.0"
description:
  - Reads the SGLang installed for the interpreter O(python) from its distribution metadata, without importing SGLang
    or torch, and returns it as the fact RV(ansible_facts.sglang_facts).
  - Gives the SGLang release and the directory it is imported from, the versions of O(packages), the CUDA release torch
    was built for, where SGLang came from when pip took it from a direct URL (a git checkout), and for each path of
    O(files) its absolute path and the sha256 the wheel's C(RECORD) holds for it, the shipped bytes.
  - Also reads the JSON records of O(state_files) (the patch ledger, the record of rejected gates) into
    RV(ansible_facts.sglang_state); a record that does not exist reads as an empty object.
  - An interpreter that does not exist or does not run, or has no SGLang, is not an error; the facts say why.
  - It only reads and always returns C(changed=false).
options:
  python:
    description:
      - The interpreter of the SGLang environment, for example the venv's C(bin/python).
      - Without it only O(state_files) are read and RV(ansible_facts.sglang_facts) is not returned.
    type: path
  files:
    description:
      - Paths relative to the package root (C(sglang/srt/layers/communicator.py)) whose C(RECORD) sha256 to return.
    type: list
    elements: str
    default: []
  packages:
    description:
      - Distributions whose installed versions to return, besides C(sglang). Names are compared as PEP 503 normalises
        them (C(flashinfer_python) is C(flashinfer-python)).
    type: list
    elements: str
    default: []
  state_files:
    description:
      - JSON files on the host to read, each name mapped to its path; returned under the same names.
    type: dict
    default: {}
extends_documentation_fragment:
  - sm120.sglang.attributes
  - sm120.sglang.attributes.read_only
  - sm120.sglang.attributes.facts
notes:
  - The module runs on the target's own Python, which needs C(importlib.metadata) (3.8 or later); the SGLang
    interpreter only answers where its packages are.
seealso:
  - module: sm120.sglang.source_patch
author:
  - sm120.sglang contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the SGLang in /opt/sglang and the shipped hash of a gate file
  sm120.sglang.sglang_facts:
    python: /opt/sglang/bin/python
    files: [sglang/srt/layers/communicator.py]
    packages: [flashinfer-python, torch]
    state_files:
      ledger: /var/lib/sm120-sglang/patch-ledger.json

- name: Stop unless SGLang 0.5.23 is installed
  ansible.builtin.assert:
    that: sglang_facts.installed and sglang_facts.version == '0.5.23'
    fail_msg: "{{ sglang_facts.reason | default('another release is installed') }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: always
  type: complex
  contains:
    sglang_facts:
      description: The SGLang environment of O(python).
      returned: when O(python) is given
      type: dict
      contains:
        installed:
          description: Whether that interpreter runs and has SGLang.
          type: bool
          sample: true
        reason:
          description: Why RV(ansible_facts.sglang_facts.installed) is V(false); null otherwise.
          type: str
          sample: sglang is not installed for /opt/sglang/bin/python
        python:
          description: The interpreter asked.
          type: str
          sample: /opt/sglang/bin/python
        python_version:
          description: Its version, or null when it does not run.
          type: str
          sample: 3.11.2
        version:
          description: The installed SGLang release.
          type: str
          sample: 0.5.23
        location:
          description: The directory the C(sglang) package is imported from (before SGLang is installed, the
            interpreter's site-packages).
          type: str
          sample: /opt/sglang/lib/python3.11/site-packages
        packages:
          description: Installed version of C(sglang) and of each of O(packages), null when not installed.
          type: dict
          sample: {sglang: 0.5.23, flashinfer-python: 0.7.2, torch: 2.14.1}
        torch_cuda:
          description: The CUDA release torch was built for, null for a CPU build or no torch.
          type: str
          sample: "13.0"
        sglang_source:
          description: For SGLang installed from a direct URL (PEP 610), its url, ref, commit and subdirectory.
          type: dict
          sample: null
        files:
          description: For each of O(files), its absolute C(path) and the C(record_sha256) of the wheel's RECORD
            (null when RECORD has no hash for it).
          type: dict
          sample: {sglang/srt/layers/communicator.py: {path: /opt/sglang/lib/python3.11/site-packages/sglang/srt/layers/communicator.py,
                   record_sha256: 5b1c0e2a...}}
    sglang_state:
      description: Each of O(state_files) parsed, an empty object when the file does not exist.
      returned: always
      type: dict
      sample: {ledger: {}}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sm120.sglang.plugins.module_utils.sglang_facts import (
    INTERPRETER_PROBE,
    FactsError,
    canonical_name,
    not_installed,
    parse_direct_url,
    parse_interpreter_probe,
    parse_state_file,
    parse_torch_cuda,
    record_sha256,
)

try:
    from importlib import metadata
except ImportError:  # Python < 3.8
    metadata = None


def _distributions(paths):
    """Canonical name -> the first distribution on those paths, in their order (as import would find it)."""
    found = {}
    for dist in metadata.distributions(path=paths):
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical_name(name), dist)
    return found


def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _sglang(module, python):
    if not os.path.exists(python):
        return not_installed(python, "%s does not exist" % python)
    rc, stdout, stderr = module.run_command([python, "-c", INTERPRETER_PROBE])
    if rc != 0:
        return not_installed(python, "%s does not run (rc %d): %s" % (python, rc, (stderr or stdout).strip()[:300]))
    try:
        probe = parse_interpreter_probe(stdout)
    except FactsError as exc:
        return not_installed(python, to_native(exc))
    dists = _distributions(probe["sys_path"])
    sglang = dists.get("sglang")
    if sglang is None:
        return not_installed(python, "sglang is not installed for %s" % python, probe["python_version"],
                             os.path.normpath(probe["purelib"]))
    hashes = record_sha256((entry, entry.hash.mode, entry.hash.value) for entry in sglang.files or []
                           if entry.hash is not None)
    torch = dists.get("torch")
    names = ["sglang"] + [canonical_name(name) for name in module.params["packages"]]
    return {
        "installed": True,
        "reason": None,
        "python": python,
        "python_version": probe["python_version"],
        "version": sglang.version,
        "location": os.path.normpath(str(sglang.locate_file(""))),
        "packages": dict((name, dists[name].version if name in dists else None) for name in names),
        "torch_cuda": parse_torch_cuda(_read_text(str(torch.locate_file("torch/version.py")))) if torch else None,
        "sglang_source": parse_direct_url(sglang.read_text("direct_url.json")),
        "files": dict((path, {"path": os.path.normpath(str(sglang.locate_file(path))), "record_sha256": hashes.get(path)})
                      for path in module.params["files"]),
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path"),
            files=dict(type="list", elements="str", default=[]),
            packages=dict(type="list", elements="str", default=[]),
            state_files=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    if metadata is None:
        module.fail_json(msg="the target's Python has no importlib.metadata (3.8 or later is needed)")
    state = {}
    for name, path in module.params["state_files"].items():
        text = None
        if os.path.exists(path):
            text = _read_text(path)
            if text is None:
                module.fail_json(msg="cannot read %s (%s); make it readable, or move it away to start it anew" % (path, name))
        try:
            state[name] = parse_state_file(name, path, text)
        except FactsError as exc:
            module.fail_json(msg=to_native(exc))
    facts = {"sglang_state": state}
    if module.params["python"]:
        facts["sglang_facts"] = _sglang(module, module.params["python"])
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()

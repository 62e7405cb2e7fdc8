#!/usr/bin/python
# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: phase_stamp
short_description: Whether a phase's inputs and host state are as it left them, and record them once it ran through
version_added: "0.9.0"
description:
  - A phase of the deploy (a role, or the part of one that configures the host) that ran through records a stamp
    on the host, a JSON file holding the digest of its inputs (O(inputs), computed on the controller by the lookup
    P(sm120.sglang.phase_inputs#lookup) from the role's variables and code) and the host's side of it, the sha256 of
    every file in O(files) and the C(systemctl is-enabled)/C(is-active) answers of every unit in O(units).
  - With O(state=compared), reads the stamp and the host and returns RV(unchanged), true only where the inputs, every
    file and every unit are as recorded and nothing forces the phase (O(tag) among O(run_tags), or
    O(skip_unchanged) false). Where the stamp is missing or unreadable, an input is another, a file was edited, added
    or removed or a unit stopped or disabled, the phase runs, and RV(reason) says why. Changes nothing.
  - With O(state=recorded), writes the stamp of the host as it is now (atomically, a temporary file renamed over
    it), changed only where it differs from the one recorded. Run it last, once the phase ran through.
  - The stamp holds no time, so recording the same state again changes nothing.
options:
  path:
    description: The stamp file, under the collection's state directory (C(sm120_state_dir)).
    type: path
    required: true
  phase:
    description: The phase's name, in the stamp and in RV(reason).
    type: str
    required: true
  inputs:
    description: The digest of the phase's inputs, P(sm120.sglang.phase_inputs#lookup).
    type: str
    required: true
  files:
    description: The files the phase owns; a file that does not exist is recorded as absent.
    type: list
    elements: path
    default: []
  units:
    description: The systemd units the phase keeps; without systemctl on the host, none may be given.
    type: list
    elements: str
    default: []
  state:
    description: V(compared) says whether the phase may be skipped; V(recorded) writes the stamp.
    type: str
    choices: [compared, recorded]
    default: compared
  tag:
    description: The phase's tag; named in O(run_tags) (C(--tags TAG)), the phase runs whatever the stamp says.
    type: str
    default: ""
  run_tags:
    description: The run's tags, C(ansible_run_tags).
    type: list
    elements: str
    default: []
  skip_unchanged:
    description: Whether an unchanged phase may be skipped at all (C(sm120_skip_unchanged)); false, it always runs.
    type: bool
    default: true
extends_documentation_fragment:
  - sm120.sglang.attributes
attributes:
  check_mode:
    support: full
    description: V(compared) only reads; V(recorded) reports whether the stamp would change, and writes nothing.
  diff_mode:
    support: full
    description: V(recorded) returns the stamp before and after.
author:
  - sm120.sglang contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Compare the driver phase's inputs, files and units with its last run
  sm120.sglang.phase_stamp:
    path: /var/lib/sm120-sglang/phases/driver.json
    phase: driver
    inputs: "{{ lookup('sm120.sglang.phase_inputs', 'gpu_driver') }}"
    files: [/etc/modprobe.d/blacklist-nouveau.conf, /etc/systemd/system/nvidia-persistenced.service]
    units: [nvidia-persistenced.service]
    tag: driver
    run_tags: "{{ ansible_run_tags }}"
  register: driver_stamp

- name: Record them once the phase ran through
  sm120.sglang.phase_stamp:
    path: /var/lib/sm120-sglang/phases/driver.json
    phase: driver
    inputs: "{{ lookup('sm120.sglang.phase_inputs', 'gpu_driver') }}"
    files: [/etc/modprobe.d/blacklist-nouveau.conf, /etc/systemd/system/nvidia-persistenced.service]
    units: [nvidia-persistenced.service]
    state: recorded
"""

RETURN = r"""
unchanged:
  description: Whether the phase may be skipped (O(state=compared)); false with O(state=recorded).
  returned: always
  type: bool
  sample: true
reason:
  description: Why the phase runs or is skipped, naming what changed.
  returned: always
  type: str
  sample: "phase driver runs: /etc/modprobe.d/blacklist-nouveau.conf was changed since it last ran through"
stamp:
  description: The host's stamp as it is now (what O(state=recorded) writes).
  returned: always
  type: dict
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sm120.sglang.plugins.module_utils.phase_stamp import (
    PhaseStampError,
    decide,
    document,
    fingerprint,
    forced_by,
    render,
)


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError):
        # No stamp there (a file in place of its directory: recording it fails, naming the directory).
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            phase=dict(type="str", required=True),
            inputs=dict(type="str", required=True),
            files=dict(type="list", elements="path", default=[]),
            units=dict(type="list", elements="str", default=[]),
            state=dict(type="str", choices=["compared", "recorded"], default="compared"),
            tag=dict(type="str", default=""),
            run_tags=dict(type="list", elements="str", default=[]),
            skip_unchanged=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    units = {}
    if params["units"]:
        systemctl = module.get_bin_path("systemctl")
        if systemctl is None:
            module.fail_json(msg="phase %s keeps units %s but systemctl is not on the PATH of the target; the stamp "
                                 "needs systemd to read them" % (params["phase"], ", ".join(params["units"])))
        for unit in params["units"]:
            # Both answer with a non-zero status for a unit that is not enabled or not active: the words are the state.
            enabled = module.run_command([systemctl, "is-enabled", unit])[1].strip()
            active = module.run_command([systemctl, "is-active", unit])[1].strip()
            units[unit] = (enabled, active)
    try:
        # A path that is no regular file (absent, or a directory) is recorded as absent.
        host = fingerprint({path: module.sha256(path) if os.path.isfile(path) else None for path in params["files"]},
                           units)
        now = document(params["phase"], params["inputs"], host)
        recorded_text = _read(params["path"])
        if params["state"] == "compared":
            verdict = decide(params["phase"], recorded_text, params["inputs"], host,
                             forced_by(params["tag"], params["run_tags"], params["skip_unchanged"]))
            module.exit_json(changed=False, unchanged=verdict["unchanged"], reason=verdict["reason"], stamp=now)
    except PhaseStampError as exc:
        module.fail_json(msg=str(exc))

    text = render(now)
    changed = recorded_text != text
    result = dict(changed=changed, unchanged=False, stamp=now,
                  reason="phase %s: %s" % (params["phase"], "stamp recorded" if changed else "stamp already recorded"))
    if module._diff:
        result["diff"] = {"before": recorded_text or "", "after": text, "before_header": params["path"],
                          "after_header": params["path"]}
    if changed and not module.check_mode:
        directory = os.path.dirname(params["path"])
        try:
            os.makedirs(directory, mode=0o755, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".phase-stamp.", dir=directory)
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.chmod(temporary, 0o644)
        except OSError as exc:
            module.fail_json(msg="phase %s: cannot write its stamp in %s (%s); the phase ran through, but its next run "
                                 "will run it again. Fix: make %s writable for the deploy's user (become)"
                             % (params["phase"], directory, exc, directory))
        module.atomic_move(temporary, params["path"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()

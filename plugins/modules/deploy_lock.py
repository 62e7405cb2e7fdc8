#!/usr/bin/python
# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: deploy_lock
short_description: Take or give back a host's deploy lock, atomically
version_added: "0.9.0"
description:
  - The lock is a directory made with one C(mkdir) (atomic on a local filesystem) holding its owner in C(owner.json)
    (the run's controller, user, C(ansible-playbook) process id, run id and start).
  - With O(state=present), takes a free lock, or reports the lock as taken where this run already holds it; a lock
    held by another run is not touched and its owner is returned in RV(holder), for the controller to decide
    whether that run is gone (role C(sm120.sglang.deploy_lock)). With O(replace) naming that holder's run id, the
    lock is moved aside in one rename and taken; of two runs replacing the same holder, one wins.
  - With O(state=absent), removes the lock where O(run_id) holds it, and leaves another run's lock alone.
options:
  path:
    description: The lock directory.
    type: path
    required: true
  state:
    description: V(present) takes the lock, V(absent) gives it back.
    type: str
    choices: [present, absent]
    default: present
  owner:
    description: The owner to record, with at least C(run_id); required with O(state=present).
    type: dict
  run_id:
    description: The run giving the lock back; required with O(state=absent).
    type: str
  replace:
    description: The run id of a holder found stale, whose lock is taken over (C(malformed) for a lock without a
      readable owner).
    type: str
extends_documentation_fragment:
  - sm120.sglang.attributes
attributes:
  check_mode:
    support: full
    description: Reports whether the lock would be taken or given back, and who holds it, without writing.
  diff_mode:
    support: none
    description: The lock is the run's own state, not configuration; there is no diff.
author:
  - sm120.sglang contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Take the deploy lock
  sm120.sglang.deploy_lock:
    path: /var/lib/sm120-sglang/deploy.lock
    owner: {run_id: "controller-4242-1796290000", controller: controller, user: ops, pid: 4242}
  register: lock

- name: Give it back
  sm120.sglang.deploy_lock:
    path: /var/lib/sm120-sglang/deploy.lock
    state: absent
    run_id: "controller-4242-1796290000"
"""

RETURN = r"""
taken:
  description: Whether this run holds the lock now (O(state=present)).
  returned: state is present
  type: bool
released:
  description: Whether this call gave the lock back (O(state=absent)).
  returned: state is absent
  type: bool
holder:
  description: The owner found in the lock before this call, C(null) where there was none; C(run_id) is
    C(malformed) where the directory has no readable C(owner.json).
  returned: always
  type: dict
replaced:
  description: The stale holder whose lock was taken over.
  returned: state is present
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sm120.sglang.plugins.module_utils.deploy_lock import release, take


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            owner=dict(type="dict"),
            run_id=dict(type="str"),
            replace=dict(type="str"),
        ),
        required_if=[("state", "present", ("owner",)), ("state", "absent", ("run_id",))],
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params["state"] == "absent":
            result = release(params["path"], params["run_id"], module.check_mode)
        else:
            owner = params["owner"]
            if not isinstance(owner.get("run_id"), str) or not owner["run_id"]:
                module.fail_json(msg="owner needs a run_id (a string naming this run), got %r" % (owner,))
            result = take(params["path"], owner, params["replace"], module.check_mode)
    except OSError as exc:
        module.fail_json(msg="the deploy lock %s: %s" % (params["path"], to_native(exc)))
    module.exit_json(**result)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: health_wait
short_description: Wait until a server's health URL answers 200, or its systemd unit says it will not
version_added: "0.9.0"
description:
  - Asks O(url) (a server's C(/health)) every O(delay) seconds until it answers 200, and reads its unit O(unit)
    (C(systemctl show)) at each poll, so that a server that exits at every start fails the wait at once instead of
    after O(timeout).
  - Fails when the unit's process exited and systemd restarted it since the wait began (C(NRestarts) grew), when the
    unit waits to restart it (C(SubState=auto-restart)), when the unit is C(failed), or C(inactive) (stopped, or its
    process exited with status 0), without a start or restart job queued; and when O(timeout) seconds passed.
    The failure's message names what was seen and the command whose output says why (C(journalctl -u UNIT)).
  - A refused connection (the weights load) and any status but 200 (SGLang answers 503 while it warms up) are
    waited for.
  - It only reads and always returns C(changed=false).
options:
  url:
    description: The URL to ask, for example C(http://127.0.0.1:30000/health).
    type: str
    required: true
  unit:
    description: The systemd unit that runs the server, for example C(sglang-glm-5-nvfp4.service).
    type: str
    required: true
  timeout:
    description: Seconds to wait for a 200 in all, from the module's start.
    type: float
    required: true
  delay:
    description: Seconds between two polls.
    type: float
    default: 10
  request_timeout:
    description: Seconds one request may take.
    type: float
    default: 10
  headers:
    description: Headers of each request, for example an C(Authorization) header. Not logged.
    type: dict
    default: {}
extends_documentation_fragment:
  - sm120.sglang.attributes
attributes:
  check_mode:
    support: none
    description: >-
      Skipped in check mode, as M(ansible.builtin.uri) is: after a run that restarted nothing there is no new server
      to wait for (role C(sm120.sglang.sglang_service) does not reach its wait in check mode).
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
notes:
  - Needs C(systemctl) on the target; C(NRestarts) needs systemd 235 or later (older ones count as no restart, and
    C(auto-restart) still fails the wait).
seealso:
  - module: ansible.builtin.uri
author:
  - sm120.sglang contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Wait for /health to answer 200, or the server to fail
  sm120.sglang.health_wait:
    url: http://127.0.0.1:30000/health
    unit: sglang-glm-5-nvfp4.service
    timeout: 1800
    delay: 10
  register: health

- name: Say how long the load took
  ansible.builtin.debug:
    msg: "{{ health.reason }}"
"""

RETURN = r"""
verdict:
  description: V(healthy), or V(failed) (then the module fails with RV(reason) as its message).
  returned: always
  type: str
  sample: failed
reason:
  description: What the last poll saw, in words, and what to do about a failure.
  returned: always
  type: str
  sample: >-
    sglang-glm-5-nvfp4.service exited and systemd restarted it 1 time since the wait began (NRestarts 0 -> 1, now
    activating (start-post)); journalctl -u sglang-glm-5-nvfp4.service says why. Fix what it names and run the play
    again.
status:
  description: The HTTP status of the last answer; null where nothing answered.
  returned: always
  type: int
  sample: 200
answer:
  description: The last answer in words, the reason where nothing answered.
  returned: always
  type: str
  sample: no answer ([Errno 111] Connection refused)
waited:
  description: Seconds from the start of the wait to the last poll.
  returned: always
  type: float
  sample: 412.3
unit_props:
  description: The unit's properties at the last poll, as C(systemctl show) printed them; C(NRestarts) and
    C(MainPID) as numbers, C(Job) empty without a queued job, C(ExecMainStartTimestamp) when the running process
    started (empty where it never did).
  returned: always
  type: dict
  sample: {ActiveState: activating, SubState: start-post, NRestarts: 0, MainPID: 4242, Job: "181",
           ExecMainStartTimestamp: "Fri 2026-12-04 20:00:00 UTC"}
restarts_at_start:
  description: The unit's C(NRestarts) when the wait began, which later polls compare with.
  returned: always
  type: int
  sample: 0
server:
  description: Which server process runs at the last poll, its unit's start and main PID
    (C(ExecMainStartTimestamp, PID MainPID)); empty where the unit's process never started.
  returned: always
  type: str
  sample: Fri 2026-12-04 20:00:00 UTC, PID 4242
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sm120.sglang.plugins.module_utils.health_wait import (
    HEALTHY,
    parse_unit_props,
    probe_health,
    show_argv,
    wait,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            unit=dict(type="str", required=True),
            timeout=dict(type="float", required=True),
            delay=dict(type="float", default=10),
            request_timeout=dict(type="float", default=10),
            # An Authorization header carries the API key.
            headers=dict(type="dict", default={}, no_log=True),
        ),
        supports_check_mode=False,
    )
    params = module.params
    if params["delay"] <= 0 or params["request_timeout"] <= 0:
        module.fail_json(msg="delay and request_timeout must be more than 0 s, got %s and %s"
                         % (params["delay"], params["request_timeout"]))
    systemctl = module.get_bin_path("systemctl")
    if systemctl is None:
        module.fail_json(msg="systemctl is not on the PATH of the target, so the state of %s cannot be read; the "
                             "wait needs systemd" % params["unit"])
    argv = show_argv(systemctl, params["unit"])

    def read_unit():
        rc, stdout, stderr = module.run_command(argv)
        if rc != 0:
            module.fail_json(msg="%s failed (rc %d): %s" % (" ".join(argv), rc, (stderr or stdout).strip()[:300]))
        return parse_unit_props(stdout)

    result = wait(lambda: probe_health(params["url"], params["request_timeout"], params["headers"]), read_unit,
                  params["timeout"], params["delay"], unit=params["unit"], url=params["url"])
    if result["verdict"] != HEALTHY:
        module.fail_json(msg=result["reason"], changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()

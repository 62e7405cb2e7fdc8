# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Documented in upgrade_verdict.yml beside this file.

from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiments
from ansible_collections.sm120.sglang.plugins.plugin_utils import upgrade


def upgrade_verdict(previous_baseline, current, settings, previous_release, release):
    try:
        return upgrade.upgrade_verdict(previous_baseline, current, settings, previous_release, release)
    except experiments.ExperimentError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {"upgrade_verdict": upgrade_verdict}

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Four filters in one file, so each is documented in its own sidecar, as
# ansible.builtin's core filters are: smoke_report_markdown.yml, smoke_report_svg.yml,
# smoke_fleet_markdown.yml and bench_serving_jsonl.yml. A DOCUMENTATION here would be shown by ansible-doc
# for all three (ansible.utils.plugin_docs reads the .py first when it has docs).

from ansible.errors import AnsibleFilterError

from ansible_collections.sm120.sglang.plugins.plugin_utils.bench_record import RecordError, bench_serving_jsonl
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_report import (
    ReportError,
    smoke_fleet_markdown,
    smoke_report_markdown,
)
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_report_svg import smoke_report_svg
from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import ThresholdError


def _filter(render):
    def run_filter(value):
        try:
            return render(value)
        except (ReportError, ThresholdError, RecordError) as exc:
            raise AnsibleFilterError(str(exc))

    run_filter.__name__ = render.__name__
    run_filter.__doc__ = render.__doc__
    return run_filter


class FilterModule:
    def filters(self):
        return {
            "smoke_report_markdown": _filter(smoke_report_markdown),
            "smoke_report_svg": _filter(smoke_report_svg),
            "smoke_fleet_markdown": _filter(smoke_fleet_markdown),
            "bench_serving_jsonl": _filter(bench_serving_jsonl),
        }

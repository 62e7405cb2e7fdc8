# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

# Several filters in one file, each documented in its own sidecar .yml of the same name beside this file.
# prometheus_alert_rules and prometheus_scrape_config take their input and one mapping of the rest by name (by_name):
# a call of eight or twelve values beside its input says what each is, and a name missing or unknown fails naming it.

from ansible_collections.sm120.sglang.plugins.plugin_utils import alert_rules, grafana_dashboard, prometheus_config
from ansible_collections.sm120.sglang.plugins.plugin_utils.filter_errors import by_name, refusing

_wrap = refusing(alert_rules.AlertRulesError, prometheus_config.ScrapeConfigError)


def _counters(_input=None):
    """The counters file depends on nothing; a filter takes an input all the same."""
    return alert_rules.dcgm_counters()


class FilterModule:
    def filters(self):
        return {
            "prometheus_alert_rules": _wrap(by_name(alert_rules.alert_rules, "prometheus_alert_rules")),
            "prometheus_dcgm_counters": _counters,
            "prometheus_scrape_config": _wrap(by_name(prometheus_config.scrape_config, "prometheus_scrape_config")),
            "prometheus_grafana_dashboard": _wrap(grafana_dashboard.dashboard),
            "prometheus_grafana_provisioning": _wrap(grafana_dashboard.provisioning),
            "prometheus_published_loads": prometheus_config.published_loads,
        }

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deprecated names of the experiments' settings: which a host sets, each named with its new name."""

from __future__ import annotations

from ansible_collections.sm120.sglang.plugins.plugin_utils import experiment_settings as settings


def test_no_old_name_set_gives_no_warning():
    assert settings.deprecated_names_in_use([]) == []
    assert settings.deprecated_names_in_use(None) == []
    # The smoke test's own variables are not deprecated.
    assert settings.deprecated_names_in_use(["smoke_test_loads", "smoke_test_repeats", "experiments_tolerance"]) == []


def test_each_old_name_set_is_named_with_its_new_name_and_the_release_that_drops_it():
    messages = settings.deprecated_names_in_use(["smoke_test_restart_budget", "smoke_test_experiment_tolerance"])
    assert len(messages) == 2
    # In the order of the table, not of the host's variables.
    assert messages[0].startswith("smoke_test_experiment_tolerance is deprecated: rename it experiments_tolerance")
    assert messages[1].startswith("smoke_test_restart_budget is deprecated: rename it experiments_restart_budget")
    assert all("release %s" % settings.DEPRECATED_NAMES_REMOVED_IN in message for message in messages)


def test_an_old_name_set_beside_its_new_one_is_said_to_be_ignored():
    [message] = settings.deprecated_names_in_use(["smoke_test_experiments", "experiments_enabled"])
    assert message.startswith("smoke_test_experiments is deprecated and ignored here, since experiments_enabled is set")


def test_every_old_name_is_the_smoke_test_s_and_every_new_one_the_experiments_role_s():
    assert len(set(settings.DEPRECATED_NAMES.values())) == len(settings.DEPRECATED_NAMES)
    for new, old in settings.DEPRECATED_NAMES.items():
        assert new.startswith("experiments_") and old.startswith("smoke_test_"), (new, old)


def test_the_filter_shows_each_message_as_ansible_s_deprecation_warning(monkeypatch):
    from ansible_collections.sm120.sglang.plugins.filter import experiments as experiments_filters

    shown = []
    monkeypatch.setattr(experiments_filters.Display, "deprecated",
                        lambda self, msg, version=None, collection_name=None, **kwargs: shown.append(
                            (msg, version, collection_name)))
    found = experiments_filters.FilterModule().filters()["experiments_deprecated_names"](
        ["smoke_test_nvidia_smi", "smoke_test_loads"])
    assert found == settings.deprecated_names_in_use(["smoke_test_nvidia_smi"])
    assert shown == [(found[0], settings.DEPRECATED_NAMES_REMOVED_IN, "sm120.sglang")]

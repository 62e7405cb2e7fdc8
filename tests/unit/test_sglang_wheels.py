# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unit stage runs without the network: the wheels it reads are fetched beforehand, and offline a missing one
fails naming the command that fetches it."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils import sglang_releases
from ansible_collections.sm120.sglang.tests.unit import sglang_wheels


def test_offline_a_missing_wheel_is_not_fetched_and_the_fetch_command_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("SM120_TESTS_OFFLINE", "1")
    monkeypatch.setattr(sglang_wheels, "CACHE", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"the sglang 0\.5\.9 wheel is not in .* run `python tests/unit/sglang_wheels"
                                           r"\.py` with the network first"):
        sglang_wheels.sglang_wheel.__wrapped__("0.5.9")
    assert list(tmp_path.iterdir()) == []


def test_the_fetch_covers_every_release_the_tests_read():
    assert sglang_wheels.needed_versions() == sorted(sglang_releases.versions(sglang_releases.load()))
    assert {"0.5.8", "0.5.8.post1", "0.5.9", "0.5.14", "0.5.23"} <= set(sglang_wheels.needed_versions())

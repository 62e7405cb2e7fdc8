# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the power tests."""

from __future__ import annotations

import pytest

from ansible_collections.sm120.sglang.plugins.module_utils import gpu_power


@pytest.fixture
def without_pynvml(monkeypatch):
    """The GPUs a test sees are fake nvidia-smi scripts, whatever the test machine has installed."""
    monkeypatch.setattr(gpu_power, "_import_pynvml", lambda: None)

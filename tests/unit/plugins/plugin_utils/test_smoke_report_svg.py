# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The smoke check's SVG chart, from the run of test_smoke_report (the fusion gate's regression and its rollback)."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_report_svg import smoke_report_svg
from ansible_collections.sm120.sglang.tests.unit.plugins.plugin_utils.test_smoke_report import RUN

SVG = "{http://www.w3.org/2000/svg}"


def _svg(text):
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    return root, ["".join(node.itertext()) for node in root.iter(SVG + "text")]


def test_svg_is_valid_and_titled_with_host_time_and_verdict():
    root, texts = _svg(smoke_report_svg(RUN))
    title = "Smoke check gpu-node-1, 20261129T112632Z: REGRESSION ROLLED BACK"
    assert root.find(SVG + "title").text == title and texts[0] == title
    assert root.get("aria-label") == title
    assert "Output tokens/s" in texts and "GPU mean power / power limit, per GPU" in texts
    assert "1. with new patches: flashinfer_allreduce_fusion" in texts
    assert "2. after rolling back flashinfer_allreduce_fusion" in texts


def test_svg_draws_throughput_per_measurement_and_power_per_gpu_and_measurement():
    root, texts = _svg(smoke_report_svg(RUN))
    tips = [rect.find(SVG + "title").text for rect in root.iter(SVG + "rect") if rect.find(SVG + "title") is not None]
    assert tips[:2] == ["with new patches: flashinfer_allreduce_fusion: 236.0 output tok/s",
                        "after rolling back flashinfer_allreduce_fusion: 3,740.0 output tok/s"]
    power = tips[2:]
    assert len(power) == 16
    assert power[0] == "GPU 0, with new patches: flashinfer_allreduce_fusion: 0.21 of the limit"
    assert power[1] == "GPU 0, after rolling back flashinfer_allreduce_fusion: 0.80 of the limit"
    assert ["GPU %d" % i for i in range(8)] == [t for t in texts if t.startswith("GPU ") and len(t) == 5]
    assert "minimum 3,000" in texts and "minimum 0.30" in texts
    # The collapsed bar is about 236/3740 the height of the healthy one.
    bars = [rect for rect in root.iter(SVG + "rect") if rect.find(SVG + "title") is not None]
    assert float(bars[0].get("height")) / float(bars[1].get("height")) == pytest.approx(236 / 3740, rel=0.01)


def test_svg_escapes_text_and_copes_with_missing_figures():
    run = {"host": "<gpu & co>", "started_at": None,
           "measurements": [{"label": "\"quoted\" & <tagged>", "result": {
               "output_tokens_per_s": None,
               "power": {"source": None, "reason": "sample_power is false", "gpus": []}}}],
           "verdict": {"status": "warn"}}
    root, texts = _svg(smoke_report_svg(run))
    assert texts[0] == "Smoke check <gpu & co>, n/a: WARN"
    assert "1. \"quoted\" & <tagged>" in texts
    assert "n/a" in texts and "no power figures" in texts and "sample_power is false" in texts
    root, texts = _svg(smoke_report_svg({}))
    assert "no measurements" in texts
    # A measurement without power among others with it: named once under the GPUs, not as n/a on each bar.
    run = copy.deepcopy(RUN)
    run["measurements"].append({"label": "no power", "result": {
        "output_tokens_per_s": 3700.0, "power": {"source": None, "reason": "sample_power is false", "gpus": []}}})
    _root, texts = _svg(smoke_report_svg(run))
    assert "no power figures for 3 (sample_power is false)" in texts and "n/a" not in texts

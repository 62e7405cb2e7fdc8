# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from ansible_collections.sm120.sglang.plugins.plugin_utils.smoke_thresholds import (
    mean_power_fraction,
    threshold_misses,
)

THRESHOLDS = {"min_output_tok_s": 3000, "max_ttft_p99_ms": 20000, "min_power_fraction": 0.3}


def result(output=3740.0, ttft_p99=900.0, watts=250.0, failed=0, completed=256):
    return {
        "completed_requests": completed, "failed_requests": failed, "errors": ["request 3: HTTP 500"] if failed else [],
        "output_tokens_per_s": output, "ttft_ms": {"p99": ttft_p99},
        "power": {"gpus": [{"index": i, "mean_w": watts, "limit_w": 600.0, "mean_fraction_of_limit": watts / 600.0}
                           for i in range(8)]},
    }


def test_the_articles_healthy_deployment_passes():
    assert threshold_misses(result(), THRESHOLDS) == []


def test_the_articles_collapse_misses_throughput_and_power_by_name():
    misses = threshold_misses(result(output=236.0, watts=125.0), THRESHOLDS)
    assert misses[0] == ("Output throughput 236.0 tok/s is below the threshold 3000.0 tok/s "
                         "(smoke_test_min_output_tok_s).")
    assert misses[1].startswith("GPU power under load is 0.21 of the limit on average, below the threshold 0.30")
    assert "underfed" in misses[1] and "GPU0 125/600 W" in misses[1]
    assert len(misses) == 2


def test_slow_first_token_and_failed_requests():
    misses = threshold_misses(result(ttft_p99=25000.0, failed=2, completed=254), THRESHOLDS)
    assert "p99 time to first token 25000 ms is above the threshold 20000 ms" in misses[0]
    assert misses[1] == "2 of 256 requests failed: request 3: HTTP 500."


def test_nothing_completed_is_one_clear_miss():
    assert threshold_misses(result(completed=0, failed=4), THRESHOLDS) == [
        "No request completed (4 failed): request 3: HTTP 500."]


def test_unsampled_power_and_unset_thresholds_are_not_checked():
    unsampled = dict(result(watts=10.0), power={"source": None, "reason": "no nvidia-smi", "gpus": []})
    assert mean_power_fraction(unsampled) is None
    assert threshold_misses(unsampled, THRESHOLDS) == []
    assert threshold_misses(result(output=1.0), {"min_output_tok_s": None}) == []

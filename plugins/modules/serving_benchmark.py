#!/usr/bin/python
# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_benchmark
short_description: Load an OpenAI-compatible model server at fixed concurrency and measure it, GPU power included
version_added: "0.1.0"
description:
  - Sends O(num_warmup) warm-up requests, then O(num_requests) streamed requests, O(concurrency) at a time, to the
    C(/v1/completions) or C(/v1/chat/completions) endpoint under O(url), and returns throughput and latency figures.
  - Every request asks for a streamed answer with usage data (C(stream_options.include_usage)) and sets
    C(ignore_eos), which SGLang honours, so each request generates exactly O(output_tokens) tokens.
  - With O(prompt_format=token_ids) (the default of O(endpoint=completions)) each prompt is exactly O(input_tokens)
    token ids, random ids below O(vocab_size), as C(sglang.bench_serving)'s C(random-ids) dataset sends them; the
    server reads the load that was asked for, whatever its tokenizer. With O(prompt_format=text) prompts are words
    of a fixed list, and how many tokens they make depends on the tokenizer (a 256-word prompt was 391 tokens on a
    real server with a byte-level BPE); RV(input_tokens_per_request) says what the server counted.
  - Each prompt starts with an id or a tag unique to the request and the run, so the server's prefix cache cannot
    serve it. Token counts come from the server's usage data; only when the server sends none are output tokens
    counted as stream chunks with text, and RV(token_count_source) says so.
  - While the requests run, a background thread reads each GPU's power draw every O(power_interval) seconds, the
    first one interval in (not before the first request is sent; a shorter run gets one reading, at its end), through
    NVML when the target's Python has the C(pynvml) module (package C(nvidia-ml-py)), otherwise through O(nvidia_smi).
  - A server that refuses connections, answers every request with an error, or stops answering makes the module
    fail within O(timeout) with a message that names the URL and what happened; it never hangs. Some failed
    requests alone do not fail the module; RV(failed_requests) and RV(errors) report them.
  - Needs only the Python standard library on the target.
options:
  url:
    description:
      - Base URL of the server, for example V(http://127.0.0.1:30000). A trailing C(/v1) is accepted.
    type: str
    required: true
  model:
    description:
      - The model name sent in each request, as the server serves it (SGLang's C(--served-model-name)).
    type: str
    required: true
  endpoint:
    description:
      - V(completions) posts prompts to C(/v1/completions); V(chat) posts one user message to
        C(/v1/chat/completions), so the chat template adds some input tokens.
    type: str
    choices: [completions, chat]
    default: completions
  concurrency:
    description:
      - How many requests are in flight at any time.
    type: int
    default: 8
  num_requests:
    description:
      - How many requests are measured.
    type: int
    default: 64
  num_warmup:
    description:
      - How many requests run before the measurement and are not counted. If all of them fail, the module fails
        without measuring.
    type: int
    default: 2
  input_tokens:
    description:
      - Prompt length in tokens, exact with O(prompt_format=token_ids), rough with V(text); see
        RV(input_tokens_per_request) for what the server counted.
    type: int
    default: 1024
  prompt_format:
    description:
      - V(token_ids) sends each prompt as a list of O(input_tokens) token ids (C(/v1/completions) only).
      - V(text) sends words; the only choice for O(endpoint=chat), and the one for a C(sglang-router) in front of the
        servers, whose C(/v1/completions) takes strings only (HTTP 422 on token ids, sglang-router 0.3.2). When
        every request is refused so, the error names this fix.
      - Unset, V(token_ids) for O(endpoint=completions) and V(text) for O(endpoint=chat).
    type: str
    choices: [token_ids, text]
  vocab_size:
    description:
      - The model's vocabulary size (its C(config.json)'s C(vocab_size)); token ids are drawn from 256 up to
        1024 below it, clear of byte and special tokens. At least 2304.
    type: int
    default: 32000
  output_tokens:
    description:
      - Tokens each request generates (C(max_tokens) with C(ignore_eos)).
    type: int
    default: 256
  timeout:
    description:
      - Seconds the whole run (warm-up and measurement) may take. It bounds each request too, so a server that stops
        sending fails the run once this time has passed.
    type: float
    default: 600
  api_key:
    description:
      - Sent as a bearer token in the C(Authorization) header, for servers started with C(--api-key).
    type: str
  sample_power:
    description:
      - Whether to sample GPU power during the measurement. When no source works, RV(power.reason) says why and the
        run goes on.
    type: bool
    default: true
  power_interval:
    description:
      - Seconds between two power readings.
    type: float
    default: 0.5
  nvidia_smi:
    description:
      - The C(nvidia-smi) executable, a name looked up in E(PATH) or a path; used when NVML is not available.
    type: str
    default: nvidia-smi
extends_documentation_fragment:
  - sm120.sglang.attributes
attributes:
  check_mode:
    support: full
    description: The module changes nothing on the host, so it runs in check mode too and returns real figures. It
      still puts load on the server.
  diff_mode:
    support: none
    description: There is nothing to compare; the module changes nothing.
notes:
  - Power figures cover every GPU the power source sees, also GPUs the server does not use.
  - Energy is the sum of the GPUs' mean power times the measured duration.
seealso:
  - module: sm120.sglang.gpu_facts
author:
  # validate-modules wants a GitHub handle; the collection has no single author.
  - sm120.sglang contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Measure the local SGLang server with 16 concurrent streams
  sm120.sglang.serving_benchmark:
    url: http://127.0.0.1:30000
    model: glm-5
    concurrency: 16
    num_requests: 128
    input_tokens: 2048
    output_tokens: 512
    timeout: 900
  register: benchmark

- name: Fail when the GPUs stay far below their power limit under load
  ansible.builtin.assert:
    that:
      - benchmark.failed_requests == 0
      - benchmark.power.gpus | map(attribute='mean_fraction_of_limit') | select('number') | min > 0.3
    fail_msg: "GPUs look underfed: {{ benchmark.power.gpus }}"
  when: benchmark.power.source is not none

- name: Short chat smoke test without power sampling, against a server that needs a key
  sm120.sglang.serving_benchmark:
    url: https://models.example.com/v1
    model: glm-5
    endpoint: chat
    api_key: "{{ vault_sglang_api_key }}"
    concurrency: 1
    num_requests: 4
    num_warmup: 1
    output_tokens: 64
    sample_power: false
    timeout: 120
"""

RETURN = r"""
url:
  description: The endpoint the requests went to.
  returned: always
  type: str
  sample: http://127.0.0.1:30000/v1/completions
completed_requests:
  description: Measured requests that streamed to the end.
  returned: always
  type: int
  sample: 64
failed_requests:
  description: Measured requests that failed.
  returned: always
  type: int
  sample: 0
not_started_requests:
  description: Measured requests never sent because the run reached O(timeout).
  returned: always
  type: int
  sample: 0
warmup_failed_requests:
  description: Warm-up requests that failed.
  returned: always
  type: int
  sample: 0
errors:
  description: The first few failures (at most five), each naming the request number and the cause.
  returned: always
  type: list
  elements: str
  sample: ["request 3: HTTP 500 Internal Server Error: out of memory"]
duration_s:
  description: Seconds from the start of the measurement to the last completed request.
  returned: always
  type: float
  sample: 41.337
requests_per_s:
  description: Completed requests per second.
  returned: always
  type: float
  sample: 1.548
output_tokens_per_s:
  description: Generated tokens per second over all streams.
  returned: always
  type: float
  sample: 3171.2
total_tokens_per_s:
  description: Prompt and generated tokens per second over all streams.
  returned: always
  type: float
  sample: 15856.4
prompt_format:
  description: How the prompts were sent, O(prompt_format).
  returned: always
  type: str
  sample: token_ids
input_tokens_per_request:
  description:
    - Mean prompt tokens per completed request, as RV(input_tokens_total) counts them; with O(prompt_format=text)
      the measure of how far the load sent is from O(input_tokens).
    - V(null) when no request completed.
  returned: always
  type: float
  sample: 1024.0
input_tokens_total:
  description:
    - Prompt tokens of the completed requests, from the server's usage data.
    - Where the server sent no usage data, each such request counts as O(input_tokens).
  returned: always
  type: int
  sample: 524800
output_tokens_total:
  description:
    - Generated tokens of the completed requests, from the server's usage data.
    - Where the server sent no usage data, the stream chunks with text are counted instead.
  returned: always
  type: int
  sample: 131072
token_count_source:
  description:
    - Where the token counts come from. V(usage) is the server's usage data for every request. V(stream_chunks) means
      the server sent no usage data and output tokens were counted as stream chunks with text, which undercounts
      when the server sends several tokens per chunk. V(mixed) is some of each.
    - V(null) when no request completed.
  returned: always
  type: str
  sample: usage
accept_length:
  description:
    - With speculative decoding on (MTP, EAGLE, NGRAM), SGLang's mean accepted tokens per decoding step since the
      server started, read from its C(/server_info) after the run as C(sglang.bench_serving) reads it
      (C(internal_states[0].avg_spec_accept_length)). It covers every request since the start, not this run alone.
    - V(null) without speculative decoding, and where the URL does not answer C(/server_info) (a router, another
      server).
  returned: always
  type: float
  sample: 3.21
max_running_requests:
  description:
    - The most requests the server decodes at once, read from its C(/server_info) after the run
      (C(max_running_requests)), that is the C(--max-running-requests) it was given, or the 48 SGLang sets itself
      with speculative decoding on and the option unset. A load of more concurrent requests than this queues the
      rest.
    - V(null) where the server has no bound set, and where the URL does not answer C(/server_info).
  returned: always
  type: int
  sample: 48
ttft_ms:
  description:
    - Time to first token in milliseconds, over the completed requests.
    - Each value is V(null) when there is no data.
  returned: always
  type: dict
  contains:
    mean:
      description: Arithmetic mean.
      type: float
      sample: 182.4
    p50:
      description: Median.
      type: float
      sample: 170.9
    p90:
      description: 90th percentile, linearly interpolated.
      type: float
      sample: 260.3
    p99:
      description: 99th percentile, linearly interpolated.
      type: float
      sample: 301.7
itl_ms:
  description:
    - Inter-token latency in milliseconds, the gaps between successive stream chunks with text, over all completed
      requests.
    - Each value is V(null) when there is no data.
  returned: always
  type: dict
  contains:
    mean:
      description: Arithmetic mean.
      type: float
      sample: 24.1
    p50:
      description: Median.
      type: float
      sample: 23.8
    p90:
      description: 90th percentile, linearly interpolated.
      type: float
      sample: 26.0
    p99:
      description: 99th percentile, linearly interpolated.
      type: float
      sample: 31.2
tpot_ms:
  description:
    - Time per output token after the first, in milliseconds. One value per completed request, its end-to-end latency
      less its time to first token, divided by its generated tokens less one.
    - Each value is V(null) when there is no data.
  returned: always
  type: dict
  contains:
    mean:
      description: Arithmetic mean.
      type: float
      sample: 24.2
    p50:
      description: Median.
      type: float
      sample: 24.0
    p90:
      description: 90th percentile, linearly interpolated.
      type: float
      sample: 25.1
    p99:
      description: 99th percentile, linearly interpolated.
      type: float
      sample: 27.9
e2e_latency_ms:
  description:
    - End-to-end latency in milliseconds of each completed request, from sending it until the stream's closing
      C([DONE]) event.
    - Each value is V(null) when there is no data.
  returned: always
  type: dict
  contains:
    mean:
      description: Arithmetic mean.
      type: float
      sample: 12541.0
    p50:
      description: Median.
      type: float
      sample: 12490.3
    p90:
      description: 90th percentile, linearly interpolated.
      type: float
      sample: 13020.8
    p99:
      description: 99th percentile, linearly interpolated.
      type: float
      sample: 13388.5
power:
  description: GPU power during the measurement.
  returned: always
  type: dict
  contains:
    source:
      description: V(nvml) or V(nvidia-smi); V(null) when power was not sampled.
      type: str
      sample: nvml
    reason:
      description: Why there are no power figures; V(null) when there are.
      type: str
      sample: >-
        no power source: the Python module pynvml (nvidia-ml-py) is not installed;
        nvidia-smi not found at 'nvidia-smi'
    interval_s:
      description: Seconds between two readings.
      type: float
      sample: 0.5
    samples:
      description: Readings taken; one reading covers all GPUs.
      type: int
      sample: 83
    sample_errors:
      description: Readings that failed.
      type: int
      sample: 0
    gpus:
      description: One entry per GPU, by index.
      type: list
      elements: dict
      contains:
        index:
          description: GPU index, numbered as nvidia-smi numbers them.
          type: int
          sample: 0
        samples:
          description: Readings with a power value for this GPU; V([N/A]) readings do not count.
          type: int
          sample: 83
        mean_w:
          description: Mean power draw in watts.
          type: float
          sample: 412.35
        max_w:
          description: Highest power draw in watts.
          type: float
          sample: 588.1
        limit_w:
          description: Power limit in watts (nvidia-smi's C(power.limit)).
          type: float
          sample: 600.0
        mean_fraction_of_limit:
          description: RV(power.gpus[].mean_w) divided by RV(power.gpus[].limit_w); far below 1 under load means the
            GPU is underfed or spin-waiting, and RV(power.gpus[].activity) tells which.
          type: float
          sample: 0.6873
        activity:
          description:
            - What tells apart the causes of low power under load, a spin-wait (busy SMs at low power) from an
              underfed GPU (idle SMs) or a power or thermal limit; the medians of the GPU's utilisation, SM clock
              and power over the readings, and the share of readings with each clock throttle reason.
            - Utilisation, clocks, temperature and reasons are read where the source can (NVML, or nvidia-smi's
              C(utilization.gpu), C(clocks.sm), C(clocks.max.sm), C(temperature.gpu) and
              C(clocks_event_reasons.active), C(clocks_throttle_reasons.active) on drivers before 535); each
              figure is V(null) where no reading carried its value.
          type: dict
          contains:
            samples:
              description: Readings with both a power fraction and a utilisation.
              type: int
              sample: 159
            median_power_fraction:
              description: Median over the readings of power draw divided by the power limit.
              type: float
              sample: 0.9883
            median_util_pct:
              description: Median GPU utilisation, the percentage of time a kernel ran (NVML's C(gpu) rate).
              type: float
              sample: 99.0
            mean_util_pct:
              description: Mean GPU utilisation over the readings, the share of the measurement in which a kernel
                ran; it parts from the median where the GPU is busy in bursts.
              type: float
              sample: 97.4
            median_sm_clock_mhz:
              description: Median SM clock in MHz.
              type: float
              sample: 1440.0
            max_sm_clock_mhz:
              description: The board's maximum SM clock in MHz.
              type: float
              sample: 1980.0
            median_clock_fraction:
              description: Median over the readings of SM clock divided by the maximum SM clock.
              type: float
              sample: 0.7273
            median_temperature_c:
              description: Median GPU temperature in degrees Celsius.
              type: float
              sample: 62.0
            max_temperature_c:
              description: Highest GPU temperature in degrees Celsius.
              type: float
              sample: 63.0
            throttle_reason_samples:
              description: Readings in which the clock throttle reasons were read.
              type: int
              sample: 159
            throttle_reason_share:
              description: Share of those readings with a reason that holds the clock below what the load asks
                (power cap, power brake, thermal slowdown, HW slowdown); V(null) when no reasons were read.
              type: float
              sample: 1.0
            power_reason_share:
              description: Share with C(sw_power_cap) or C(hw_power_brake_slowdown).
              type: float
              sample: 1.0
            thermal_reason_share:
              description: Share with C(sw_thermal_slowdown) or C(hw_thermal_slowdown).
              type: float
              sample: 0.0
            throttle_reason_shares:
              description: Share of the readings with each reason that was active at least once, by NVML's bit
                names in lower case (C(gpu_idle), C(sw_power_cap), C(hw_slowdown), C(sw_thermal_slowdown) ...).
              type: dict
              sample: {sw_power_cap: 1.0}
    total_mean_w:
      description: Sum of the GPUs' mean power in watts.
      type: float
      sample: 3298.8
    energy_j:
      description: Energy over the measurement in joules, RV(power.total_mean_w) times RV(duration_s).
      type: float
      sample: 136365.6
    joules_per_output_token:
      description: RV(power.energy_j) divided by RV(output_tokens_total).
      type: float
      sample: 1.0404
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark import (
    BenchmarkError,
    BenchmarkPlan,
    run_benchmark,
)
from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_power import PowerPlan


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            model=dict(type="str", required=True),
            endpoint=dict(type="str", default="completions", choices=["completions", "chat"]),
            concurrency=dict(type="int", default=8),
            num_requests=dict(type="int", default=64),
            num_warmup=dict(type="int", default=2),
            # Token counts, not credentials.
            input_tokens=dict(type="int", default=1024, no_log=False),
            output_tokens=dict(type="int", default=256, no_log=False),
            prompt_format=dict(type="str", choices=["token_ids", "text"]),
            vocab_size=dict(type="int", default=32000),
            timeout=dict(type="float", default=600),
            api_key=dict(type="str", no_log=True),
            sample_power=dict(type="bool", default=True),
            power_interval=dict(type="float", default=0.5),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    plan = BenchmarkPlan(
        url=params["url"], model=params["model"], endpoint=params["endpoint"], concurrency=params["concurrency"],
        num_requests=params["num_requests"], num_warmup=params["num_warmup"], input_tokens=params["input_tokens"],
        output_tokens=params["output_tokens"], timeout=params["timeout"], api_key=params["api_key"],
        prompt_format=params["prompt_format"], vocab_size=params["vocab_size"],
    )
    power = PowerPlan(enabled=params["sample_power"], interval=params["power_interval"],
                      nvidia_smi=params["nvidia_smi"])
    try:
        result = run_benchmark(plan, power)
    except ValueError as exc:
        module.fail_json(msg=to_native(exc))
    except BenchmarkError as exc:
        module.fail_json(msg=to_native(exc), **exc.result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()

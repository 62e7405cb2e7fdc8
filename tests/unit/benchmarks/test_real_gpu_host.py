# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real-GPU harness's decisions (benchmarks/real_gpu/host.py) that need no GPU."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import time

from ansible_collections.sm120.sglang.tests.unit.utils import load_script

ROOT = pathlib.Path(__file__).resolve().parents[3]
HARNESS = ROOT / "benchmarks" / "real_gpu"


def _host():
    return load_script(HARNESS / "host.py", "real_gpu_host")  # it imports its sibling summarize.py


# The smoke test's message as ansible-playbook printed it for the spec-unset start (plugin_utils/experiments.py).
CAPPED_LOG = ("fatal: [h200]: FAILED! => {\"msg\": \"h200: The server ran fewer requests at once than the load asks: "
              "load c64 runs 64 requests at once, the server at most 48 (max_running_requests of its /server_info)\"}")


def test_a_speculative_start_with_the_bound_unset_failing_on_the_cap_is_its_finding():
    host = _host()
    starts = dict(host.SPECULATIVE_STARTS)
    assert host.cap_is_the_finding(starts["spec-unset"], CAPPED_LOG) is True
    # The same failure where the bound was given, or for a start that does not draft, is a failure.
    assert host.cap_is_the_finding(starts["spec-256"], CAPPED_LOG) is False
    assert host.cap_is_the_finding(starts["steps-4"], CAPPED_LOG) is False
    # Another failure of the unset start (a server that did not come up) is a failure.
    assert host.cap_is_the_finding(starts["spec-unset"], "fatal: [h200]: FAILED! => the server exited") is False


def test_the_tuning_the_experiments_phase_adds_is_checked_against_the_data_before_any_device_time(monkeypatch, capsys):
    monkeypatch.setenv("SM120_REAL_TUNING", "continuous_decode_steps_2,continuous_decode_steps_4,nccl_fast")
    host = _host()
    assert host.TUNING == ["continuous_decode_steps_2", "continuous_decode_steps_4", "nccl_fast"]
    assert {"continuous_decode_steps_2", "continuous_decode_steps_8", "mtp_nextn_1_2"} <= host.tuning_options()
    try:
        host.main(["go", "--only", "experiments"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("an unknown tuning option was not refused")
    assert "SM120_REAL_TUNING names nccl_fast, not a tuning option of data/experiments.yml" in capsys.readouterr().err
    monkeypatch.delenv("SM120_REAL_TUNING")
    assert _host().TUNING == ["cuda_graph_max_bs_128", "max_running_requests_64"]

# The real-GPU harness runs from a copy of the checkout, not the checkout (benchmarks/real_gpu/host.py snapshot).
#
# The device tool lays the working tree anew at every call, while the harness's run goes on in the background. On
# a4cfbf0 the experiments phase died there inside Ansible: Unexpected Exception, this is probably a bug:
# '<checkout>/.collections/ansible_collections/sm120/sglang/roles/smoke_test', a KeyError in play.role_cache.
# Ansible keys a role by the realpath of its folder when it loads it and looks the key up again as each task's
# result comes back; a role reached through the checkout's .collections link whose link is gone for a moment
# gets another key, which is not in the cache. These tests run the real ansible-core of the controller venv: the
# first shows that failure where a checkout is re-laid under a play (so a change of Ansible that makes it go away
# shows here), the second that a play run from snapshot's copy passes the same re-lay.


GALAXY = "namespace: sm120\nname: sglang\nversion: 1.0.0\nreadme: README.md\nauthors: [sm120.sglang contributors]\n"
# The shape of the experiments role's round: a role including another role's entry point, in a loop, as
# roles/experiments/tasks/round.yml includes the smoke test's measure entry point. The second measurement re-lays
# the checkout, as the device tool's second call did.
FILES = {
    "galaxy.yml": GALAXY,
    "README.md": "a collection of the test\n",
    "roles/smoke_test/tasks/measure.yml": """
        - name: Measure
          ansible.builtin.debug:
            msg: "measure {{ label }}"
        - name: The device tool lays the checkout anew (its .collections link is gone, then back)
          ansible.builtin.command: "{{ relay }}"
          when: label == 'round 2'
          changed_when: true
        """,
    "roles/experiments/tasks/main.yml": """
        - name: Measure the configurations
          ansible.builtin.include_tasks: round.yml
          loop: [1, 2, 3]
        """,
    "roles/experiments/tasks/round.yml": """
        - name: Measure it
          ansible.builtin.include_role:
            name: sm120.sglang.smoke_test
            tasks_from: measure
          vars:
            label: "round {{ item }}"
        """,
    "playbooks/deploy.yml": """
        - name: Decide
          hosts: localhost
          gather_facts: false
          tasks:
            - name: Decide each experiment
              ansible.builtin.include_role:
                name: sm120.sglang.experiments
        """,
}


def _checkout(tmp_path):
    checkout = tmp_path / "checkout"
    for name, text in FILES.items():
        path = checkout / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return checkout


def _playbook(repo, collections, relay):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_LOCAL_TEMP=str(repo.parent / "tmp"), ANSIBLE_HOME=str(repo.parent / "home"),
               ANSIBLE_CONFIG="", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return subprocess.run([sys.executable, "-m", "ansible", "playbook", "playbooks/deploy.yml", "-i", "localhost,",
                           "-c", "local", "-e", "relay='%s'" % relay,
                           "-e", "ansible_python_interpreter=%s" % sys.executable], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_a_play_that_reads_a_checkout_laid_anew_under_it_dies_inside_ansible(tmp_path):
    checkout = _checkout(tmp_path)
    # The harness's old layout: the checkout is the collection through its own .collections link.
    link = checkout / ".collections" / "ansible_collections" / "sm120"
    link.parent.mkdir(parents=True)
    outside = tmp_path / "opt" / "ansible_collections" / "sm120"
    outside.mkdir(parents=True)
    (outside / "sglang").symlink_to(checkout)
    link.symlink_to(outside)
    relay = "rm %s" % link
    done = _playbook(checkout, checkout / ".collections", relay)
    assert done.returncode != 0, done.stdout
    said = done.stdout + done.stderr
    assert "Unexpected Exception, this is probably a bug" in said, said[-3000:]
    assert "%s/sglang/roles/smoke_test" % link in said, said[-3000:]


def test_a_play_run_from_the_snapshot_passes_the_same_relay(tmp_path):
    host = _host()
    checkout = _checkout(tmp_path)
    collections = tmp_path / "opt" / "collections"
    copy = collections / "ansible_collections" / "sm120" / "sglang"
    files = host.snapshot(checkout, copy)
    assert files == len(FILES)
    assert not copy.is_symlink() and os.path.realpath(copy) == str(copy)
    # The re-lay takes the whole checkout away for the rest of the play.
    done = _playbook(copy, collections, "mv %s %s" % (checkout, tmp_path / "relaid"))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "measure round 3" in done.stdout
    assert not checkout.exists()


def test_the_snapshot_leaves_out_the_archive_and_caches_and_refuses_a_copy_inside_the_checkout(tmp_path):
    host = _host()
    checkout = _checkout(tmp_path)
    for skipped in (".real-gpu/site.tar.xz", ".git/HEAD", ".collections/x", "roles/x/__pycache__/a.pyc"):
        path = checkout / skipped
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    copy = tmp_path / "c" / "sglang"
    (copy / "stale").mkdir(parents=True)  # a copy of an earlier run goes
    host.snapshot(checkout, copy)
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file()) == sorted(FILES)
    try:
        host.snapshot(checkout, checkout / "inner")
    except ValueError as exc:
        assert "inside the checkout" in str(exc)
    else:
        raise AssertionError("a snapshot inside the checkout was not refused")


def test_the_noise_phase_keeps_tokens_by_100_ms_and_each_request_s_times():
    noise = load_script(HARNESS / "noise.py", "real_gpu_noise")
    from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_requests import DriveResult
    from ansible_collections.sm120.sglang.plugins.module_utils.serving_benchmark_stream import Outcome

    def outcome(started, times, tokens):
        return Outcome(started=started, finished=times[-1] + 0.01, first_token=times[0],
                       token_times=times, completion_tokens=tokens)

    # Two chunks of 2 tokens each (speculative decoding sends several a chunk), one of 1; a failed request and one
    # never started count for nothing.
    drive = DriveResult(outcomes=[outcome(100.0, [100.05, 100.25], 4), outcome(100.0, [100.31], 1),
                                  Outcome(started=100.0, finished=100.1, error="x"), None],
                        started=100.0, finished=100.4)
    kept = noise.timings(drive)
    assert kept["tokens_by_100ms"] == [2.0, 0.0, 2.0, 1.0]
    assert kept["requests"] == [[0.0, 50.0, 260.0, 4], [0.0, 310.0, 320.0, 1]]


def test_a_pid_reused_by_another_process_is_not_the_run_under_way(tmp_path, monkeypatch):
    host = _host()
    monkeypatch.setattr(host, "PID", tmp_path / "harness.pid")
    assert host.running() is None
    # This test's own process is alive, but it is no host.py run.
    host.PID.write_text(str(os.getpid()))
    assert host.running() is None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "host.py", "run"])
    try:
        host.PID.write_text(str(child.pid))
        # Until the child has exec'd, its command line is still this test's.
        for _wait in range(100):
            if host.running():
                break
            time.sleep(0.05)
        assert host.running() == child.pid
    finally:
        child.kill()
        child.wait()
    assert host.running() is None


def test_the_glm5_harness_profile_is_the_production_profile_but_for_its_listed_exceptions():
    import yaml

    production = yaml.safe_load((ROOT / "roles" / "sglang_service" / "vars" / "profiles.yml").read_text())
    production = production["__sglang_service_builtin_profiles"]["glm-5-nvfp4"]
    harness = yaml.safe_load((HARNESS / "inventory" / "group_vars" / "gpu_hosts.yml").read_text())
    harness = harness["sglang_service_profiles"]["glm5-arch-random"]
    assert _host().PROFILES["glm5-arch-random"]["maker"] == "glm5_arch.py"
    assert harness["architecture"] == production["architecture"] == "GlmMoeDsaForCausalLM"
    assert harness["kv_cache_dtype"] == production["kv_cache_dtype"] == "bf16"
    # Every production flag but the NVFP4 quantization (the random weights are BF16), the multithreaded loader (the
    # dummy loader reads no file) and GLM's reasoning parser (the harness tokenizer has no single </think> token).
    left_out = {"--quantization", "--model-loader-extra-config", "--reasoning-parser"}
    for flag, value in production["arguments"].items():
        if flag not in left_out:
            assert harness["arguments"][flag] == value, flag
    assert not left_out & set(harness["arguments"])
    # The addition is the one the inventory explains: dummy weights.
    assert set(harness["arguments"]) - set(production["arguments"]) == {"--load-format"}
    assert harness["env"] == {"SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD": "0"}
    # The loads: the production profile's concurrency, tokens and objectives, at half the requests.
    assert set(harness["loads"]) == set(production["loads"])
    for name, load in production["loads"].items():
        assert {k: v for k, v in harness["loads"][name].items() if k != "num_requests"} == {
            k: v for k, v in load.items() if k != "num_requests"}
        assert harness["loads"][name]["num_requests"] * 2 == load["num_requests"]

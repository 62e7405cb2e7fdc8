# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_service role's unit and environment file, rendered the way the template module renders them.

Ansible's own Templar resolves the role's variables (defaults < inventory <
vars/profiles.yml and vars/main.yml) and renders the templates with the
template module's settings. The ExecStart line is then split the way systemd
splits it (systemd.service(5), "Command lines") and the environment file read
the way systemd reads an EnvironmentFile=, so the tests check the argv SGLang
gets and the values it sees, not the text.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "sglang_service"
CONFIG = "/etc/sglang/glm-5-nvfp4.yaml"
API_KEY = 'k3y with spaces, "quotes", $HOME, 100% and \\ backslash'


def _role_vars(inventory=None, facts=None):
    loader = DataLoader()
    variables = {"inventory_hostname": "gpu-node-01", "groups": {"all": ["gpu-node-01"]}, "hostvars": {}}
    variables.update(loader.load_from_file(str(ROLE / "defaults" / "main.yml"), trusted_as_template=True))
    variables.update(facts or {})
    # Plain values, no templates: Ansible takes untrusted strings as they are.
    variables.update(inventory or {})
    for name in ("profiles.yml", "main.yml"):
        variables.update(loader.load_from_file(str(ROLE / "vars" / name), trusted_as_template=True))
    return Templar(loader=loader, variables=variables)


def _render(templar, name):
    source = trust_as_template((ROLE / "templates" / name).read_text())
    # The template module's defaults: trim_blocks on, lstrip_blocks off.
    return templar.template(source, escape_backslashes=False,
                            overrides=dict(trim_blocks=True, lstrip_blocks=False))


def _value(templar, name):
    return templar.template(trust_as_template("{{ %s }}" % name))


# ---------------------------------------------------------------- systemd's readers

def _unit_directives(text):
    """Section -> list of (key, value), joining backslash-continued lines as systemd does."""
    sections, current = {}, None
    logical = re.sub(r"\\\n", " ", text)
    for line in logical.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
            continue
        key, _sep, value = line.partition("=")
        current.append((key.strip(), value.strip()))
    return sections


_C_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "s": " "}


def _exec_argv(value, environment):
    """Split one Exec*= value into argv: quotes, C escapes, %% and $$, ${VAR} as one word."""
    words, word, quote, in_word, i = [], [], None, False, 0
    while i < len(value):
        char = value[i]
        if char == "\\":
            word.append(_C_ESCAPES[value[i + 1]])
            i, in_word = i + 2, True
            continue
        if quote:
            if char == quote:
                quote = None
            else:
                word.append(char)
        elif char in "\"'":
            quote, in_word = char, True
        elif char.isspace():
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
        else:
            word.append(char)
            in_word = True
        i += 1
    assert quote is None, "unbalanced quotes in %r" % value
    if in_word:
        words.append("".join(word))

    variable = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

    def expand(text):
        plain = variable.sub("", text.replace("%%", "").replace("$$", ""))
        assert "%" not in plain, "unescaped specifier in %r" % text
        assert "$" not in plain, "unescaped $ in %r" % text
        pieces = re.split(r"(%%|\$\$|\$\{[A-Za-z_][A-Za-z0-9_]*\})", text)
        return "".join("%" if piece == "%%" else "$" if piece == "$$"
                       else environment[piece[2:-1]] if piece.startswith("${") else piece for piece in pieces)

    return [expand(w) for w in words]


def _env_file(text):
    """KEY=VALUE lines as systemd reads an EnvironmentFile=: comments, double quotes, \\ escapes."""
    env = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip()[0] in "#;":
            continue
        key, _sep, raw = line.partition("=")
        if raw.startswith('"'):
            assert raw.endswith('"') and len(raw) >= 2, line
            body, value, i = raw[1:-1], [], 0
            while i < len(body):
                if body[i] == "\\" and body[i + 1] in '"\\`$':
                    value.append(body[i + 1])
                    i += 2
                    continue
                assert body[i] != '"', line
                value.append(body[i])
                i += 1
            env[key] = "".join(value)
        else:
            assert re.match(r"^[A-Za-z0-9_@+=:,./-]*$", raw), "unquoted value needs quoting: %r" % line
            env[key] = raw
    return env


def _options(argv):
    """--flag [values...] -> {flag: [values]} for the words after the launcher."""
    options, flag = {}, None
    for word in argv:
        if word.startswith("--"):
            flag = word
            options[flag] = []
        else:
            options[flag].append(word)
    return options


def _service(templar):
    unit_text = _render(templar, "sglang.service.j2")
    env = _env_file(_render(templar, "sglang.env.j2"))
    service = dict(_unit_directives(unit_text)["Service"])
    argv = _exec_argv(service["ExecStart"], env)
    return unit_text, service, env, argv


# ---------------------------------------------------------------- production defaults

PRODUCTION = {"sglang_service_api_key": API_KEY}
MOE_FLAG = {"--moe-runner-backend": "flashinfer_cutlass"}
FACTS = {
    # What the host holds (sglang_facts) and what the patch play made live (sm120_patches).
    "sglang_facts": {"version": "0.5.9", "packages": {"sglang": "0.5.9", "flashinfer-python": "0.6.3",
                                                      "sgl-kernel": "0.3.21", "torch": None}},
    "sm120_patches_live": ["custom_allreduce_pcie", "moe_runner_sm120"],
    "sm120_patches_options": {"gates": ["moe_runner_sm120"], "env": {}, "flags": MOE_FLAG},
}


def test_production_argv_is_the_glm5_nvfp4_launch():
    _unit, service, _env, argv = _service(_role_vars(PRODUCTION, FACTS))
    assert argv[:3] == ["/opt/sglang/bin/python", "-m", "sglang.launch_server"]
    assert _options(argv[3:]) == {
        "--model-path": ["/var/lib/sglang/models/glm-5-nvfp4"],
        "--served-model-name": ["glm-5"],
        "--host": ["0.0.0.0"],
        "--port": ["30000"],
        "--tp-size": ["8"],
        "--mem-fraction-static": ["0.85"],
        "--kv-cache-dtype": ["bf16"],
        "--quantization": ["modelopt_fp4"],
        "--attention-backend": ["triton"],
        "--disable-shared-experts-fusion": [],
        "--enable-metrics": [],
        "--cuda-graph-max-bs": ["64"],
        "--chunked-prefill-size": ["8192"],
        "--reasoning-parser": ["glm45"],
        "--tool-call-parser": ["glm47"],
        "--watchdog-timeout": ["1800"],
        "--model-loader-extra-config": ['{"enable_multithread_load": true, "num_threads": 16}'],
        "--moe-runner-backend": ["flashinfer_cutlass"],
        "--config": [CONFIG],
    }
    assert "--context-length" not in argv


def test_production_unit_settings():
    unit, service, _env, _argv = _service(_role_vars(PRODUCTION, FACTS))
    assert service["Type"] == "exec"
    assert service["User"] == "sglang" and service["Group"] == "sglang"
    assert service["EnvironmentFile"] == "/etc/sglang/glm-5-nvfp4.env"
    assert service["Restart"] == "on-failure"
    assert service["KillMode"] == "control-group"
    assert service["TimeoutStartSec"] == "1800"
    assert service["WorkingDirectory"] == "/var/lib/sglang"
    assert _exec_argv(service["ExecStartPost"], {}) == [
        "/opt/sglang/bin/python", "/usr/local/libexec/sglang-service-wait-health", "http://127.0.0.1:30000/health"]
    assert dict(_unit_directives(unit)["Install"]) == {"WantedBy": "multi-user.target"}
    assert _value(_role_vars(PRODUCTION, FACTS), "__sglang_service_unit") == "sglang-glm-5-nvfp4.service"


def test_the_api_key_is_only_in_the_config_file_never_in_the_unit_the_environment_or_a_command_line():
    templar = _role_vars(PRODUCTION, FACTS)
    unit, _service_, env, argv = _service(templar)
    assert "k3y" not in unit and "k3y" not in " ".join(argv) and not any("k3y" in value for value in env.values())
    assert "--api-key" not in argv
    config = json.loads(templar.template(trust_as_template("{{ sglang_service_api_key | sm120.sglang.sglang_service_config }}")))
    assert config == {"api-key": API_KEY}


def test_an_api_key_among_the_extra_flags_is_refused_naming_the_safe_way():
    templar = _role_vars(dict(PRODUCTION, sglang_service_extra_args={"--api-key": "leaked"}), FACTS)
    with pytest.raises(Exception, match="would show the key on the server's command line"):
        _service(templar)


def test_environment_records_the_installed_set_and_the_live_gates():
    _unit, _service_, env, _argv = _service(_role_vars(PRODUCTION, FACTS))
    assert env["SM120_SGLANG_INSTALL_SET"] == "flashinfer-python==0.6.3,sgl-kernel==0.3.21,sglang==0.5.9"
    assert env["SM120_PATCHES_LIVE"] == "custom_allreduce_pcie,moe_runner_sm120"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["NCCL_P2P_LEVEL"] == "PHB"
    assert env["NCCL_IB_DISABLE"] == "1"


def test_an_option_gate_s_environment_and_flag_reach_the_server():
    facts = dict(FACTS, sglang_facts={"version": "0.5.23", "packages": {"sglang": "0.5.23"}},
                 sm120_patches_live=["flashinfer_allreduce_fusion", "pcie_ipc_allreduce"],
                 sm120_patches_options={"gates": ["flashinfer_allreduce_fusion", "pcie_ipc_allreduce"],
                                        "env": {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"},
                                        "flags": {"--flashinfer-allreduce-fusion-backend": "auto"}})
    _unit, _service_, env, argv = _service(_role_vars(PRODUCTION, facts))
    assert env["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "1"
    assert _options(argv[3:])["--flashinfer-allreduce-fusion-backend"] == ["auto"]
    assert "--moe-runner-backend" not in argv


def test_without_the_patch_play_the_host_s_ledger_names_the_live_gates_and_their_options():
    """--tags service alone: no sm120_patches fact; the ledger on the host says what is live."""
    facts = {"sglang_facts": FACTS["sglang_facts"],
             "sglang_state": {"ledger": {"gates": ["custom_allreduce_pcie", "moe_runner_sm120"],
                                         "options": FACTS["sm120_patches_options"]}}}
    _unit, _service_, env, argv = _service(_role_vars(PRODUCTION, facts))
    assert env["SM120_PATCHES_LIVE"] == "custom_allreduce_pcie,moe_runner_sm120"
    assert _options(argv[3:])["--moe-runner-backend"] == ["flashinfer_cutlass"]


def test_no_ledger_and_no_facts_records_no_gate():
    _unit, _service_, env, argv = _service(_role_vars(PRODUCTION, {"sglang_facts": FACTS["sglang_facts"],
                                                                   "sglang_state": {"ledger": {}}}))
    assert env["SM120_PATCHES_LIVE"] == "" and "--moe-runner-backend" not in argv


def test_a_flag_the_installed_release_renamed_is_written_its_way():
    inventory = dict(PRODUCTION, sglang_service_extra_args={"--cuda-graph-max-bs": 256,
                                                            "--enable-flashinfer-allreduce-fusion": True})
    old = _options(_service(_role_vars(inventory, FACTS))[3][3:])
    assert old["--cuda-graph-max-bs"] == ["256"] and old["--enable-flashinfer-allreduce-fusion"] == []
    facts = dict(FACTS, sglang_facts={"version": "0.5.23", "packages": {"sglang": "0.5.23"}})
    new = _options(_service(_role_vars(inventory, facts))[3][3:])
    assert new["--cuda-graph-max-bs-decode"] == ["256"] and new["--flashinfer-allreduce-fusion-backend"] == ["auto"]
    assert "--cuda-graph-max-bs" not in new and "--enable-flashinfer-allreduce-fusion" not in new


# ---------------------------------------------------------------- overrides and quoting

def test_settings_and_extra_args_override_the_profile():
    inventory = dict(PRODUCTION,
                     sglang_service_port=31000,
                     sglang_service_context_length=131072,
                     sglang_service_kv_cache_dtype="auto",
                     sglang_service_extra_args={
                         "--moe-runner-backend": "triton",
                         "--disable-shared-experts-fusion": False,
                         "--enable-metrics": True,
                         "--cuda-graph-bs": [1, 2, 4, 8],
                         "--json-model-override-args": {"rope_scaling": {"factor": 2.0}},
                     },
                     sglang_service_env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_IB_DISABLE": None,
                                         "NCCL_DEBUG": "WARN"})
    _unit, service, env, argv = _service(_role_vars(inventory, FACTS))
    options = _options(argv[3:])
    assert options["--port"] == ["31000"]
    assert options["--context-length"] == ["131072"]
    assert options["--kv-cache-dtype"] == ["auto"]
    assert options["--moe-runner-backend"] == ["triton"]
    assert "--disable-shared-experts-fusion" not in options
    assert options["--enable-metrics"] == []
    assert options["--cuda-graph-bs"] == ["1", "2", "4", "8"]
    assert options["--json-model-override-args"] == ['{"rope_scaling": {"factor": 2.0}}']
    assert "NCCL_IB_DISABLE" not in env and env["NCCL_DEBUG"] == "WARN"
    assert service["ExecStartPost"].endswith("http://127.0.0.1:31000/health")


def test_words_systemd_would_change_are_quoted_and_escaped():
    odd = ["/opt/my env/bin/python", "-c", 'print("100%", "$HOME", "a\\b")', ""]
    inventory = dict(PRODUCTION,
                     sglang_service_launcher=odd,
                     sglang_service_model_path="/srv/models/GLM 5 %i $x",
                     sglang_service_served_model_name='glm "5";')
    _unit, _service_, _env, argv = _service(_role_vars(inventory, FACTS))
    assert argv[:4] == odd
    options = _options(argv[4:])
    assert options["--model-path"] == ["/srv/models/GLM 5 %i $x"]
    assert options["--served-model-name"] == ['glm "5";']


def test_the_check_address_follows_the_listen_address():
    for host, url in (("0.0.0.0", "http://127.0.0.1:30000"), ("::", "http://[::1]:30000"),
                      ("10.1.230.174", "http://10.1.230.174:30000"), ("fd00::5", "http://[fd00::5]:30000")):
        assert _value(_role_vars({"sglang_service_host": host}, FACTS), "__sglang_service_url") == url


def test_a_profile_of_the_inventory_names_its_own_unit():
    inventory = {"sglang_service_profile": "qwen3-small",
                 "sglang_service_profiles": {"qwen3-small": {"description": "a small model", "tp_size": 1,
                                                             "served_model_name": "qwen3",
                                                             "arguments": {"--trust-remote-code": True}}}}
    templar = _role_vars(inventory, {"sglang_facts": FACTS["sglang_facts"]})
    _unit, service, _env, argv = _service(templar)
    assert _value(templar, "__sglang_service_unit") == "sglang-qwen3-small.service"
    assert service["EnvironmentFile"] == "/etc/sglang/qwen3-small.env"
    options = _options(argv[3:])
    assert options["--tp-size"] == ["1"] and options["--trust-remote-code"] == []
    assert "--quantization" not in options and "--mem-fraction-static" not in options
    assert options["--model-path"] == ["/var/lib/sglang/models/qwen3-small"]


# ---------------------------------------------------------------- multi-node

def _multinode(host, **inventory):
    nodes = ["gpu-node-01", "gpu-node-02", "gpu-node-03"]
    facts = {"inventory_hostname": host,
             "groups": {"all": nodes, "glm5_nodes": nodes},
             "hostvars": {"gpu-node-01": {"ansible_host": "10.1.230.174"}, "gpu-node-02": {}, "gpu-node-03": {}}}
    facts.update(FACTS)
    return _role_vars(dict(PRODUCTION, sglang_service_nnodes_group="glm5_nodes", sglang_service_tp_size=24,
                           **inventory), facts)


@pytest.mark.parametrize("host,rank", [("gpu-node-01", 0), ("gpu-node-02", 1), ("gpu-node-03", 2)])
def test_multinode_flags_come_from_the_group(host, rank):
    templar = _multinode(host)
    _unit, _service_, _env, argv = _service(templar)
    options = _options(argv[3:])
    assert options["--nnodes"] == ["3"]
    assert options["--node-rank"] == [str(rank)]
    assert options["--dist-init-addr"] == ["10.1.230.174:25000"]
    assert options["--tp-size"] == ["24"]
    assert _value(templar, "__sglang_service_node_rank") == rank


def test_multinode_address_override_and_first_host_without_ansible_host():
    _unit, _service_, _env, argv = _service(_multinode("gpu-node-02", sglang_service_dist_init_addr="192.168.0.2:5000"))
    assert _options(argv[3:])["--dist-init-addr"] == ["192.168.0.2:5000"]
    templar = _multinode("gpu-node-03", sglang_service_dist_init_port=20000)
    templar.available_variables = dict(templar.available_variables, hostvars={})
    _unit, _service_, _env, argv = _service(templar)
    assert _options(argv[3:])["--dist-init-addr"] == ["gpu-node-01:20000"]


def test_the_nodes_talk_over_the_interface_given():
    _unit, _service_, env, _argv = _service(_multinode("gpu-node-02", sglang_service_nccl_socket_ifname="eth1"))
    assert env["NCCL_SOCKET_IFNAME"] == "eth1" and env["GLOO_SOCKET_IFNAME"] == "eth1"


def test_single_node_has_no_multinode_flags():
    _unit, _service_, _env, argv = _service(_role_vars(PRODUCTION, FACTS))
    assert not {"--nnodes", "--node-rank", "--dist-init-addr"} & set(argv)


# ---------------------------------------------------------------- the role's data


# ---------------------------------------------------------------- experiments held back for the smoke test

def test_a_new_tuning_option_waits_off_where_the_smoke_test_adds_it_and_one_the_server_ran_stays():
    """deploy.yml sets sglang_service_tuning_hold_new where its smoke test decides experiments: the server starts
    without the options its environment file does not record, their baseline."""
    facts = dict(FACTS, sglang_state={"ledger": {}, "service_env": {"SM120_TUNING_LIVE": "nccl_min_nchannels_8"}})
    tuning = ["nccl_min_nchannels_8", "max_running_requests_64"]
    held = _role_vars(dict(PRODUCTION, sglang_service_tuning=tuning, sglang_service_tuning_hold_new=True), facts)
    assert _value(held, "__sglang_service_tuning_held") == ["max_running_requests_64"]
    _unit, _service_, env, argv = _service(held)
    assert env["SM120_TUNING_LIVE"] == "nccl_min_nchannels_8" and env["NCCL_MIN_NCHANNELS"] == "8"
    assert "--max-running-requests" not in argv
    # Without the smoke test deciding them, what is asked for runs.
    asked = _role_vars(dict(PRODUCTION, sglang_service_tuning=tuning), facts)
    assert _value(asked, "__sglang_service_tuning_held") == []
    _unit, _service_, env, argv = _service(asked)
    assert env["SM120_TUNING_LIVE"] == "max_running_requests_64,nccl_min_nchannels_8"
    assert _options(argv[3:])["--max-running-requests"] == ["64"]


def test_one_state_directory_moves_every_record_the_service_reads():
    moved = _role_vars(dict(PRODUCTION, sm120_state_dir="/srv/sm120"), FACTS)
    assert _value(moved, "sglang_service_patch_ledger") == "/srv/sm120/patch-ledger.json"
    assert _value(moved, "sglang_service_tuning_rejected_path") == "/srv/sm120/rejected-tuning.json"
    default = _role_vars(PRODUCTION, FACTS)
    assert _value(default, "sglang_service_patch_ledger") == "/var/lib/sm120-sglang/patch-ledger.json"

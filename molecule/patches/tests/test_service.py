"""After converge (the first verify): the GLM-5-NVFP4 unit runs the stand-in as sglang, healthy, its key in the config file only."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "resources", "tests"))
from sglang_host import API_KEY, processes_holding  # noqa: E402
from phase import converged_only  # noqa: E402

pytestmark = converged_only

UNIT = "sglang-glm-5-nvfp4.service"
UNIT_PATH = "/etc/systemd/system/" + UNIT
ENV_FILE = "/etc/sglang/glm-5-nvfp4.env"
CONFIG_FILE = "/etc/sglang/glm-5-nvfp4.yaml"
# What each host runs, as molecule.yml installs it.
INSTALLED = {"sm120-bookworm": "flashinfer-python==0.7.2,sglang==0.5.23", "sm120-trixie": "sglang==0.5.9"}


def _get(host, path, key=None):
    """Status and body of a GET from inside the container, with the container's own python."""
    script = (
        "import sys, urllib.request, urllib.error\n"
        "req = urllib.request.Request('http://127.0.0.1:30000' + sys.argv[1])\n"
        "if len(sys.argv) > 2: req.add_header('Authorization', 'Bearer ' + sys.argv[2])\n"
        "try:\n"
        "    r = urllib.request.urlopen(req, timeout=10); print(r.status); print(r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code); print(e.read().decode())\n"
    )
    args = [path] + ([key] if key else [])
    out = host.check_output("python3 -c %s " % _quote(script) + " ".join(_quote(a) for a in args))
    status, _newline, body = out.partition("\n")
    return int(status), body


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def _main_pid(host):
    return int(host.check_output("systemctl show --property=MainPID --value %s" % UNIT))


def test_the_service_user_exists(host):
    user = host.user("sglang")
    assert user.exists
    assert user.group == "sglang"
    assert user.home == "/var/lib/sglang"
    assert user.shell == "/usr/sbin/nologin"
    assert user.uid < 1000
    assert host.file("/var/lib/sglang").is_directory


def test_the_unit_is_enabled_and_active(host):
    service = host.service(UNIT)
    assert service.is_enabled
    assert service.is_running
    assert host.check_output("systemctl show --property=KillMode --value %s" % UNIT) == "control-group"
    assert host.check_output("systemctl show --property=Restart --value %s" % UNIT) == "on-failure"


def test_the_server_runs_as_sglang_with_the_profiles_flags(host):
    pid = _main_pid(host)
    assert host.check_output("ps -o user= -p %d" % pid) == "sglang"
    argv = host.file("/proc/%d/cmdline" % pid).content_string.split("\0")
    assert argv[:2] == ["/opt/sglang/bin/python", "/opt/standin/sglang_standin.py"]
    joined = " ".join(argv)
    for flags in ("--model-path /srv/models/glm-5-nvfp4", "--tp-size 8", "--quantization modelopt_fp4",
                  "--disable-shared-experts-fusion", "--enable-metrics",
                  "--kv-cache-dtype bf16", "--attention-backend triton", "--mem-fraction-static 0.85",
                  "--served-model-name glm-5",
                  "--host 0.0.0.0", "--port 30000"):
        assert flags in joined
    # The key reaches the server in the --config file, not on its command line.
    assert argv[argv.index("--config") + 1] == CONFIG_FILE and "--api-key" not in argv


def test_the_port_answers_health_and_the_api_wants_the_key(host):
    # 0.0.0.0:30000 in LISTEN state (0A); the image has neither ss nor netstat.
    assert "00000000:7530 00000000:0000 0A" in host.file("/proc/net/tcp").content_string
    assert _get(host, "/health")[0] == 200
    assert _get(host, "/v1/models")[0] == 401
    status, body = _get(host, "/v1/models", API_KEY)
    assert status == 200
    assert json.loads(body)["data"][0]["id"] == "glm-5"


def test_the_environment_file_is_root_only_and_records_what_the_host_runs(host):
    env = host.file(ENV_FILE)
    assert env.user == "root" and env.group == "root"
    assert env.mode == 0o600
    content = env.content_string
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in content.splitlines()
    # The installed set as the host has it (the wheels in /opt/sglang), the live gates as the patch play published.
    assert "SM120_SGLANG_INSTALL_SET=%s" % INSTALLED[host.backend.get_hostname()] in content.splitlines()
    assert "SM120_PATCHES_LIVE" in content
    assert "molecule-key" not in content


def test_the_key_is_in_the_config_file_readable_by_root_and_the_service_group_only(host):
    config = host.file(CONFIG_FILE)
    assert config.user == "root" and config.group == "sglang" and config.mode == 0o640
    assert json.loads(config.content_string) == {"api-key": API_KEY}


def test_no_process_command_line_holds_the_key(host):
    assert processes_holding(host, API_KEY) == []
    assert processes_holding(host, "/opt/standin/sglang_standin.py") != []


def test_the_unit_has_no_key(host):
    unit = host.file(UNIT_PATH)
    assert unit.mode == 0o644
    content = unit.content_string
    assert "molecule-key" not in content and "--api-key" not in content
    assert "--config %s" % CONFIG_FILE in content
    assert "EnvironmentFile=%s" % ENV_FILE in content


def test_systemd_analyze_verify_passes(host):
    result = host.run("systemd-analyze verify %s" % UNIT_PATH)
    assert result.rc == 0, result.stderr
    assert UNIT not in result.stderr, result.stderr

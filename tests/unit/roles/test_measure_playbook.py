# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/measure.yml, the smoke test alone against an SGLang server: a real ansible-playbook (local connection)
against the molecule stand-in of SGLang (molecule/resources/standin_server/sglang_standin.py: the real server needs
a GPU and a model). No other role of the collection runs, the release is the one the server reports, and the reports
hold every load; a server that cannot be reached fails naming its URL."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _play(tmp_path, url, **overrides):
    """The playbook with these variables; an override of None leaves that variable out."""
    reports = tmp_path / "reports"
    variables = {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "smoke_test_url": url, "smoke_test_model": "m", "smoke_test_repeats": 2, "smoke_test_timeout": 20,
        "smoke_test_report_dir": str(reports), "smoke_test_min_output_tok_s": 10, "smoke_test_min_power_fraction": 0,
        "smoke_test_loads": {"low": {"concurrency": 1, "num_requests": 4, "input_tokens": 16, "output_tokens": 16},
                             "high": {"concurrency": 4, "num_requests": 16, "input_tokens": 16,
                                      "output_tokens": 16}}}
    variables.update(overrides)
    (tmp_path / "vars.yml").write_text(yaml.safe_dump({name: value for name, value in variables.items()
                                                       if value is not None}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    done = subprocess.run([sys.executable, str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i",
                           "localhost,", "-e", "@" + str(tmp_path / "vars.yml"), str(ROOT / "playbooks" / "measure.yml")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout + done.stderr, reports


def test_the_smoke_test_alone_measures_a_server_and_reads_its_release_from_it(tmp_path, standin):
    code, output, reports = _play(tmp_path, standin)
    assert code == 0, output[-3000:]
    roles = set(re.findall(r"TASK \[sm120\.sglang\.([a-z_]+) :", output))
    assert roles == {"smoke_test"}, roles
    report = json.loads(next(reports.glob("*/localhost.json")).read_text())
    # The stand-in's /server_info says "stand-in" where a real SGLang says its __version__.
    assert report["config"]["sglang_version"] == "stand-in"
    assert report["verdict"]["status"] == "pass"
    assert {row["load"] for row in report["measurements"]} == {"low", "high"}


def test_a_server_that_cannot_be_reached_fails_naming_its_url(tmp_path):
    code, output, _reports = _play(tmp_path, "http://127.0.0.1:9")
    assert code != 0 and "http://127.0.0.1:9/server_info" in output, output[-3000:]


def test_without_smoke_test_loads_the_launch_profile_s_loads_are_measured(tmp_path, standin):
    # As documented: no smoke_test_loads; the loads of the profile served (here a small one the inventory adds, as
    # glm-5-nvfp4's 256 requests would take minutes on the stand-in).
    one = {"concurrency": 1, "num_requests": 2, "input_tokens": 8, "output_tokens": 8}
    tiny = {"description": "tiny", "loads": {"one": one}}
    code, output, reports = _play(tmp_path, standin, smoke_test_loads=None, sglang_service_profile="tiny",
                                  sglang_service_profiles={"tiny": tiny})
    assert code == 0, output[-3000:]
    report = json.loads(next(reports.glob("*/localhost.json")).read_text())
    assert {row["load"] for row in report["measurements"]} == {"one"}

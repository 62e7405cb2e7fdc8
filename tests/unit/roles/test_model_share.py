# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model share as the role starts it (roles/sglang_service/tasks/model_take.yml): a real rsync daemon with the
configuration the role's template renders, and real rsync clients. Only the batch's hosts get in, and nobody writes.

The batch's host and the host outside it are two loopback addresses of this machine (127.0.0.2 lets in, 127.0.0.1
is refused): rsync's ``hosts allow`` reads the client's address, which ``rsync --address`` sets."""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import jinja2
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "roles" / "sglang_service" / "templates" / "model_share.conf.j2"
INSIDE, OUTSIDE, LISTEN = "127.0.0.2", "127.0.0.1", "127.0.0.1"


def render(model_path, allow):
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return environment.from_string(TEMPLATE.read_text(encoding="utf-8")).render(
        sglang_service_model_path=model_path, __sglang_service_model_spread={"allow": allow})


def free_port():
    with socket.socket() as probe:
        probe.bind((LISTEN, 0))
        return probe.getsockname()[1]


@pytest.fixture(name="share")
def share_fixture():
    """The source's model directory shared by the rsync daemon, as the role's task starts it."""
    if shutil.which("rsync") is None:
        pytest.fail("rsync is not installed: bash scripts/setup.sh installs it (apt-get install rsync)")
    # World-readable, as a model directory is: a daemon started by root reads as nobody.
    work = pathlib.Path(tempfile.mkdtemp(prefix="sm120-share-"))
    work.chmod(0o755)
    model = work / "model"
    model.mkdir(mode=0o755)
    (model / "config.json").write_text('{"architectures": ["GlmMoeDsaForCausalLM"]}\n', encoding="utf-8")
    (model / "config.json").chmod(0o644)
    config = work / "share.conf"
    config.write_text(render(str(model), [INSIDE]), encoding="utf-8")
    port = free_port()
    daemon = subprocess.Popen(  # pylint: disable=consider-using-with
        ["rsync", "--daemon", "--no-detach", "--config=%s" % config, "--address=%s" % LISTEN, "--port=%d" % port],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex((LISTEN, port)) == 0:
                break
        time.sleep(0.05)
    else:
        daemon.kill()
        pytest.fail("the rsync daemon did not listen: %s" % daemon.communicate()[0])
    yield {"url": "rsync://%s:%d/model" % (LISTEN, port), "model": model, "work": work}
    daemon.terminate()
    daemon.wait(timeout=10)
    shutil.rmtree(work)


def rsync(*args):
    return subprocess.run(["rsync", "--timeout=20", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)


def test_the_rendered_share_is_read_only_unlisted_and_lets_in_only_the_batch():
    text = render("/srv/models/glm-5-nvfp4", ["10.0.0.12", "10.0.0.13"])
    assert "path = /srv/models/glm-5-nvfp4\n" in text
    assert "read only = yes\n" in text and "list = no\n" in text
    assert "hosts allow = 10.0.0.12 10.0.0.13\nhosts deny = *\n" in text


def test_a_host_of_the_batch_takes_the_model(share):
    target = share["work"] / "taken.json"
    done = rsync("--address=%s" % INSIDE, share["url"] + "/config.json", str(target))
    assert done.returncode == 0, done.stdout
    assert target.read_bytes() == (share["model"] / "config.json").read_bytes()


def test_a_host_outside_the_batch_is_refused(share):
    target = share["work"] / "stolen.json"
    done = rsync("--address=%s" % OUTSIDE, share["url"] + "/config.json", str(target))
    # rsync 3.2 (Debian 12, 13) says "access denied"; 3.5 (seen on this machine) does not even own to the module.
    assert done.returncode == 5 and ("@ERROR: access denied" in done.stdout or "@ERROR: Unknown module 'model'"
                                     in done.stdout), done.stdout
    assert not target.exists()


def test_a_write_is_refused_even_from_the_batch(share):
    local = share["work"] / "weights.safetensors"
    local.write_bytes(b"not the model")
    done = rsync("--address=%s" % INSIDE, str(local), share["url"] + "/weights.safetensors")
    assert done.returncode != 0 and "read only" in done.stdout, done.stdout
    assert sorted(os.listdir(share["model"])) == ["config.json"]

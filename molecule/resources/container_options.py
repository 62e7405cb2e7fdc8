# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the container hosts (molecule/resources/container.yml) as a ``docker run`` command line.

    python container_options.py IMAGE    # the options, the image and its command, one argument a line

Imported by the benchmarks (docker_run), run by scripts/deploy-local.sh; molecule reads the same keys from each
scenario's platforms, which tests/unit/test_container_options.py holds to the file.
"""

from __future__ import annotations

import os
import sys

import yaml

OPTIONS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "container.yml")
# molecule's platform key -> docker run's flag, for each option the file may hold.
FLAGS = {"capabilities": "--cap-add", "security_opts": "--security-opt", "tmpfs": "--tmpfs", "volumes": "-v"}


def load(path=OPTIONS_FILE):
    with open(path) as handle:
        options = yaml.safe_load(handle)
    unknown = sorted(set(options) - set(FLAGS) - {"command"})
    if unknown:
        raise ValueError("%s holds %s, which container_options.py cannot give to docker run: add its flag to FLAGS"
                         % (path, ", ".join(unknown)))
    return options


def docker_run(image, options=None):
    """``docker run``'s arguments after its own (-d, --name, ...): the options, the image, the command."""
    options = load() if options is None else options
    argv = []
    for key, flag in FLAGS.items():
        for value in options.get(key) or []:
            argv += [flag, value]
    return argv + [image] + ([options["command"]] if options.get("command") else [])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: container_options.py IMAGE")
    print("\n".join(docker_run(sys.argv[1])))

# Stands in for get-pip.py, which ansible-test downloads from
# ci-files.testing.ansible.com to bootstrap pip in its sanity venvs; that host
# is not reachable from these machines (only PyPI is), and ansible-test's own
# error message suggests saving the script by hand (ansible/ansible#77304).
# This runs pip from its PyPI wheel, saved next to it by scripts/test.sh.
from __future__ import annotations

import glob
import os
import sys

wheel = glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-*-py3-none-any.whl"))[0]
sys.path.insert(0, wheel)
from pip._internal.cli.main import main  # noqa: E402  pylint: disable=wrong-import-position

args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", "--force-reinstall"] + args))

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ExecStartPost of the sglang-*.service units: return once /health answers 200.

SGLang sends systemd no readiness notification. Its HTTP server comes up only
after the weights are loaded, and /health answers 503 until the warm-up
request has run. Holding the unit in "activating" until then makes
`systemctl is-active` mean "serving", and lets TimeoutStartSec bound the whole
load: a load that hangs is killed and, with Restart=on-failure, started again.
No timeout of its own, for that reason.

systemd waits for this check even when the server dies under it, so it also
watches the server ($MAINPID, which systemd sets for ExecStartPost=) and fails
as soon as that is gone: the unit then fails and restarts at once, instead of
after TimeoutStartSec. Standard library only: it runs with the SGLang
environment's interpreter.
"""

import os
import sys
import time
import urllib.error
import urllib.request


def healthy(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        # Refused while the weights load, 503 during the warm-up.
        return False


def server_alive(pid):
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv):
    if len(argv) not in (2, 3):
        sys.stderr.write("usage: %s HEALTH_URL [INTERVAL_S]\n" % argv[0])
        return 2
    url = argv[1]
    interval = float(argv[2]) if len(argv) == 3 else 1.0
    main_pid = int(os.environ["MAINPID"]) if os.environ.get("MAINPID", "").isdigit() else None
    while not healthy(url):
        if not server_alive(main_pid):
            sys.stderr.write("the server (pid %d) exited before %s answered 200\n" % (main_pid, url))
            return 1
        time.sleep(interval)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

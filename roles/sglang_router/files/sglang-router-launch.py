# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ExecStart of sglang-router.service: launch_router with its workers from a file and its key from the environment.

    <venv>/bin/python sglang-router-launch WORKERS_FILE [launch_router flags...]

WORKERS_FILE holds the worker URLs as a JSON list. The play changes the workers of a running router through its API
(POST /workers, DELETE /workers/{id}) and writes the same list here for its next start, so that a change of workers
never restarts the router and cuts the requests in flight through it.

SGLANG_ROUTER_API_KEY, from the unit's root-only EnvironmentFile, becomes --api-key inside this process only: on a
command line every local user could read it in /proc/<pid>/cmdline. sglang-router 0.3.2 takes the key only as a flag.
"""

import json
import os
import sys

KEY_VARIABLE = "SGLANG_ROUTER_API_KEY"


def router_args(argv, environ):
    """The launch_router arguments: the flags given, the workers of the file, the key of the environment."""
    if not argv:
        raise SystemExit("usage: sglang-router-launch WORKERS_FILE [launch_router flags...]")
    path, flags = argv[0], list(argv[1:])
    with open(path, encoding="utf-8") as stream:
        workers = json.load(stream)
    if not isinstance(workers, list) or not all(isinstance(url, str) for url in workers):
        raise SystemExit("%s must hold a JSON list of worker URLs, not %r" % (path, workers))
    if workers:
        flags += ["--worker-urls"] + workers
    key = environ.get(KEY_VARIABLE, "")
    if key:
        flags += ["--api-key", key]
    return flags


def main():
    args = router_args(sys.argv[1:], os.environ)
    # The router's own processes need not see it.
    os.environ.pop(KEY_VARIABLE, None)
    from sglang_router.launch_router import launch_router, parse_router_args

    launch_router(parse_router_args(args))


if __name__ == "__main__":
    main()

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A client of the SGLang router, run on the controller through the fleet scenario's rollouts.

    python router_client.py URL API_KEY STOP_FILE RESULT_FILE [--log-every-request]

Sends one completion at a time to URL/v1/completions until STOP_FILE exists, then writes to RESULT_FILE a JSON
object: ok, failed, the first failures (time, error) and the seconds it ran; with --log-every-request also each
request (sent: epoch seconds, ok, error), for tests/faults/dead_host.py. A request fails when it gets no
answer within 30 s, an HTTP status other than 200, or a body without generated tokens. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request


def main(url, api_key, stop_file, result_file, every=""):
    headers = {"Content-Type": "application/json", "Authorization": "Bearer %s" % api_key}
    body = json.dumps({"model": "glm-5", "prompt": "The capital of France is", "max_tokens": 4}).encode()
    ok, failures, started, requests = 0, [], time.time(), []
    while not os.path.exists(stop_file):
        sent, error = time.time(), None
        try:
            request = urllib.request.Request(url + "/v1/completions", data=body, headers=headers)
            with urllib.request.urlopen(request, timeout=30) as response:
                answer = json.load(response)
            if not (answer.get("usage") or {}).get("completion_tokens"):
                raise ValueError("no tokens generated: %s" % json.dumps(answer)[:200])
            ok += 1
        except (OSError, ValueError, urllib.error.URLError) as exc:
            error = str(exc)[:200]
            failures.append({"at": time.strftime("%H:%M:%S"), "error": error})
        if every == "--log-every-request":
            requests.append({"sent": round(sent, 3), "ok": error is None, "error": error})
        time.sleep(0.05)
    result = {"ok": ok, "failed": len(failures), "failures": failures[:20], "seconds": round(time.time() - started, 1)}
    if every == "--log-every-request":
        result["requests"] = requests
    with open(result_file, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))

# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A steady load on SGLang servers, run on the controller by the monitoring scenario's side_effect.

    python load_client.py API_KEY CONCURRENCY MAX_TOKENS STOP_FILE RESULT_FILE URL [URL ...]

Keeps CONCURRENCY completions of MAX_TOKENS tokens in flight on each URL until STOP_FILE exists, so that each
server has requests running and its GPUs draw their load power the whole time (the spin-wait alert asks for
requests running); a request that fails while a server restarts is sent again. Then writes to RESULT_FILE a JSON
object: per URL, the requests answered and failed. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request


def _client(url, api_key, max_tokens, stop_file, counts, lock):
    headers = {"Content-Type": "application/json", "Authorization": "Bearer %s" % api_key}
    body = json.dumps({"model": "glm-5", "prompt": "The GPU is", "max_tokens": max_tokens,
                       "ignore_eos": True}).encode()
    while not os.path.exists(stop_file):
        try:
            request = urllib.request.Request(url + "/v1/completions", data=body, headers=headers)
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()
            outcome = "ok"
        except (OSError, urllib.error.URLError):
            outcome = "failed"
            time.sleep(0.2)
        with lock:
            counts[url][outcome] += 1


def main(api_key, concurrency, max_tokens, stop_file, result_file, *urls):
    counts = {url: {"ok": 0, "failed": 0} for url in urls}
    lock = threading.Lock()
    threads = [threading.Thread(target=_client, args=(url, api_key, int(max_tokens), stop_file, counts, lock))
               for url in urls for _client_number in range(int(concurrency))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(result_file, "w", encoding="utf-8") as handle:
        json.dump(counts, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

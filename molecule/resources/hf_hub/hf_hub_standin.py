# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for the Hugging Face Hub, for the model scenario: the hub cannot be reached here, and a 400 GB model
would not fit. It serves the repositories under --root (one directory per ORG/NAME, at one revision, main) through
the part of the hub's HTTP API that the real ``hf download`` (huggingface_hub) and the role's listing use:

  GET  /api/models/ORG/NAME[/revision/REV]           the repository, its commit and its files
  GET  /api/models/ORG/NAME/tree/REV[/DIR]           the files with their sizes and hashes: git blob ids, and for
                                                     LFS files (*.safetensors, and files of 1 MiB or more) sha256
  HEAD /ORG/NAME/resolve/REV/PATH, GET with Range    a file, its commit and etag in the headers

Faults, read from --faults (JSON) at every request, counted from the file's last change:
  {"cut": {"path": P, "after_bytes": N}}   the first GET of P that starts before byte N stops there: the connection
                                          closes with the promised length unsent, as a dropped link does
  {"unavailable": {"path": P, "times": K}} after the cut, the next K requests for P answer 503
  {"corrupt": [P, ...]}                    GETs of P serve one byte changed; the listing keeps the true hashes
Every request is appended to --log as one JSON line: client, method, path, range, status, bytes sent.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

LFS_MIN_BYTES = 1 << 20
CHUNK = 1 << 16


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Repo:
    """One repository: its files with their hashes, and a commit id that changes when any file does."""

    def __init__(self, name, directory):
        self.name = name
        self.directory = directory
        self.files = {}
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            relative = path.relative_to(directory).as_posix()
            size = path.stat().st_size
            entry = {"type": "file", "path": relative, "size": size}
            if relative.endswith(".safetensors") or size >= LFS_MIN_BYTES:
                sha256 = sha256_of(path)
                pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                           % (sha256, size)).encode()
                lfs = {"oid": sha256, "size": size, "pointerSize": len(pointer)}
                entry.update(oid=git_blob_id(pointer), lfs=lfs)
            else:
                entry["oid"] = git_blob_id(path.read_bytes())
            self.files[relative] = entry
        listing = "".join("%s %s\n" % (p, e["oid"]) for p, e in self.files.items())
        self.commit = hashlib.sha1(listing.encode()).hexdigest()

    def info(self):
        return {"_id": self.commit[:24], "id": self.name, "modelId": self.name, "sha": self.commit,
                "private": False, "gated": False, "disabled": False, "tags": [], "downloads": 0, "likes": 0,
                "siblings": [{"rfilename": p} for p in self.files]}


class Faults:
    """The faults file, and how much of each fault has been spent since the file last changed."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.stamp = None
        self.spec = {}
        self.cut_done = False
        self.unavailable_left = 0

    def current(self):
        with self.lock:
            try:
                stat = os.stat(self.path)
                stamp = (stat.st_mtime_ns, stat.st_size)
            except (OSError, TypeError):
                stamp = None
            if stamp != self.stamp:
                self.stamp = stamp
                try:
                    self.spec = json.loads(pathlib.Path(self.path).read_text()) if stamp else {}
                except (OSError, ValueError) as error:
                    sys.stderr.write("hf_hub_standin: ignoring faults file %s: %s\n" % (self.path, error))
                    self.spec = {}
                self.cut_done = False
                self.unavailable_left = 0
            return self

    def unavailable(self, path):
        with self.lock:
            spec = self.spec.get("unavailable") or {}
            if self.cut_done and spec.get("path") == path and self.unavailable_left > 0:
                self.unavailable_left -= 1
                return True
            return False

    def cut_at(self, path, start):
        """The byte the response stops at, once, or None."""
        with self.lock:
            spec = self.spec.get("cut") or {}
            if self.cut_done or spec.get("path") != path or start >= int(spec.get("after_bytes", 0)):
                return None
            self.cut_done = True
            self.unavailable_left = int((self.spec.get("unavailable") or {}).get("times", 0))
            return int(spec["after_bytes"])

    def corrupt(self, path):
        with self.lock:
            return path in (self.spec.get("corrupt") or [])


def make_handler(repos, faults, log_path):
    log_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _record(self, status, sent=0):
            line = {"client": self.client_address[0].removeprefix("::ffff:"), "method": self.command,
                    "path": urlsplit(self.path).path, "range": self.headers.get("Range"), "status": status,
                    "bytes": sent}
            if log_path:
                with log_lock, open(log_path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(line) + "\n")

        def _json(self, status, body, headers=None):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self._record(status, len(data))

        def _not_found(self, what):
            self._json(404, {"error": "%s not found" % what}, {"X-Error-Code": "EntryNotFound"})

        def _repo(self, org, name, revision):
            repo = repos.get("%s/%s" % (org, name))
            if repo is None:
                self._json(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
                return None
            if revision not in ("main", repo.commit):
                self._json(404, {"error": "Invalid rev id: %s" % revision}, {"X-Error-Code": "RevisionNotFound"})
                return None
            return repo

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = unquote(urlsplit(self.path).path)
            match = re.fullmatch(r"/api/models/([^/]+)/([^/]+)(?:/revision/([^/]+))?", path)
            if match:
                repo = self._repo(match.group(1), match.group(2), match.group(3) or "main")
                if repo:
                    self._json(200, repo.info())
                return
            match = re.fullmatch(r"/api/models/([^/]+)/([^/]+)/tree/([^/]+)(?:/(.*))?", path)
            if match:
                repo = self._repo(match.group(1), match.group(2), match.group(3))
                if repo:
                    under = (match.group(4) or "").strip("/")
                    entries = [e for p, e in repo.files.items() if not under or p.startswith(under + "/")]
                    self._json(200, entries)
                return
            match = re.fullmatch(r"/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)", path)
            if match:
                repo = self._repo(match.group(1), match.group(2), match.group(3))
                if repo:
                    self._file(repo, match.group(4))
                return
            self._not_found(path)

        def _file(self, repo, relative):
            entry = repo.files.get(relative)
            if entry is None:
                self._not_found(relative)
                return
            if faults.current().unavailable(relative):
                self._json(503, {"error": "Service unavailable (stand-in fault)"})
                return
            size = entry["size"]
            etag = entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]
            start, end = 0, size - 1
            requested = self.headers.get("Range")
            status = 200
            if requested:
                found = re.fullmatch(r"bytes=(\d+)-(\d*)", requested.strip())
                if not found or int(found.group(1)) >= max(size, 1):
                    self.send_response(416)
                    self.send_header("Content-Range", "bytes */%d" % size)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    self._record(416, 0)
                    return
                start = int(found.group(1))
                end = min(int(found.group(2)), size - 1) if found.group(2) else size - 1
                status = 206
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(end - start + 1))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", '"%s"' % etag)
            self.send_header("X-Repo-Commit", repo.commit)
            if "lfs" in entry:
                self.send_header("X-Linked-Etag", '"%s"' % etag)
                self.send_header("X-Linked-Size", str(size))
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
            self.end_headers()
            if self.command == "HEAD":
                self._record(status, 0)
                return
            stop = end + 1
            cut = faults.cut_at(relative, start)
            if cut is not None:
                stop = min(stop, cut)
            corrupt = faults.corrupt(relative)
            sent = 0
            with open(repo.directory / relative, "rb") as handle:
                handle.seek(start)
                position = start
                while position < stop:
                    block = handle.read(min(CHUNK, stop - position))
                    if not block:
                        break
                    if corrupt and position <= size // 2 < position + len(block):
                        index = size // 2 - position
                        block = block[:index] + bytes([block[index] ^ 0xFF]) + block[index + 1:]
                    self.wfile.write(block)
                    position += len(block)
                    sent += len(block)
            self._record(status, sent)
            if cut is not None:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)

    return Handler


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, type=pathlib.Path, help="ORG/NAME directories, one per repository")
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--faults", help="JSON file of faults, re-read when it changes")
    parser.add_argument("--log", help="JSON lines, one per request")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error("--root %s is not a directory" % args.root)
    repos = {}
    for org in sorted(p for p in args.root.iterdir() if p.is_dir()):
        for repo in sorted(p for p in org.iterdir() if p.is_dir()):
            repos["%s/%s" % (org.name, repo.name)] = Repo("%s/%s" % (org.name, repo.name), repo)
    if not repos:
        parser.error("--root %s holds no ORG/NAME repository directory" % args.root)
    server = ThreadingHTTPServer((args.bind, args.port), make_handler(repos, Faults(args.faults), args.log))
    sys.stderr.write("hf_hub_standin: serving %s on %s:%d\n" % (", ".join(repos), args.bind, args.port))
    server.serve_forever()


if __name__ == "__main__":
    main()

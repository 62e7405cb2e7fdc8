# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-in server's part in a model across hosts (--nnodes, --node-rank, --dist-init-addr).

It stands in for what SGLang's nodes do to meet, which cannot happen here without GPUs and NCCL: the node of
rank 0 hosts the rendezvous at --dist-init-addr (torch.distributed's TCP store) and serves the API once every
other rank has joined; a node of rank 1 or more waits until it reaches rank 0, joins, and then answers only
/health, /health_generate and /ping (SGLang 0.5.23, ``Engine._launch_subprocesses``:
``launch_dummy_health_check_server`` for ``node_rank >= 1``). A join names its rank and the --nnodes it was
started with; rank 0 refuses a rank outside 1..nnodes-1, one already joined, and another --nnodes, and the
refused node exits 1 saying why. When rank 0 goes away the other ranks exit 1 (their schedulers stop with it),
and systemd's Restart=on-failure starts them again; when a node of rank 1 or more leaves, rank 0 answers
/health 503 until that rank joins again.

Unlike SGLang, a node of rank 1 or more stops on SIGTERM (SGLang's waits for rank 0's shutdown broadcast).
Standard library only.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time


def plan(nnodes, node_rank, dist_init_addr):
    """(host, port) of the rendezvous, None for one node; raises ValueError naming a flag SGLang would refuse."""
    if nnodes < 1:
        raise ValueError("--nnodes %d: give 1 or more" % nnodes)
    if not 0 <= node_rank < nnodes:
        raise ValueError("--node-rank %d is outside 0..%d (--nnodes %d)" % (node_rank, nnodes - 1, nnodes))
    if nnodes == 1:
        return None
    host, sep, port = (dist_init_addr or "").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError("--nnodes %d needs --dist-init-addr HOST:PORT of the node of rank 0, got %r"
                         % (nnodes, dist_init_addr))
    return host.strip("[]"), int(port)


def log(message):
    sys.stderr.write("sglang_standin: %s\n" % message)
    sys.stderr.flush()


class Rendezvous:
    """Rank 0's side: listens on the rendezvous port; ``complete`` is set while every other rank is joined."""

    def __init__(self, port, nnodes):
        self.nnodes = nnodes
        self.joined = {}
        self.lock = threading.Lock()
        self.complete = threading.Event()
        self.listener = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True) \
            if socket.has_dualstack_ipv6() else socket.create_server(("", port))
        log("rank 0 of %d: waiting for ranks 1..%d at port %d" % (nnodes, nnodes - 1, port))
        if nnodes == 1:
            self.complete.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            connection, peer = self.listener.accept()
            threading.Thread(target=self._serve, args=(connection, peer), daemon=True).start()

    def _refuse(self, connection, reason):
        log("refused a join: %s" % reason)
        connection.sendall(("refused: %s\n" % reason).encode("utf-8"))
        connection.close()

    def _serve(self, connection, peer):
        # A dual-stack listener names an IPv4 peer as ::ffff:a.b.c.d.
        peer = (peer[0].removeprefix("::ffff:"),) + tuple(peer[1:])
        stream = connection.makefile("r", encoding="utf-8")
        try:
            hello = json.loads(stream.readline() or "{}")
            rank, nnodes = int(hello.get("rank", -1)), int(hello.get("nnodes", -1))
        except (ValueError, TypeError, OSError):
            self._refuse(connection, "%s sent no rank" % (peer[0],))
            return
        with self.lock:
            if nnodes != self.nnodes:
                self._refuse(connection, "rank %d was started with --nnodes %d, rank 0 with %d"
                             % (rank, nnodes, self.nnodes))
                return
            if not 1 <= rank < self.nnodes:
                self._refuse(connection, "rank %d is outside 1..%d" % (rank, self.nnodes - 1))
                return
            if rank in self.joined:
                self._refuse(connection, "rank %d has joined already, from %s" % (rank, self.joined[rank]))
                return
            self.joined[rank] = peer[0]
            connection.sendall(b"ok\n")
            log("rank %d joined from %s (%d of %d ranks)" % (rank, peer[0], len(self.joined) + 1, self.nnodes))
            if len(self.joined) == self.nnodes - 1:
                self.complete.set()
        # The connection stays open while the rank lives.
        while connection.recv(64):
            pass
        with self.lock:
            self.joined.pop(rank, None)
            self.complete.clear()
        log("rank %d left: /health answers 503 until it joins again" % rank)


def join(address, rank, nnodes):
    """A rank of 1 or more: reach rank 0 (retrying until it listens), join, and return the open connection."""
    waited = False
    while True:
        try:
            connection = socket.create_connection(address, timeout=5)
            break
        except OSError as exc:
            if not waited:
                log("rank %d of %d: waiting for rank 0 at %s:%d (%s)" % (rank, nnodes, address[0], address[1], exc))
                waited = True
            time.sleep(0.5)
    connection.sendall((json.dumps({"rank": rank, "nnodes": nnodes}) + "\n").encode("utf-8"))
    answer = connection.makefile("r", encoding="utf-8").readline().strip()
    if answer != "ok":
        raise ValueError("rank 0 at %s:%d %s" % (address[0], address[1], answer or "closed the connection"))
    connection.settimeout(None)
    log("rank %d of %d: joined rank 0 at %s:%d" % (rank, nnodes, address[0], address[1]))
    return connection


def exit_when_closed(connection, address):
    """Rank 0 going away stops this node: exit 1, for systemd to start it again."""
    def watch():
        while connection.recv(64):
            pass
        log("rank 0 at %s:%d went away: this node stops with it" % address)
        sys.stderr.flush()
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()

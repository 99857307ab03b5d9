"""The ``gloo`` backend of ``tracec.distributed``: ranks that the script
starts itself (``torch.multiprocessing``) meeting over TCP, eagerly.

Rendezvous (PyTorch's ``env://``, or ``init_method="tcp://ADDR:PORT"``):
rank ``r`` listens on ``MASTER_ADDR:MASTER_PORT + r``; for every pair
``i < j`` rank ``j`` connects to rank ``i`` (retrying until ``timeout``) and
says who it is.  Each pair then shares one socket, whose bytes arrive in the
order they were sent, so two ranks that issue the same operations in the
same order (PyTorch's contract for collectives and matched send / recv)
pair them up without tags.

Invariants: a message is an 8-byte length then the tensor's bytes, and the
receiver checks the length against its tensor (a mismatch raises, after
reading the message, so the stream stays in step); ``all_reduce`` sums the ranks' tensors in rank
order on every rank, so all ranks end with the same bits.  Sends of one
pair are serialized by a lock (``isend`` runs on a thread).  There is no IR
for these operations: inside ``torch.compile`` they refuse (MPI's
collectives are traced; API.md section 6).
"""
from __future__ import annotations

import os
import socket
import struct
import threading
import time

import numpy as np

_LEN = struct.Struct("<q")


class TCPGroup:
    """The default group of a ``gloo`` run: ``rank()``, ``size()``, and the
    sockets to every other rank."""

    backend = "gloo"

    def __init__(self, rank: int, size: int, addr: str, port: int, timeout: float):
        if not 0 <= rank < size:
            raise ValueError(f"init_process_group: rank {rank} is not in [0, {size})")
        self._rank, self._size = rank, size
        self.peers: dict[int, socket.socket] = {}
        self.locks = {p: threading.Lock() for p in range(size) if p != rank}
        listener = None
        if rank < size - 1:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((addr, port + rank))
            listener.listen(size)
        for peer in range(rank):                      # connect to every lower rank
            self.peers[peer] = self._connect(addr, port + peer, timeout)
            self.peers[peer].sendall(_LEN.pack(rank))
        listener_deadline = time.monotonic() + timeout
        while len(self.peers) < size - 1:             # accept every higher rank
            listener.settimeout(max(0.01, listener_deadline - time.monotonic()))
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                raise RuntimeError(f"init_process_group: rank {rank} timed out waiting for "
                                   f"{size - 1 - len(self.peers)} more rank(s) to connect "
                                   f"to {addr}:{port + rank}") from None
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.peers[_LEN.unpack(self._read(conn, _LEN.size))[0]] = conn
        if listener is not None:
            listener.close()

    @staticmethod
    def _connect(addr, port, timeout) -> socket.socket:
        deadline = time.monotonic() + timeout
        while True:
            try:
                s = socket.create_connection((addr, port), timeout=timeout)
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"init_process_group: could not connect to "
                                       f"{addr}:{port} within the timeout") from None
                time.sleep(0.02)

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def __repr__(self):
        return f"ProcessGroup(gloo, rank={self._rank}, size={self._size})"

    def _peer(self, peer: int, what: str) -> socket.socket:
        if peer == self._rank:
            raise ValueError(f"{what}: rank {peer} is this process's own rank")
        if peer not in self.peers:
            raise ValueError(f"{what}: rank {peer} is not in a group of size {self._size}")
        return self.peers[peer]

    @staticmethod
    def _read(sock, n: int) -> bytes:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = sock.recv_into(view[got:])
            if k == 0:
                raise RuntimeError("tracec.distributed: connection closed by the other rank")
            got += k
        return bytes(buf)

    def send(self, data: np.ndarray, peer: int) -> None:
        """Send ``data``'s bytes (C order) to ``peer``."""
        sock = self._peer(peer, "send")
        payload = np.ascontiguousarray(data).tobytes()
        with self.locks[peer]:
            sock.sendall(_LEN.pack(len(payload)) + payload)

    def recv(self, like: np.ndarray, peer: int) -> np.ndarray:
        """The next message from ``peer``, as an array shaped and typed as ``like``."""
        sock = self._peer(peer, "recv")
        n = _LEN.unpack(self._read(sock, _LEN.size))[0]
        payload = self._read(sock, n)     # (read even when refused: the stream stays in step)
        if n != like.nbytes:
            raise RuntimeError(f"recv: rank {peer} sent {n} bytes, but the receiving tensor "
                               f"holds {like.nbytes} ({like.dtype}, shape {list(like.shape)})")
        return np.frombuffer(payload, like.dtype).reshape(like.shape)

    def recv_bytes(self, peer: int) -> bytes:
        """The next message from ``peer``, whatever its length."""
        sock = self._peer(peer, "recv")
        return self._read(sock, _LEN.unpack(self._read(sock, _LEN.size))[0])

    def exchange_bytes(self, payload: bytes) -> list:
        """Every rank's ``payload`` (of any length), in rank order."""
        data = np.frombuffer(payload, np.uint8)
        senders = [threading.Thread(target=self.send, args=(data, p)) for p in self.peers]
        for t in senders:
            t.start()
        got = {p: self.recv_bytes(p) for p in sorted(self.peers)}
        for t in senders:
            t.join()
        got[self._rank] = bytes(payload)
        return [got[r] for r in range(self._size)]

    def exchange(self, data: np.ndarray) -> list:
        """Every rank's ``data``, in rank order (this rank's own included):
        sends on threads while receiving, so no pair waits on the other."""
        senders = [threading.Thread(target=self.send, args=(data, p)) for p in self.peers]
        for t in senders:
            t.start()
        got = {p: self.recv(data, p) for p in sorted(self.peers)}
        for t in senders:
            t.join()
        got[self._rank] = np.ascontiguousarray(data)
        return [got[r] for r in range(self._size)]

    def close(self) -> None:
        for s in self.peers.values():
            s.close()
        self.peers.clear()


def rendezvous(init_method, rank: int, world_size: int, timeout) -> TCPGroup:
    """The group of ``init_method`` (None or ``env://``: ``MASTER_ADDR`` /
    ``MASTER_PORT``, and ``RANK`` / ``WORLD_SIZE`` where not given;
    ``tcp://ADDR:PORT``)."""
    env = os.environ
    if init_method in (None, "env://"):
        missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in env]
        if missing:
            raise ValueError(f"Error initializing torch.distributed using env:// rendezvous: "
                             f"environment variable {missing[0]} expected, but not set")
        addr, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
    elif str(init_method).startswith("tcp://"):
        addr, _, port = str(init_method)[len("tcp://"):].rpartition(":")
        port = int(port)
    else:
        raise ValueError(f"tracec.distributed (gloo): init_method {init_method!r} is not "
                         "supported (env:// or tcp://ADDR:PORT are)")
    if rank in (-1, None):
        rank = int(env.get("RANK", -1))
    if world_size in (-1, None):
        world_size = int(env.get("WORLD_SIZE", -1))
    if rank < 0 or world_size < 1:
        raise ValueError("init_process_group(backend='gloo'): give rank and world_size (or "
                         "set RANK and WORLD_SIZE)")
    seconds = 300.0 if timeout is None else (
        timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout))
    return TCPGroup(rank, world_size, addr, port, seconds)

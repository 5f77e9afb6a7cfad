"""The transport's own floor: a bare ZeroMQ DEALER/ROUTER round with a round's idle pattern, no testbed code.

A testbed round on loopback without emulation costs the UE ``t_comm`` = (first send .. last receive) minus
the edge's compute.  Part of that is ZeroMQ itself: two processes that each sat idle (the edge while the UE
drafted, the UE while the edge verified) and their I/O threads must wake.  This measures that part alone: an
echo server that spins for ``compute_s`` before replying (the verification), and a client that spins for
``gap_s`` before each request (the drafting), with the same socket types, so that ``t_comm - floor`` is what
the testbed's own code (codec, validation, session logic, bookkeeping) adds.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import zmq


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _echo(compute_s: float) -> None:
    """The server process: print the bound port, echo each message after compute_s of spinning, until 'quit'."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    try:
        while True:
            if not poller.poll(1000):
                continue
            frames = sock.recv_multipart()
            if frames[1] == b"quit":
                return
            _spin(compute_s)
            sock.send_multipart(frames)
    finally:
        sock.close(0)
        ctx.term()


def round_floor(n: int = 150, gap_s: float = 0.015, compute_s: float = 0.007, nbytes: int = 200,
                timeout_s: float = 5.0) -> dict:
    """Median and mean of (round trip - compute_s) over n bare ZeroMQ rounds, ms."""
    server = subprocess.Popen([sys.executable, "-m", "testbed.hostile.zmqfloor", repr(compute_s)],
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, int(timeout_s * 1000))
    try:
        port = server.stdout.readline().strip()
        if not port.isdigit():
            raise RuntimeError(f"the echo server did not start (printed {port!r})")
        sock.connect(f"tcp://127.0.0.1:{port}")
        times, msg = [], b"x" * nbytes
        for _ in range(n):
            _spin(gap_s)
            t0 = time.perf_counter()
            sock.send(msg)
            sock.recv()
            times.append(time.perf_counter() - t0 - compute_s)
        sock.send(b"quit")
    finally:
        sock.close(0)
        ctx.term()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return {"median_ms": statistics.median(times) * 1e3, "mean_ms": statistics.mean(times) * 1e3, "n": n,
            "gap_ms": gap_s * 1e3, "compute_ms": compute_s * 1e3}


if __name__ == "__main__":
    _echo(float(sys.argv[1]))

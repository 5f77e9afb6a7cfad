"""Edge server: a ZeroMQ ROUTER serving many UE sessions, each with its own target KV cache.

Usage: ``python -m testbed.serve --bind tcp://0.0.0.0:5555 [--auth KEYS] [--target DIR] [--head none]``
Prints ``READY <endpoint>`` once listening.  A bad message gets an ERROR reply naming the problem;
every other session keeps being served.  Sessions are freed on CLOSE, after ``--session-timeout-s`` idle, or when
their peer's connection ends (closed, or silent past ``--heartbeat-timeout-ms``: testbed/live/common/liveness.py).
``--auth DIR`` (keys from ``python -m testbed.keys``) requires CurveZMQ and accepts only the client keys listed in
DIR/clients; a session is bound to the key that opened it (testbed/live/common/auth.py).
Protected mode: a ``--bind`` reachable from other hosts without ``--auth`` is refused (exit 2) unless ``--insecure``;
loopback stays open.  A UE that declares keepalives at OPEN and falls silent (frozen) for ``--heartbeat-timeout-ms``
has its sessions freed (testbed/live/common/keepalive.py).
OPEN is refused when the UE's drafter does not share the target's tokenizer (size and hash of the vocabulary) or
its hidden size does not fit the decision head, or when its prompt plus max_new_tokens exceeds the target's context
(or ``--max-context-tokens``), or when its KV cache (prompt + max_new_tokens + draft_len positions) cannot fit
``--memory-budget-mb`` (ERROR ``kv_budget``, before anything is allocated: without the batching engine, beside the
other sessions' reservations; with it, alone, as the engine makes room per pass); OPEN_OK reports the edge's settings
(head, tau, target, batching).  An internal error is logged with its traceback here; the peer gets a generic ERROR.
REFERENCE asks for the target-only greedy output of a prompt (what lossless protocols must reproduce), cached.
``--engine vllm`` verifies through vLLM instead of our engine (wisv/serving/vllm_engine.py, docs/engines.md): the
edge then holds only the target's config and LM head (``TargetFacts``), and REFERENCE runs through vLLM too.
"""
from __future__ import annotations

import ctypes
import gc
import logging
import resource
import signal
import socket
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict, replace
from pathlib import Path

import torch
import zmq

import config
from channel.capture import capturing, iface_for
from testbed.common.heads import load_policy
from testbed.live.common.auth import open_bind_refusal, open_bind_warning, serve_curve
from testbed.live.common.liveness import Heartbeat, PeerWatch
from testbed.live.common.sockbounds import bound_socket
from testbed.live.edge.edgeserver import EdgeServer
from testbed.live.edge.inbox import SWITCH_INTERVAL_S, Direct, Inbox
from testbed.live.edge.ratelog import limit as rate_limit_warnings
from testbed.live.edge.references import ReferenceWorker
from testbed.live.edge.serveconfig import ServeConfig
from wisv.models.loader import builtin_paths, load_model, load_tokenizer, resolve_dtype
from wisv.pairs import apply_pair
from wisv.serving.vllm_engine import TargetFacts

__all__ = ["EdgeServer", "ServeConfig", "main", "parse_args", "serve"]  # EdgeServer, ServeConfig: their old home
log = logging.getLogger("testbed.serve")
REFERENCE_POLL_S = 0.005  # while the worker computes, the loop looks for its results at least this often, s

PROG = "python -m testbed.serve"  # as users type it: --help and error lines


def serve(cfg: ServeConfig, ready=print) -> None:
    """Load the target, bind, and serve until SIGINT/SIGTERM."""
    torch.set_num_threads(1)
    cfg = apply_pair(cfg, drafter=None)
    if why := open_bind_refusal(cfg.bind, cfg.auth, cfg.insecure):
        raise ValueError(why)
    check_free(cfg.bind)  # a port in use fails now, not after loading the target
    path = cfg.target or builtin_paths()[1]
    dtype = resolve_dtype(cfg.dtype, cfg.device)
    target = (TargetFacts(path, cfg.device, dtype) if cfg.engine == "vllm"  # vLLM runs it: its facts and LM head here
              else load_model(Path(path), "target", cfg.device, dtype))
    policy, tau, desc = load_policy(cfg.head, cfg.tau, cfg.target, int(target.config.hidden_size))
    print(f"edge: decision head {desc}", flush=True)
    gc.collect()
    gc.freeze()  # the loaded model's objects leave the GC's generations: no ~0.3 s full collection mid-run
    server = EdgeServer(replace(cfg, tau=tau), target, policy, load_tokenizer(Path(path), "target"), desc)
    raise_fd_limit()
    ctx = zmq.Context()
    sock = bound_socket(ctx.socket(zmq.ROUTER), server.limits, cfg.socket_hwm_msgs)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.HANDSHAKE_IVL, cfg.handshake_ivl_ms)  # half-open connections do not hold their fd for long
    # the ROUTER sends no PINGs of its own: libzmq 4.3.5 aborts (!_io_error, stream_engine_base.cpp:310) when a ROUTER
    # that heartbeats is flooded past its receive high-water mark by peers that then hang up (issue 27); the UEs'
    # heartbeats still reach it, and their TTL (--heartbeat-timeout-ms) closes a connection gone silent
    Heartbeat(0, cfg.heartbeat_timeout_ms).apply(sock)
    # no ROUTER_HANDOVER: with CURVE and heartbeats, libzmq aborts when identities are taken over repeatedly; a UE
    # that redials uses a fresh identity, and its sessions follow their token (testbed/live/edge/admission.py)
    stop = {"flag": False}
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.update(flag=True))
    try:
        with ExitStack() as stack:
            if cfg.auth:
                stack.callback(serve_curve(ctx, sock, cfg.auth).stop)
            watch = PeerWatch(sock)
            stack.callback(watch.close)
            if getattr(server.engine, "greedy", None) is None:  # an engine of its own (vLLM) computes them inline
                server.worker = ReferenceWorker(server.generate, server.references)
                stack.callback(server.worker.stop)
            sys.setswitchinterval(SWITCH_INTERVAL_S)  # the loop gets the GIL back from the worker within ~1 ms
            endpoint = _bind(sock, cfg.bind)
            if warning := open_bind_warning(endpoint, cfg.auth):
                print(warning, file=sys.stderr, flush=True)
            ready(f"READY {endpoint}", flush=True)
            if server.batcher is None:
                _loop(Direct(sock, server.caps), server, stop, watch)
            else:
                with Inbox(ctx, sock, server.busy, cfg.inbox_max_msgs, server.caps, int(cfg.inbox_peer_mb * 2**20),
                           int(cfg.inbox_total_mb * 2**20)) as inbox:
                    _loop(inbox, server, stop, watch)
    finally:
        sock.close(0)
        ctx.term()


def check_free(bind: str) -> None:
    """A ValueError naming --bind when its TCP port is taken on this host (port 0, any free one, always passes)."""
    host, _, port = bind.removeprefix("tcp://").rpartition(":")
    if port in ("0", "*"):
        return
    with socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ZeroMQ: a TIME_WAIT port is free
        try:
            probe.bind((host.strip("[]").replace("*", "") or "0.0.0.0", int(port)))
        except OSError as e:
            raise ValueError(f"--bind {bind}: cannot bind ({e.strerror}); is another process listening there? "
                             "choose another port, or port 0 for a free one") from None


def _bind(sock: zmq.Socket, bind: str) -> str:
    if bind.endswith(":0"):
        bind = bind[:-2] + ":*"
    try:
        sock.bind(bind)
    except zmq.ZMQError as e:  # the port is taken, or the address is not this host's
        raise ValueError(f"--bind {bind}: cannot bind ({e.strerror}); is another process listening there? "
                         "choose another port, or port 0 for a free one") from None
    return sock.getsockopt(zmq.LAST_ENDPOINT).decode()


def _loop(source: Direct | Inbox, server: EdgeServer, stop: dict, watch: PeerWatch | None = None) -> None:
    """Serve until stopped: free the sessions of peers gone, handle what arrived, one batch per turn, and sweep idle
    sessions every second."""
    last_sweep = time.monotonic()
    while not stop["flag"]:
        wait_s = 0 if server.held or server.streams else REFERENCE_POLL_S if server.worker and server.worker.busy \
            else 0.1
        items = source.get(wait_s, 4 * server.cfg.max_batch)
        gone = watch.gone(items) if watch else []
        for peer in gone:
            if n := server.drop_peer(peer):
                log.info("peer %s disconnected: freed %d session(s)", peer.hex(), n)
            server.probes.level.pop(peer, None)
        if items or server.held or server.streams:  # one batch (and one stream step) per turn: what arrived
            #   during it joins the queue before the next pick
            for peer, reply in server.handle_many([(p, f, t) for t, p, f in items], one_batch=True):
                source.send([peer] + reply)
        for peer, reply in server.references_done():  # each as soon as it is ready
            source.send([peer] + reply)
        for peer, n in server.sweep_silent().items():  # the log line of a peer gone: a frozen UE is gone
            log.info("peer %s disconnected: freed %d session(s) (no keepalive for %g s)", peer.hex(), n,
                     server.alive.timeout_s)
        if time.monotonic() - last_sweep > 1.0:
            server.sweep()
            trim_heap()  # what peers gone left in freed buffers goes back to the OS
            last_sweep = time.monotonic()


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to its hard limit (each connection holds one); returns the new one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def trim_heap() -> None:
    """glibc: return the free heap to the OS (``malloc_trim``); elsewhere nothing."""
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


def parse_args(argv: list[str] | None = None) -> ServeConfig:
    return config.parse(ServeConfig, argv, prog=PROG, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    rate_limit_warnings("testbed.serve", "testbed.auth", "testbed.auth.zap", "testbed.batch")
    cfg = parse_args(argv)
    log.info("config %s", asdict(cfg))
    try:
        with capturing(cfg.capture, iface_for(cfg.capture, cfg.capture_iface, cfg.bind)):
            serve(cfg)
    except ValueError as e:  # a bad --head, --target, --auth DIR or heartbeat setting
        print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)

"""User-space link emulator (no root): a TCP relay imposing rate, PER, delay and jitter per direction.

Who does what: ``linkmodel`` decides when each chunk leaves and arrives (pure functions plus the
per-direction ``Link`` state), ``relay`` moves one connection's bytes at those times, and
``LinkEmulator`` listens, connects each accepted client to the target, owns the links and counts
bytes.  Up = client (UE) -> server (edge), down = server -> client.  The CSI in force is looked up
(fixed, or from a trace replayed from ``start()``) when a chunk starts serializing.  With
``shared_link`` every connection queues on one link per direction, like UEs sharing a cell;
otherwise each connection has its own.  Queues are unbounded (no drops on overflow), the TCP
handshake to the target is not delayed, and an ideal link (no CSI or ``CSI.ideal()``, no jitter)
takes a fast path that forwards every chunk as soon as it is read.  Outages (a trace's ``outage`` rows
or ``outages``, channel/outage.py) hold every byte until the link returns.  Byte counters are summed over
all connections and count a chunk just before it is handed to the receiver.  For accurate timing
run the emulator in its own process (the CLI), away from GIL-heavy work.

CLI: ``python -m channel.emulator --listen 127.0.0.1:5601 --forward 127.0.0.1:5555 --rate-mbps 20
--rtt-ms 20 --per 0.01`` runs until SIGINT/SIGTERM and prints the byte counters.
"""
from __future__ import annotations

import argparse
import math
import signal
import socket
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

import config
from channel.csi import CSI
from channel.csitrace import CSITrace, load_trace
from channel.linkmodel import MTU_BYTES, Direction, Link, dir_params
from channel.outage import parse_outages
from channel.relay import Connection, shutdown_quietly

CONNECT_TIMEOUT_S = 3.0  # connecting to the target, s
REDIAL_S = 0.2  # a held client's next try at the target after this long, s
MAX_HELD = 64  # clients held at once while the target is down (more are hung up at once)
JOIN_TIMEOUT_S = 5.0  # stop(): longest wait for one thread, s
DIRECTIONS: tuple[Direction, ...] = ("up", "down")
_IDEAL = CSI.ideal()  # the CLI's link when no rate, RTT or PER is given


@dataclass
class LinkConfig:
    """Where the relay listens and forwards, and the link it emulates."""

    target_port: int  # server (edge) port to forward to
    target_host: str = "127.0.0.1"  # server (edge) host
    listen_host: str = "127.0.0.1"  # address the relay listens on
    listen_port: int = 0  # 0 = any free port; read LinkEmulator.port after start()
    csi: CSI | None = None  # fixed link state; None = ideal link
    trace: str | Path | CSITrace | None = None  # CSI trace replayed from start(); excludes csi
    trace_loop: bool = False  # loop a trace loaded from a path
    jitter_ms: float = 0.0  # std of the Gaussian jitter on each one-way delay, ms
    mtu_bytes: int = MTU_BYTES  # segment size for losses and retransmissions, bytes
    seed: int = 0  # seeds loss and jitter draws
    shared_link: bool = True  # one link per direction shared by all connections; False = one per connection
    host_overhead_ms: float = 0.0  # hosts' one-way cost taken out of each direction's delay (calibrated), ms
    outages: str = ""  # outage periods START_S:DURATION_S[,...] from start(): nothing passes, bytes are held
    target_wait_s: float = 0.0  # a client that arrives while the target is down is held this long for it to come
    #                             back (as a real host's port comes back; 0: hung up at once, which a ZeroMQ peer
    #                             reads as a hang-up mid-handshake), s

    def __post_init__(self) -> None:
        if self.csi is not None and self.trace is not None:
            raise ValueError("LinkConfig: give csi or trace, not both")
        parse_outages(self.outages)  # ValueError naming a bad period
        if not 0 <= self.jitter_ms < math.inf:
            raise ValueError(f"LinkConfig.jitter_ms must be finite and >= 0, got {self.jitter_ms}")
        if not 0 <= self.host_overhead_ms < math.inf:
            raise ValueError(f"LinkConfig.host_overhead_ms must be finite and >= 0, got {self.host_overhead_ms}")
        if not 0 <= self.target_wait_s < math.inf:
            raise ValueError(f"LinkConfig.target_wait_s must be finite and >= 0, got {self.target_wait_s}")
        if self.mtu_bytes < 1:
            raise ValueError(f"LinkConfig.mtu_bytes must be >= 1, got {self.mtu_bytes}")
        for name in ("target_port", "listen_port"):
            if not 0 <= getattr(self, name) < 65536:
                raise ValueError(f"LinkConfig.{name} must be in [0, 65535], got {getattr(self, name)}")


@dataclass(frozen=True)
class ByteCounts:
    """Payload bytes delivered by the relay."""

    up: int  # client -> server, bytes
    down: int  # server -> client, bytes


class LinkEmulator:
    """The relay: ``with LinkEmulator(cfg) as emu: connect to emu.endpoint``."""

    def __init__(self, cfg: LinkConfig):
        self.cfg = cfg
        self.trace = _resolve_trace(cfg)
        self.t0_s = 0.0  # time.perf_counter() at start()
        self.t0_epoch_s = 0.0  # time.time() at start(): lets other processes look up the trace in force
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[Connection] = set()
        self._n_opened = 0
        self._held = 0  # clients waiting for the target (target_wait_s)
        self._bytes = {d: 0 for d in DIRECTIONS}
        self._marked = {d: 0 for d in DIRECTIONS}
        self._links: dict[Direction, Link] | None = None
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    @property
    def fast_path(self) -> bool:
        """True when the link is ideal and chunks are forwarded at once."""
        return (len(self.trace) == 1 and self.trace.csis[0].is_ideal and self.cfg.jitter_ms == 0
                and not self.trace.outages)

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("LinkEmulator.port: not started")
        return self._listener.getsockname()[1]

    @property
    def endpoint(self) -> str:
        """ZeroMQ-style address of the relay, e.g. tcp://127.0.0.1:5601."""
        return f"tcp://{self.cfg.listen_host}:{self.port}"

    @property
    def n_connections(self) -> int:
        with self._lock:
            return len(self._conns)

    def csi(self) -> CSI:
        """CSI in force now (the ideal CSI when none is emulated); the trace's start before start()."""
        return self.trace.at(time.perf_counter() - self.t0_s if self._listener is not None else 0.0)

    def totals(self) -> ByteCounts:
        """Bytes delivered per direction since start()."""
        with self._lock:
            return ByteCounts(self._bytes["up"], self._bytes["down"])

    def take_counts(self) -> ByteCounts:
        """Bytes delivered per direction since the previous take_counts() (or start()); resets the mark."""
        with self._lock:
            out = ByteCounts(*(self._bytes[d] - self._marked[d] for d in DIRECTIONS))
            self._marked = dict(self._bytes)
            return out

    def start(self) -> LinkEmulator:
        if self._listener is not None:
            raise RuntimeError("LinkEmulator.start: already started")
        listener = socket.create_server((self.cfg.listen_host, self.cfg.listen_port), backlog=64)
        self._listener = listener
        self.t0_s, self.t0_epoch_s = time.perf_counter(), time.time()
        if self.cfg.shared_link and not self.fast_path:
            self._links = self._make_links(0)
        self._acceptor = threading.Thread(target=self._accept_loop, name="linkemu-accept", daemon=True)
        self._acceptor.start()
        return self

    def stop(self) -> None:
        """Stop accepting, break every connection and join all threads."""
        if self._listener is None or self._stop.is_set():
            return
        self._stop.set()
        shutdown_quietly(self._listener, socket.SHUT_RDWR)  # wakes accept()
        if self._acceptor is not None:
            self._acceptor.join(JOIN_TIMEOUT_S)
        self._listener.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.abort()
        for c in conns:
            c.join(JOIN_TIMEOUT_S)

    def __enter__(self) -> LinkEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _make_links(self, conn_index: int) -> dict[Direction, Link]:
        def params_at(d: Direction):
            return lambda t_s: dir_params(self.trace.at(t_s), d, self.cfg.jitter_ms, self.cfg.mtu_bytes,
                                          self.cfg.host_overhead_ms)

        return {d: Link(params_at(d), np.random.default_rng([self.cfg.seed, i, conn_index]), self.t0_s,
                        self.trace.outages) for i, d in enumerate(DIRECTIONS)}

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was shut down by stop()
            self._open(client)

    def _open(self, client: socket.socket) -> None:
        """Connect a new client to the target and start relaying; when that fails, hold the client in a thread of its
        own for up to ``target_wait_s`` (bounded by MAX_HELD), else drop it."""
        try:
            server = socket.create_connection((self.cfg.target_host, self.cfg.target_port), CONNECT_TIMEOUT_S)
        except OSError:
            with self._lock:
                hold = self.cfg.target_wait_s > 0 and self._held < MAX_HELD
                self._held += hold
            if not hold:
                client.close()
                return
            threading.Thread(target=self._hold, args=(client,), name="linkemu-hold", daemon=True).start()
            return
        self._relay(client, server)

    def _hold(self, client: socket.socket) -> None:
        """Retry the target for a held client until it answers, ``target_wait_s`` passes or the relay stops."""
        deadline, server = time.monotonic() + self.cfg.target_wait_s, None
        try:
            while server is None and time.monotonic() < deadline and not self._stop.wait(REDIAL_S):
                try:
                    server = socket.create_connection((self.cfg.target_host, self.cfg.target_port), CONNECT_TIMEOUT_S)
                except OSError:
                    pass
        finally:
            with self._lock:
                self._held -= 1
        if server is None:
            client.close()
            return
        self._relay(client, server)

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        """Start relaying between a client and its connection to the target."""
        server.settimeout(None)
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._n_opened += 1
            n = self._n_opened
        links = None if self.fast_path else self._links or self._make_links(n)
        conn = Connection(f"linkemu-c{n}", client, server, links, self._count, self._closed)
        with self._lock:
            if self._stop.is_set():
                client.close()
                server.close()
                return
            self._conns.add(conn)
        conn.start()

    def _count(self, d: Direction, nbytes: int) -> None:
        with self._lock:
            self._bytes[d] += nbytes

    def _closed(self, conn: Connection) -> None:
        with self._lock:
            self._conns.discard(conn)


def _resolve_trace(cfg: LinkConfig) -> CSITrace:
    if isinstance(cfg.trace, CSITrace):
        trace = cfg.trace
    elif cfg.trace is not None:
        trace = load_trace(cfg.trace, loop=cfg.trace_loop)
    else:
        trace = CSITrace.constant(cfg.csi or CSI.ideal())
    return trace.with_outages(parse_outages(cfg.outages))


@dataclass
class EmulatorConfig:
    """The emulator CLI's settings: LinkConfig with HOST:PORT strings and one fixed CSI's numbers (or a trace)."""

    forward: str = ""  # HOST:PORT of the server (edge) to forward to; required
    listen: str = "127.0.0.1:0"  # HOST:PORT to listen on (port 0: any free port)
    rate_mbps: float = field(default=_IDEAL.rate_up_mbps, metadata={
        "above": 0})  # rate of both directions, Mbit/s (inf: unlimited)
    rate_up_mbps: float | None = field(default=None, metadata={"above": 0})  # uplink rate, Mbit/s (None: --rate-mbps)
    rate_down_mbps: float | None = field(default=None, metadata={
        "above": 0})  # downlink rate, Mbit/s (None: --rate-mbps)
    rtt_ms: float = field(default=_IDEAL.rtt_ms, metadata={"min": 0})  # round-trip propagation delay, ms
    per: float = field(default=_IDEAL.per_up, metadata={
        "min": 0, "below": 1})  # segment loss probability of each direction, [0, 1)
    jitter_ms: float = field(default=LinkConfig.jitter_ms, metadata={"min": 0})  # std of the one-way delay jitter, ms
    mtu_bytes: int = field(default=LinkConfig.mtu_bytes, metadata={
        "min": 1})  # segment size for losses and retransmissions, bytes
    host_overhead_ms: float = field(default=LinkConfig.host_overhead_ms, metadata={
        "min": 0})  # hosts' one-way cost taken out of each delay, ms
    seed: int = LinkConfig.seed  # seed of the loss and jitter draws
    csi_trace: str | None = None  # CSV CSI trace replayed from the start (replaces rate, RTT and PER)
    trace_loop: bool = LinkConfig.trace_loop  # loop the CSI trace
    per_connection: bool = not LinkConfig.shared_link  # one link per connection instead of one shared by all
    outages: str = field(default=LinkConfig.outages, metadata={
        "example": "10:5"})  # outage periods START_S:DURATION_S[,...] from the start (nothing passes), s

    def link_config(self) -> LinkConfig:
        """The LinkConfig these settings describe (ValueError on a bad address or CSI)."""
        (listen_host, listen_port), (host, port) = parse_hostport(self.listen), parse_hostport(self.forward)
        csi = None
        if self.csi_trace is None:
            up = self.rate_up_mbps if self.rate_up_mbps is not None else self.rate_mbps
            down = self.rate_down_mbps if self.rate_down_mbps is not None else self.rate_mbps
            csi = CSI(up, down, self.rtt_ms, self.per, self.per)
        return LinkConfig(target_port=port, target_host=host, listen_host=listen_host, listen_port=listen_port,
                          csi=csi, trace=self.csi_trace, trace_loop=self.trace_loop, jitter_ms=self.jitter_ms,
                          mtu_bytes=self.mtu_bytes, seed=self.seed, shared_link=not self.per_connection,
                          host_overhead_ms=self.host_overhead_ms, outages=self.outages)


def parse_hostport(text: str) -> tuple[str, int]:
    """'127.0.0.1:5601' -> ('127.0.0.1', 5601)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def parse_args(argv: list[str] | None = None) -> LinkConfig:
    ap = config.add_flags(argparse.ArgumentParser(prog="python -m channel.emulator",
                                                  description=__doc__.splitlines()[0]), EmulatorConfig)
    cfg = config.parse(EmulatorConfig, argv, ap)
    if not cfg.forward:
        ap.error("--forward HOST:PORT is required")
    try:
        return cfg.link_config()
    except ValueError as e:
        ap.error(str(e))


def describe(cfg: LinkConfig) -> dict[str, object]:
    """The config as logged: a CSITrace object shows as its row count."""
    shown: dict[str, object] = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    if isinstance(cfg.trace, CSITrace):
        shown["trace"] = f"<CSITrace, {len(cfg.trace)} rows>"
    return shown


def run(cfg: LinkConfig) -> ByteCounts:
    """Relay until SIGINT or SIGTERM; returns the byte totals."""
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    with LinkEmulator(cfg) as emu:
        print(f"linkemu: {emu.endpoint} -> {cfg.target_host}:{cfg.target_port} t0_epoch_s={emu.t0_epoch_s!r} "
              f"config={describe(cfg)}", flush=True)
        while not done.wait(0.5):
            pass
        counts = emu.totals()
    print(f"linkemu: bytes up={counts.up} down={counts.down}", flush=True)
    return counts


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()

"""Tests for the link timing model (pure) and the loopback TCP relay (end to end, with an echo server)."""
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zmq

from channel.csi import CSI
from channel.csitrace import CSITrace
from channel.emulator import ByteCounts, LinkConfig, LinkEmulator, parse_args
from channel.linkmodel import DirParams, Link, dir_params, schedule

# --- pure timing model ---------------------------------------------------------------------------


@pytest.mark.parametrize("now_s,nbytes,rate_mbps,delay_ms,free_at_s,done_s,deliver_s", [
    (1.0, 1250, 1.0, 0.0, 0.0, 1.01, 1.01),  # rate only: 10 kbit at 1 Mbit/s
    (1.0, 1250, 1.0, 20.0, 0.0, 1.01, 1.03),  # plus 20 ms propagation
    (1.0, 1250, 1.0, 0.0, 2.0, 2.01, 2.01),  # FIFO: waits for the busy link
    (1.0, 4000, 8.0, 5.0, 0.5, 1.004, 1.009),  # link already free
    (1.0, 0, 8.0, 5.0, 0.0, 1.0, 1.005),  # end of stream: no bytes, still propagates
    (1.0, 10**6, math.inf, 0.0, 0.0, 1.0, 1.0),  # unlimited rate
])
def test_schedule_rate_queue_and_propagation(now_s, nbytes, rate_mbps, delay_ms, free_at_s, done_s, deliver_s):
    slot = schedule(now_s, nbytes, DirParams(rate_mbps, 0.0, delay_ms), free_at_s, np.random.default_rng(0))
    assert slot.serialize_done_s == pytest.approx(done_s)
    assert slot.deliver_at_s == pytest.approx(deliver_s)


@pytest.mark.parametrize("delay_ms,overhead_ms,deliver_s", [
    (20.0, 1.5, 1.0285),  # 10 ms serialization + (20 - 1.5) ms
    (1.0, 1.5, 1.01),  # never below zero delay: serialization is kept whole
    (20.0, 0.0, 1.03),
])
def test_host_overhead_comes_out_of_the_delay_only(delay_ms, overhead_ms, deliver_s):
    p = DirParams(1.0, 0.0, delay_ms, overhead_ms=overhead_ms)
    slot = schedule(1.0, 1250, p, 0.0, np.random.default_rng(0))
    assert slot.serialize_done_s == pytest.approx(1.01)
    assert slot.deliver_at_s == pytest.approx(deliver_s)


def test_dir_params_carries_the_host_overhead():
    p = dir_params(CSI.symmetric(20.0, 10.0), "down", overhead_ms=0.7)
    assert (p.delay_ms, p.overhead_ms) == (5.0, 0.7)


def test_schedule_without_loss_is_exactly_s_over_r():
    p = DirParams(rate_mbps=10.0, mtu_bytes=1000)
    slot = schedule(0.0, 4500, p, 0.0, np.random.default_rng(0))
    assert slot.serialize_done_s == 4500 * 8 / 10e6 and slot.n_tx == 5


def test_schedule_retransmits_each_lost_segment():
    nbytes, mtu, per, rate = 4500, 1000, 0.4, 10.0
    slot = schedule(0.0, nbytes, DirParams(rate, per, 0.0, 0.0, mtu), 0.0, np.random.default_rng(7))
    rng = np.random.default_rng(7)  # replay the same draws: 4 full segments, then the 500-byte rest
    tx_full = rng.geometric(1 - per, size=4).sum()
    tx_rest = rng.geometric(1 - per, size=1).sum()
    assert slot.n_tx == tx_full + tx_rest > 5
    assert slot.serialize_done_s == pytest.approx((tx_full * mtu + tx_rest * 500) * 8 / (rate * 1e6))


def test_mean_serialization_time_matches_spec_model():
    csi = CSI(rate_up_mbps=8.0, rate_down_mbps=1.0, rtt_ms=0.0, per_up=0.2)
    link = Link(lambda t: dir_params(csi, "up"), np.random.default_rng(1))
    nbytes, n = 15_000, 2000
    for _ in range(n):
        slot = link.admit(0.0, nbytes)  # back to back: total busy time = sum of serialization times
    assert slot.serialize_done_s / n == pytest.approx(csi.uplink_s(nbytes), rel=0.02)


def test_jitter_never_reorders_or_goes_negative():
    link = Link(lambda t: DirParams(100.0, 0.0, 1.0, jitter_ms=10.0), np.random.default_rng(3))
    slots = [link.admit(i * 1e-4, 100) for i in range(500)]
    delivers = [s.deliver_at_s for s in slots]
    assert delivers == sorted(delivers)
    assert all(s.deliver_at_s >= s.serialize_done_s for s in slots)
    assert len(set(delivers)) > 10  # jitter did something


def test_link_looks_up_params_when_serialization_starts():
    trace = CSITrace((0.0, 1.0), (CSI.symmetric(1.0, 0), CSI.symmetric(10.0, 0)))
    link = Link(lambda t: dir_params(trace.at(t), "up"), np.random.default_rng(0), t0_s=100.0)
    assert link.admit(100.5, 1250).serialize_done_s == pytest.approx(100.51)  # 1 Mbit/s
    link.free_at_s = 101.2  # busy past the switch at t = 1 s
    assert link.admit(100.9, 1250).serialize_done_s == pytest.approx(101.201)  # 10 Mbit/s


def test_link_is_deterministic_for_a_seed():
    def run():
        link = Link(lambda t: DirParams(5.0, 0.3, 2.0, 1.0), np.random.default_rng(42))
        return [link.admit(i * 1e-3, 3000) for i in range(50)]
    assert run() == run()


# --- relay end to end ----------------------------------------------------------------------------


@pytest.fixture
def echo_port():
    """A threaded echo server on loopback that echoes until EOF, then half-closes."""
    ls = socket.create_server(("127.0.0.1", 0))
    threads = []

    def serve(c):
        with c:
            while data := c.recv(65536):
                c.sendall(data)
            c.shutdown(socket.SHUT_WR)

    def accept_loop():
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            threads.append(threading.Thread(target=serve, args=(c,), daemon=True))
            threads[-1].start()

    acceptor = threading.Thread(target=accept_loop, daemon=True)
    acceptor.start()
    yield ls.getsockname()[1]
    ls.shutdown(socket.SHUT_RDWR)
    ls.close()
    for t in [acceptor, *threads]:
        t.join(2)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def echo_all(port, payload):
    """Send payload, half-close, and read the echo until EOF."""
    with connect(port) as s:
        writer = threading.Thread(target=lambda: (s.sendall(payload), s.shutdown(socket.SHUT_WR)))
        writer.start()
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
        writer.join()
    return b"".join(chunks)


def recv_exactly(s, n):
    buf = bytearray()
    while len(buf) < n:
        buf += s.recv(n - len(buf))
    return bytes(buf)


def linkemu_threads():
    return [t for t in threading.enumerate() if t.name.startswith("linkemu")]


LOSSY = CSI.symmetric(rate_mbps=2000.0, rtt_ms=2.0, per=0.05)


@pytest.mark.parametrize("csi,jitter_ms", [(None, 0.0), (LOSSY, 1.0)], ids=["fast-path", "emulated"])
def test_bytes_arrive_intact_in_order_and_are_counted(echo_port, csi, jitter_ms):
    payload = np.random.default_rng(0).bytes(3_000_000)
    with LinkEmulator(LinkConfig(target_port=echo_port, csi=csi, jitter_ms=jitter_ms)) as emu:
        assert emu.fast_path == (csi is None)
        assert echo_all(emu.port, payload) == payload
        assert emu.totals() == ByteCounts(len(payload), len(payload))


@pytest.mark.parametrize("shared", [True, False])
def test_concurrent_connections(echo_port, shared):
    payloads = [os.urandom(200_000), os.urandom(300_000)]
    results = [b""] * 2
    cfg = LinkConfig(target_port=echo_port, csi=CSI.symmetric(500.0, 4.0, 0.01), shared_link=shared)
    with LinkEmulator(cfg) as emu:
        def client(i):
            results[i] = echo_all(emu.port, payloads[i])
        threads = [threading.Thread(target=client, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert emu.totals().up == emu.totals().down == 500_000
    assert results == payloads


@pytest.mark.parametrize("csi,nbytes,min_s", [
    (CSI.symmetric(1000.0, 40.0), 10, 0.040),  # one RTT
    (CSI.symmetric(8.0, 0.0), 50_000, 0.100),  # 50 kB at 8 Mbit/s: 50 ms up, then 50 ms down
])
def test_round_trip_is_delayed_at_least_by_the_model(echo_port, csi, nbytes, min_s):
    with LinkEmulator(LinkConfig(target_port=echo_port, csi=csi)) as emu, connect(emu.port) as s:
        s.sendall(b"w")  # warm up: afterwards the relay is connected to the server
        recv_exactly(s, 1)
        t0 = time.perf_counter()
        s.sendall(b"x" * nbytes)
        recv_exactly(s, nbytes)
        assert time.perf_counter() - t0 >= min_s


def test_take_counts_gives_bytes_per_round(echo_port):
    with LinkEmulator(LinkConfig(target_port=echo_port, csi=CSI.symmetric(100.0, 1.0))) as emu, connect(emu.port) as s:
        for n in (100, 5000, 7):
            s.sendall(b"a" * n)
            recv_exactly(s, n)
            assert emu.take_counts() == ByteCounts(n, n)
        assert emu.totals() == ByteCounts(5107, 5107)


@pytest.mark.parametrize("csi", [None, CSI.symmetric(10.0, 5.0)], ids=["fast-path", "emulated"])
def test_stop_joins_every_thread_with_open_connections(echo_port, csi):
    emu = LinkEmulator(LinkConfig(target_port=echo_port, csi=csi)).start()
    clients = [connect(emu.port) for _ in range(3)]
    for c in clients:
        c.sendall(b"hi")
        recv_exactly(c, 2)
    assert emu.n_connections == 3 and linkemu_threads()
    emu.stop()
    assert linkemu_threads() == [] and emu.n_connections == 0
    for c in clients:
        assert c.recv(10) == b""  # the relay closed its side
        c.close()


def test_unreachable_target_drops_the_client():
    with socket.create_server(("127.0.0.1", 0)) as tmp:
        dead_port = tmp.getsockname()[1]
    with LinkEmulator(LinkConfig(target_port=dead_port)) as emu, connect(emu.port) as s:
        try:
            assert s.recv(10) == b""
        except ConnectionResetError:
            pass  # also a clean drop


def test_trace_replay_and_csi_query(echo_port):
    trace = CSITrace((0.0, 3600.0), (CSI.symmetric(50.0, 2.0), CSI.symmetric(1.0, 100.0)))
    with LinkEmulator(LinkConfig(target_port=echo_port, trace=trace)) as emu:
        assert emu.csi() == trace.csis[0] and not emu.fast_path
        assert echo_all(emu.port, b"trace") == b"trace"
    assert LinkEmulator(LinkConfig(target_port=1)).csi() == CSI.ideal()


def test_zmq_dealers_through_shared_link():
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.linger = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")
    emu = LinkEmulator(LinkConfig(target_port=port, csi=CSI.symmetric(100.0, 2.0))).start()
    dealers = [ctx.socket(zmq.DEALER) for _ in range(2)]
    try:
        for i, d in enumerate(dealers):
            d.linger = 0
            d.connect(emu.endpoint)
            d.send(b"ue%d" % i)
        for _ in dealers:
            assert router.poll(5000)
            ident, msg = router.recv_multipart()
            router.send_multipart([ident, msg + b"-ok"])
        assert sorted(d.recv() for d in dealers if d.poll(5000)) == [b"ue0-ok", b"ue1-ok"]
    finally:
        for s in [*dealers, router]:
            s.close()
        ctx.term()
        emu.stop()


def test_cli_config_and_run(echo_port, tmp_path):
    cfg = parse_args(["--forward", "127.0.0.1:5555", "--listen", "127.0.0.1:5601", "--rate-mbps", "20",
                      "--rate-down-mbps", "50", "--rtt-ms", "20", "--per", "0.01", "--per-connection"])
    assert (cfg.target_port, cfg.listen_port, cfg.shared_link) == (5555, 5601, False)
    assert cfg.csi == CSI(20.0, 50.0, 20.0, 0.01, 0.01)
    assert cfg.host_overhead_ms == 0.0
    assert parse_args(["--forward", "127.0.0.1:1", "--host-overhead-ms", "0.8"]).host_overhead_ms == 0.8
    with pytest.raises(ValueError, match="host_overhead_ms"):
        LinkConfig(target_port=1, host_overhead_ms=-1.0)
    with pytest.raises(SystemExit):
        parse_args(["--forward", "nohost"])
    cmd = [sys.executable, "-m", "channel.emulator", "--forward", f"127.0.0.1:{echo_port}", "--rtt-ms", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        port = int(proc.stdout.readline().split()[1].rsplit(":", 1)[1])
        assert echo_all(port, b"hello") == b"hello"
        proc.send_signal(signal.SIGTERM)
        assert "bytes up=5 down=5" in proc.communicate(timeout=10)[0]
    finally:
        proc.kill()

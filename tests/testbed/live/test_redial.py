"""Regression (found by the chaos harness, scripts/bench/chaos.py seed 35): behind the link emulator an edge that is
restarting hangs up mid-handshake; a UE's redial must leave that to its retry window instead of dying with "the edge
refused the connection", while its first dial still fails fast (a missing CURVE key looks the same)."""
from __future__ import annotations

import socket

import pytest
import zmq

from channel.emulator import LinkConfig, LinkEmulator
from protocols.ue_side import HandshakeError
from testbed.live.common.auth import secure_connect

SEED = 35  # the bench_chaos seed whose run showed it


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_redial_to_an_edge_restarting_behind_the_emulator_is_not_a_refusal() -> None:
    ctx = zmq.Context()
    try:
        with LinkEmulator(LinkConfig(target_port=closed_port(), seed=SEED)) as emu:  # the edge is down
            first = ctx.socket(zmq.DEALER)
            with pytest.raises(HandshakeError, match="hung up mid-handshake"):
                secure_connect(first, emu.endpoint, None, 3.0)  # first dial: fails fast, as before
            again = ctx.socket(zmq.DEALER)
            secure_connect(again, emu.endpoint, None, 3.0, hangup_ok=True)  # a redial: returns, libzmq redials
            again.close(0)
    finally:
        ctx.term()


def test_an_emulator_that_holds_clients_lets_a_first_dial_wait_for_the_edge() -> None:
    """With target_wait_s (the chaos harness's emulator), a UE's first dial while the edge is down is held, as a real
    host's closed port is redialled, and goes through once the edge is back; the same found by seed 35: every UE's
    first dial died while the edge restarted, and the restarted UEs met the next restart."""
    port, ctx = closed_port(), zmq.Context()
    try:
        with LinkEmulator(LinkConfig(target_port=port, seed=SEED, target_wait_s=30.0)) as emu:
            ue = ctx.socket(zmq.DEALER)
            secure_connect(ue, emu.endpoint, None, 1.0)  # the edge is down: no refusal
            edge = ctx.socket(zmq.ROUTER)
            edge.bind(f"tcp://127.0.0.1:{port}")  # the edge comes back
            ue.send(b"hello")
            assert edge.poll(10_000) and edge.recv_multipart()[-1] == b"hello"
            for s in (ue, edge):
                s.close(0)
    finally:
        ctx.term()

"""CurveZMQ: testbed.keys' layout; the right key runs (testbed.run --auth), a wrong or missing key is refused fast
and clearly on the UE and logged on the edge; sessions are bound to the key that opened them; the open-bind warning
and protected mode (refused without --auth beyond loopback unless --insecure)."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import zmq

from protocols.ue_side import UEParams, UESession
from protocols.wire import Limits, MsgType, decode, encode, make
from testbed import keys
from testbed.live.common.auth import open_bind_refusal, open_bind_warning, write_keys
from testbed.live.edge.edgeserver import EdgeServer
from testbed.live.edge.serve import main as serve_main
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.procs import Child
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession
from wisv.decoding.speculative import RejectAll

RECV_TIMEOUT_S = 60  # the refused UE must fail well before this


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("keys") / "keys"
    keys.main([str(d)])
    return d


@pytest.fixture(scope="module")
def edge(pair_dirs, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``testbed.serve --auth`` (tiny target, --head none) on a free loopback port; stopped by its PID."""
    log = tmp_path_factory.mktemp("edge") / "edge.log"
    child = Child("edge", ["testbed.serve", "--bind", "tcp://127.0.0.1:0", "--target", str(pair_dirs.target),
                           "--head", "none", "--auth", str(key_dir)], log)
    try:
        yield child.wait_for("READY", 120), log
    finally:
        child.stop()


def test_keys_writes_both_pairs_and_lists_the_client(key_dir: Path, capsys) -> None:
    names = {p.relative_to(key_dir).as_posix() for p in key_dir.rglob("*") if p.is_file()}
    assert names == {"edge.key", "edge.key_secret", "client.key", "client.key_secret", "clients/client.key"}
    assert (key_dir / "clients" / "client.key").read_text() == (key_dir / "client.key").read_text()
    assert "secret-key" not in (key_dir / "edge.key").read_text()  # public files hold no secret
    assert all((key_dir / f).stat().st_mode & 0o077 == 0 for f in ("edge.key_secret", "client.key_secret"))
    with pytest.raises(SystemExit) as e:  # existing keys are kept unless --overwrite
        keys.main([str(key_dir)])
    assert e.value.code == 2 and "--overwrite" in capsys.readouterr().err


def ue(endpoint: str, drafter: Path, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [sys.executable, "-m", "testbed.ue", "--connect", endpoint, "--drafter", str(drafter), "--out", str(out),
           "--prompts", "1", "--draft-len", "4", "--max-new-tokens", "8", "--probe-bytes", "0",
           "--recv-timeout-s", str(RECV_TIMEOUT_S), *extra]
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return res, time.monotonic() - t0


def test_the_right_key_runs(pair_dirs, key_dir: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "testbed.run", "--auth", str(key_dir), "--prompts", "2", "--protocol", "sh",
           "--draft-len", "4", "--max-new-tokens", "8", "--drafter", str(pair_dirs.drafter), "--target",
           str(pair_dirs.target), "--head", "none", "--out", str(tmp_path / "r")]  # through the link emulator
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    edge_log = (tmp_path / "r" / "edge.log").read_text()
    assert "CURVE on: 1 client key(s)" in edge_log and "open session" in edge_log and "refused" not in edge_log


def test_a_wrong_key_is_refused_fast_and_logged(edge, pair_dirs, key_dir: Path, tmp_path: Path) -> None:
    endpoint, log = edge
    stranger = tmp_path / "stranger"
    write_keys(stranger)  # a key pair the edge does not list, with the edge's right public key
    (stranger / "edge.key").write_text((key_dir / "edge.key").read_text())
    res, took = ue(endpoint, pair_dirs.drafter, tmp_path / "o", "--auth", str(stranger))
    assert res.returncode == 2 and took < RECV_TIMEOUT_S, res.stderr[-2000:]
    assert "the edge refused the connection: CURVE key refused" in res.stderr
    assert "--auth DIR/clients must list" in res.stderr
    key = (stranger / "client.key").read_text().split('public-key = "')[1].split('"')[0]
    assert _logged(log, f"refused CURVE client key {key}")


def test_a_missing_key_is_refused_fast_and_logged(edge, pair_dirs, tmp_path: Path) -> None:
    endpoint, log = edge
    res, took = ue(endpoint, pair_dirs.drafter, tmp_path / "o")
    assert res.returncode == 2 and took < RECV_TIMEOUT_S, res.stderr[-2000:]
    assert "the edge refused the connection" in res.stderr and "may require CURVE keys" in res.stderr
    # whichever end notices first: the edge sees the mismatch, or the UE's hang-up mid-handshake
    assert _logged(log, "security mechanism mismatch") or _logged(log, "may use no CURVE keys", 0.1)


def _logged(log: Path, text: str, wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------- no sockets


class Keyed(zmq.Frame):
    """A frame as received under CURVE: it carries its client's key as the ZAP User-Id."""

    user: str | None = None

    def get(self, option):
        return self.user if option == "User-Id" else super().get(option)


def keyed(frames: list[bytes], user: str) -> list[zmq.Frame]:
    out = [Keyed(f) for f in frames]
    for f in out:
        f.user = user
    return out


def test_a_session_is_bound_to_the_key_that_opened_it_and_resumed_by_key_and_id() -> None:
    torch.set_num_threads(1)
    drafter, target = make_pair("llama", 32, 2, 4, 2, vocab=61, eos=60)
    limits = Limits(vocab_size=61, max_draft_len=16, max_positions=16)
    server = EdgeServer(ServeConfig(max_draft_len=16), target, RejectAll())
    params = UEParams(protocol="greedy", draft_len=4, max_new_tokens=8)
    sess = UESession("ue-0", DraftSession(drafter, [3, 4, 5]), params, 60)
    ask = lambda user, msg, peer=b"ue": decode(server.handle(peer, keyed(encode(msg), user)), limits)  # noqa: E731
    ok = ask("KEY-A", sess.open_message())
    assert ok.type == MsgType.OPEN_OK
    draft = make(MsgType.DRAFT, "ue-0", {"tokens": np.array([1, 2], np.int32)}, round=0, t_draft_s=0.0,
                 protocol="greedy", token=ok.header["token"])
    thief = ask("KEY-B", draft)  # the token (sniffed), another authenticated key
    assert (thief.type, thief.header["code"]) == (MsgType.ERROR, "forbidden") and "another key" in thief.header["text"]
    assert ask("KEY-A", draft, b"ue-redialed").type == MsgType.VERDICT  # a new identity: the token finds the session
    again = ask("KEY-A", sess.open_message(), b"ue-third")  # resumed by (key, session id): replaces, no second seat
    assert again.type == MsgType.OPEN_OK and len(server.sessions) == 1 and again.header["token"] != ok.header["token"]
    assert server.drop_peer(b"ue") == 0 and server.drop_peer(b"ue-third") == 1 and not server.sessions


@pytest.mark.parametrize("endpoint, auth, warned", [
    ("tcp://0.0.0.0:5555", None, True), ("tcp://10.1.2.3:5555", None, True), ("tcp://127.0.0.1:5555", None, False),
    ("tcp://[::1]:5555", None, False), ("tcp://localhost:5555", None, False), ("tcp://0.0.0.0:5555", "keys", False),
    ("ipc:///tmp/edge", None, False)])
def test_an_open_bind_without_auth_is_warned(endpoint: str, auth: str | None, warned: bool) -> None:
    w = open_bind_warning(endpoint, auth)
    assert (w is not None) == warned and (not warned or "--auth" in w)


@pytest.mark.parametrize("endpoint, auth, insecure, refused", [
    ("tcp://0.0.0.0:5555", None, False, True), ("tcp://10.1.2.3:5555", None, False, True),
    ("tcp://edge.lab:5555", None, False, True), ("tcp://0.0.0.0:5555", None, True, False),
    ("tcp://0.0.0.0:5555", "keys", False, False), ("tcp://127.0.0.1:5555", None, False, False),
    ("tcp://[::1]:5555", None, False, False), ("tcp://localhost:5555", None, False, False)])
def test_protected_mode_refuses_an_open_bind_without_auth(endpoint: str, auth: str | None, insecure: bool,
                                                          refused: bool) -> None:
    why = open_bind_refusal(endpoint, auth, insecure)
    assert (why is not None) == refused and (not refused or ("--auth" in why and "--insecure" in why))


def test_serve_beyond_loopback_without_auth_exits_2_with_one_line_unless_insecure(capsys) -> None:
    """Nothing is served: the refusal comes before the target loads; with --insecure the next check (the port,
    held here on loopback) is what stops it, so the protected mode let it through."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        bind = f"tcp://0.0.0.0:{held.getsockname()[1]}"
        for extra, expected in (([], f"--bind {bind} is reachable from other hosts and --auth is not given"),
                                (["--insecure"], f"--bind {bind}: cannot bind")):
            with pytest.raises(SystemExit) as e:
                serve_main(["--bind", bind, "--head", "none", *extra])
            err = capsys.readouterr().err
            assert e.value.code == 2 and err.count("\n") == 1
            assert err.startswith(f"python -m testbed.serve: error: {expected}"), err

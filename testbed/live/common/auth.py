"""CurveZMQ: the key directory of ``python -m testbed.keys``, the edge's CURVE server with a ZAP handler accepting
only listed client keys, the UE's CURVE client, and what a refused handshake means on either end.

Key directory (``--auth DIR``)::

    DIR/edge.key          the edge's public key (a UE needs it)
    DIR/edge.key_secret   the edge's key pair (only the edge needs it)
    DIR/client.key        the UE's public key
    DIR/client.key_secret the UE's key pair (only the UE needs it)
    DIR/clients/*.key     the public keys the edge accepts (testbed.keys puts client.key there)

Each authenticated message carries its client's public key (z85) as the ZAP User-Id; sessions are bound to it.
"""
from __future__ import annotations

import ipaddress
import logging
import shutil
import time
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message

from protocols.ue_side import HandshakeError

EDGE, CLIENT, CLIENTS = "edge", "client", "clients"
HANDSHAKE_WAIT_S = 5.0  # a UE waits this long at most for its first handshake's outcome, s
FAILED = zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
log = logging.getLogger("testbed.auth")


def write_keys(d: str | Path, overwrite: bool = False) -> list[Path]:
    """An edge and a client key pair in ``d`` (layout above), the client's public key listed in ``d/clients``."""
    d = Path(d)
    if (d / f"{EDGE}.key_secret").exists() and not overwrite:
        raise FileExistsError(f"{d} already holds keys (--overwrite replaces them; UEs and edges using them must "
                              "then get the new ones)")
    (d / CLIENTS).mkdir(parents=True, exist_ok=True)
    written = [Path(p) for name in (EDGE, CLIENT) for p in zmq.auth.create_certificates(d, name)]
    for p in written:
        if p.name.endswith(".key_secret"):
            p.chmod(0o600)  # secret keys: owner only
    written.append(Path(shutil.copy(d / f"{CLIENT}.key", d / CLIENTS / f"{CLIENT}.key")))
    return written


def _load(path: Path, secret: bool) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise ValueError(f"--auth: no {path} (make the keys with `python -m testbed.keys DIR`)")
    public, sec = zmq.auth.load_certificate(path)
    if secret and sec is None:
        raise ValueError(f"--auth: {path} holds no secret key")
    return public, sec


class _Listed:
    """ZAP credentials provider: accept the listed client keys; log every refusal."""

    def __init__(self, keys_dir: Path):
        self.keys_dir = keys_dir
        self.allowed = set(zmq.auth.load_certificates(keys_dir))  # z85 public keys

    def callback(self, domain: str, key: bytes) -> bool:
        if key in self.allowed:
            return True
        log.warning("refused CURVE client key %s: not listed in %s", key.decode(errors="replace"), self.keys_dir)
        return False


def serve_curve(ctx: zmq.Context, sock: zmq.Socket, d: str | Path) -> ThreadAuthenticator:
    """Make ``sock`` (before it binds) a CURVE server with the edge's key pair; start the ZAP handler (stop it)."""
    public, secret = _load(Path(d) / f"{EDGE}.key_secret", secret=True)
    listed = _Listed(Path(d) / CLIENTS)
    if not listed.allowed:
        raise ValueError(f"--auth: no client public keys (*.key) in {listed.keys_dir}")
    auth = ThreadAuthenticator(ctx, log=logging.getLogger("testbed.auth.zap"))
    auth.start()
    auth.configure_curve_callback("*", listed)
    sock.curve_secretkey, sock.curve_publickey, sock.curve_server = secret, public, True
    log.info("CURVE on: %d client key(s) accepted from %s", len(listed.allowed), listed.keys_dir)
    return auth


def client_curve(sock: zmq.Socket, d: str | Path) -> None:
    """Make ``sock`` (before it connects) a CURVE client with the UE's key pair and the edge's public key."""
    public, secret = _load(Path(d) / f"{CLIENT}.key_secret", secret=True)
    sock.curve_secretkey, sock.curve_publickey = secret, public
    sock.curve_serverkey = _load(Path(d) / f"{EDGE}.key", secret=False)[0]


def user_id(frames: list) -> str | None:
    """The ZAP User-Id (the client's z85 public key under CURVE) of a received message; None without one."""
    first = frames[0] if frames else None
    if not isinstance(first, zmq.Frame):
        return None
    try:
        return first.get("User-Id") or None
    except zmq.ZMQError:
        return None


def peer_address(frames: list) -> str | None:
    """The address a received message's connection comes from (ZMQ ``Peer-Address``); None when unknown."""
    first = frames[0] if frames else None
    if not isinstance(first, zmq.Frame):
        return None
    try:
        return first.get("Peer-Address") or None
    except zmq.ZMQError:
        return None


def handshake_failure(event: int, value: int) -> str | None:
    """What a monitor event says about a failed handshake (None: not a failure)."""
    if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return f"CURVE key refused by the edge's ZAP handler (status {value})"
    if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
        if value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
            return "security mechanism mismatch (one end uses CURVE keys, --auth, the other none)"
        return f"handshake protocol error {value:#x}"
    if event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        return (f"handshake failed (errno {value}: the peer hung up mid-handshake; it may use no CURVE keys, --auth, "
                "or other ones)")
    return None


def secure_connect(sock: zmq.Socket, endpoint: str, d: str | None, wait_s: float = HANDSHAKE_WAIT_S,
                   hangup_ok: bool = False) -> None:
    """Connect a UE's socket (a CURVE client with ``d``'s keys, when given) and wait (at most ``wait_s``) for the
    first handshake's outcome: return on success or when the edge is not there yet (a later receive times out);
    close the socket and raise HandshakeError, saying why, when the edge refused it.  ``hangup_ok``: a peer that
    hung up mid-handshake is not a refusal (a redial to an edge that answered before: behind the link emulator or a
    proxy, an edge restarting looks like that); libzmq redials, and the caller's retry window bounds it."""
    try:
        if d:
            client_curve(sock, d)
        mon = sock.get_monitor_socket(FAILED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_CONNECT_RETRIED)
        sock.connect(endpoint)
        _settle(sock, mon, bool(d), wait_s, hangup_ok)
    except BaseException:
        sock.close(0)
        raise


def _settle(sock: zmq.Socket, mon: zmq.Socket, keyed: bool, wait_s: float, hangup_ok: bool = False) -> None:
    deadline = time.monotonic() + wait_s
    try:
        while (left := deadline - time.monotonic()) > 0 and mon.poll(int(left * 1000) + 1):
            ev = recv_monitor_message(mon)
            event = int(ev["event"])
            if event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL and hangup_ok:
                return
            if event & FAILED:
                raise HandshakeError(refusal_text(handshake_failure(event, int(ev["value"])), keyed))
            if event in (zmq.EVENT_HANDSHAKE_SUCCEEDED, zmq.EVENT_CONNECT_RETRIED):
                return
    finally:
        sock.disable_monitor()
        mon.close(0)


def refusal_text(why: str, keyed: bool) -> str:
    """The UE's message for a refused handshake."""
    hint = ("the edge may refuse this UE's key (its --auth DIR/clients must list DIR/client.key) or may not use "
            "--auth, or DIR/edge.key is not the edge's" if keyed else
            "the edge may require CURVE keys: run with --auth DIR (keys from `python -m testbed.keys DIR`)")
    return f"the edge refused the connection: {why}; {hint}"


def beyond_loopback(endpoint: str) -> bool:
    """Whether a tcp:// endpoint can be reached from other hosts (0.0.0.0, a LAN address, a name other than
    localhost); ipc:// and loopback cannot."""
    if not endpoint.startswith("tcp://"):
        return False
    host = endpoint.removeprefix("tcp://").rsplit(":", 1)[0].strip("[]")
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host != "localhost"


def open_bind_warning(endpoint: str, auth: str | None) -> str | None:
    """A warning for an edge listening beyond loopback without --auth (None: nothing to warn about)."""
    if auth or not beyond_loopback(endpoint):
        return None
    return (f"warning: listening on {endpoint} without --auth: anyone who can reach this port can use the edge and "
            "its sessions (make keys with `python -m testbed.keys DIR`, then serve with --auth DIR)")


def open_bind_refusal(endpoint: str, auth: str | None, insecure: bool) -> str | None:
    """Protected mode: why an edge may not listen on ``endpoint`` (None: it may).  Beyond loopback it needs --auth
    (one raw connection can make an open edge buffer a never-ending message), unless the user chose --insecure."""
    if auth or insecure or not beyond_loopback(endpoint):
        return None
    return (f"--bind {endpoint} is reachable from other hosts and --auth is not given: serve with --auth DIR "
            "(keys: python -m testbed.keys DIR), bind tcp://127.0.0.1:PORT, or accept the risk with --insecure")

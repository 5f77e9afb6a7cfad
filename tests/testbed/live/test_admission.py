"""The pure parts of the edge's defences against hostile peers: admission quotas and timeouts, per-type part and byte
caps read one part at a time, byte budgets and buckets, the reference cache, and rate-limited warnings."""
from __future__ import annotations

import logging

import pytest
import zmq

from protocols.wire import SCHEMAS, Limits, MsgType, decode, encode, make
from testbed.live.edge.admission import Quotas, Seat, stale, why_refused
from testbed.live.edge.intake import Bucket, Budget, caps, edge_limits, recv_bounded
from testbed.live.edge.ratelog import RateLimit
from testbed.live.edge.references import ReferenceCache

Q = Quotas(max_sessions=10, per_identity=3, per_key=5, per_source=6, reserve=2)


def seat(identity: bytes = b"a", key: str | None = None, source: str | None = "10.0.0.1", t: float = 0.0) -> Seat:
    return Seat("s", identity, key, source, t)


@pytest.mark.parametrize("held, new, refused", [
    ([], seat(), None),
    ([seat()] * 3, seat(), "from this identity (max 3 each)"),
    ([seat(bytes([i]), "K") for i in range(5)], seat(b"z", "K"), "from this client key (max 5 each)"),
    ([seat(bytes([i])) for i in range(6)], seat(b"z"), "from this source address (max 6 each)"),
    ([seat(bytes([i]), source=f"10.0.0.{i}") for i in range(8)], seat(b"z", source="10.0.0.1"), "kept for peers"),
    ([seat(bytes([i]), source=f"10.0.0.{i}") for i in range(8)], seat(b"z", source="10.9.9.9"), None),  # holds none
    ([seat(bytes([i]), source=f"10.0.0.{i}") for i in range(10)], seat(b"z", source="10.9.9.9"), "(max 10)"),
    ([seat(b"a", "K1", "10.0.0.1")] * 3, seat(b"b", "K2", "10.0.0.1"), None),  # other identity and key
])
def test_admission_quotas_and_reserve(held, new, refused) -> None:
    why = why_refused(held, new, Q)
    assert (why is None) if refused is None else (why is not None and refused in why), why


def test_tokens_are_random_and_sessions_that_never_draft_go_first() -> None:
    a, b = seat(t=0.0), seat(t=0.0)
    assert a.token != b.token and len(a.token) == 32
    b.drafted = True
    seats = {a.token: a, b.token: b}
    assert stale(seats, {}, now_s=5.0, idle_s=100.0, undrafted_s=10.0) == []
    assert stale(seats, {}, now_s=11.0, idle_s=100.0, undrafted_s=10.0) == [a.token]  # never drafted
    assert stale(seats, {b.token: 50.0}, now_s=101.0, idle_s=100.0, undrafted_s=10.0) == [a.token]
    assert set(stale(seats, {b.token: 0.5}, now_s=101.0, idle_s=100.0, undrafted_s=10.0)) == {a.token, b.token}


def test_caps_follow_the_limits_and_the_edge_frame_bound() -> None:
    lim = edge_limits(vocab_size=1000, max_draft_len=8, max_probe_bytes=4096)
    assert lim.max_frame_bytes == max(4 * 8 * 16384, 8 * 8192, 4096)  # hidden [K, d] at its widest, float32
    c = caps(lim)
    assert c[MsgType.PING].parts == 2 and c[MsgType.PING].nbytes == 1 + lim.max_header_bytes + 4096
    assert c[MsgType.DRAFT].parts == 1 + len(SCHEMAS[MsgType.DRAFT].tensors) and c[MsgType.CLOSE].parts == 1


@pytest.fixture
def pair_of_sockets():
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer.connect(f"tcp://127.0.0.1:{port}")
    router.setsockopt(zmq.RCVTIMEO, 5000)
    yield router, dealer
    ctx.destroy(linger=0)


def test_recv_bounded_drops_a_message_past_its_caps_and_keeps_the_next(pair_of_sockets) -> None:
    router, dealer = pair_of_sockets
    lim = Limits(vocab_size=100, max_probe_bytes=1024)
    c = caps(lim)
    dealer.send_multipart([bytes([MsgType.PING])] + [b""] * 1000)  # a parts bomb: 1001 parts for a 2-part type
    dealer.send_multipart(encode(make(MsgType.PING, "s", None, seq=1, t_send=0.0)))
    _, frames, why = recv_bounded(router, c)
    assert frames == [] and "PING may have 2 part(s)" in why
    _, frames, why = recv_bounded(router, c)
    assert why is None and decode(frames, lim).header["seq"] == 1


def test_byte_budget_and_bucket() -> None:
    b = Budget(per_peer_bytes=100, total_bytes=150)
    assert b.take(b"p", 60) and not b.take(b"p", 50) and not b.take(b"q", 91)  # per peer, then in all
    b.give(b"p", 60)
    assert b.take(b"q", 90) and b.total == 90 and b.held == {b"q": 90}
    now = [0.0]
    bucket = Bucket(rate_bytes_s=100.0, burst_bytes=200.0, clock=lambda: now[0])
    assert bucket.spend(b"p", 150) and not bucket.spend(b"p", 100) and bucket.spend(b"x", 200)
    now[0] = 1.0  # 50 left, 100 back
    assert bucket.spend(b"p", 150) and not bucket.spend(b"p", 10)


def test_reference_cache_by_prompt_longer_budgets_extend_shorter_entries() -> None:
    cache = ReferenceCache(size=2)
    cache.put((1, 2), 4, [5, 6, 7, 8])
    assert cache.get((1, 2), 3) == [5, 6, 7] and cache.get((1, 2), 6) is None  # not computed that far
    cache.put((1, 2), 6, [5, 6, 7, 8, 9, 10])
    assert cache.get((1, 2), 6) == [5, 6, 7, 8, 9, 10]
    cache.put((1, 2), 2, [5, 6])  # a shorter one never replaces a longer entry
    assert cache.get((1, 2), 5) == [5, 6, 7, 8, 9]
    cache.put((3,), 10, [4, 9])  # ended at EOS before its budget: answers every budget
    assert cache.get((3,), 100) == [4, 9]
    cache.put((4,), 1, [1])
    assert cache.get((1, 2), 1) is None and cache.get((4,), 1) == [1]  # least recently used dropped


def test_warnings_are_rate_limited_per_template() -> None:
    now = [0.0]
    f = RateLimit(window_s=10.0, burst=2, clock=lambda: now[0])
    rec = lambda msg, level=logging.WARNING: logging.LogRecord("x", level, "", 0, msg, (), None)  # noqa: E731
    assert [f.filter(rec("refused %s")) for _ in range(4)] == [True, True, False, False]
    assert f.filter(rec("other")) and f.filter(rec("info", logging.INFO))
    now[0] = 11.0
    r = rec("refused %s")
    assert f.filter(r) and "2 similar message(s) suppressed" in r.msg

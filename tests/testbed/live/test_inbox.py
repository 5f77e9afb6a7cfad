"""The batching edge's receiver thread: messages are stamped when they arrive, even while the loop is busy, replies
reach the right peer, its queue is bounded (the excess is refused), and sockets carry the wire's bounds."""
import time

import pytest
import zmq

from protocols.wire import Limits
from testbed.live.common.sockbounds import bound_socket, max_frame
from testbed.live.edge.inbox import Inbox


def busy(peer: bytes, frames: list) -> list[bytes]:
    return [b"busy", bytes(frames[0])]


def test_arrivals_are_stamped_while_the_loop_is_busy_and_replies_go_out():
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealers = []
    for name in (b"a", b"b"):
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.IDENTITY, name)
        d.setsockopt(zmq.RCVTIMEO, 5000)
        d.connect(f"tcp://127.0.0.1:{port}")
        dealers.append(d)
    try:
        with Inbox(ctx, router, busy) as inbox:
            t_sent = time.perf_counter()
            for d in dealers:
                d.send_multipart([b"hello", d.getsockopt(zmq.IDENTITY)])
            time.sleep(0.3)  # the serving loop is busy with a batch: nobody reads the queue
            items = inbox.get(1.0, most=8)
            while len(items) < 2:
                items += inbox.get(1.0, most=8)
            assert sorted(peer for _, peer, _ in items) == [b"a", b"b"]
            assert all(t_sent <= t < t_sent + 0.2 for t, _, _ in items)  # stamped on arrival, not after the sleep
            assert [bytes(f) for f in items[0][2]] == [b"hello", items[0][1]]
            for _, peer, _ in items:
                inbox.send([peer, b"reply-to-" + peer])
            assert [d.recv_multipart() for d in dealers] == [[b"reply-to-a"], [b"reply-to-b"]]
            assert inbox.get(0, most=8) == []
    finally:
        for d in dealers:
            d.close(0)
        router.close(0)
        ctx.term()


def test_a_dead_receiver_thread_is_reported_not_waited_for():
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind_to_random_port("tcp://127.0.0.1")
    inbox = Inbox(ctx, router, busy)
    inbox._serve = lambda: (_ for _ in ()).throw(zmq.ZMQError(msg="boom"))  # the thread fails at once
    with inbox:
        inbox._thread.join(5)
        with pytest.raises(RuntimeError, match="receiver thread failed"):
            inbox.get(0.01, most=1)
    router.close(0)
    ctx.term()


def router_and_dealer(ctx: zmq.Context, limits: Limits | None = None) -> tuple[zmq.Socket, zmq.Socket]:
    router = ctx.socket(zmq.ROUTER)
    if limits is not None:
        bound_socket(router, limits, hwm_msgs=7)  # before bind: options are copied into each new connection
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.RCVTIMEO, 5000)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    return router, dealer


def test_a_full_queue_refuses_the_excess_at_once_instead_of_growing():
    ctx = zmq.Context()
    router, dealer = router_and_dealer(ctx)
    try:
        with Inbox(ctx, router, busy, max_queue=2) as inbox:
            for i in range(5):  # the serving loop reads nothing meanwhile
                dealer.send_multipart([b"m%d" % i])
            assert [dealer.recv_multipart() for _ in range(3)] == [[b"busy", b"m2"], [b"busy", b"m3"], [b"busy", b"m4"]]
            assert [bytes(f[0]) for _, _, f in inbox.get(1.0, most=8)] == [b"m0", b"m1"]
            assert inbox.refused == 3
            dealer.send_multipart([b"m5"])  # room again: queued, not refused
            assert [bytes(f[0]) for _, _, f in inbox.get(1.0, most=8)] == [b"m5"]
            assert inbox.refused == 3
    finally:
        dealer.close(0)
        router.close(0)
        ctx.term()


def test_sockets_take_the_largest_legal_frame_and_high_water_marks_from_the_limits():
    ctx = zmq.Context()
    limits = Limits(vocab_size=10, max_frame_bytes=4096, max_header_bytes=1024)
    router, dealer = router_and_dealer(ctx, limits)
    try:
        assert max_frame(limits) == 4096 and max_frame(Limits(vocab_size=10, max_frame_bytes=16)) == 1 + 2**16
        assert router.getsockopt(zmq.MAXMSGSIZE) == 4096
        assert (router.getsockopt(zmq.SNDHWM), router.getsockopt(zmq.RCVHWM)) == (7, 7)
        dealer.send_multipart([b"x" * 5000])  # a frame decode would refuse anyway: dropped with the connection, unread
        assert not router.poll(500)
        dealer.send_multipart([b"ok", b"y" * 4096])  # the largest legal frame passes (the dealer reconnects)
        assert router.poll(5000) and [len(f) for f in router.recv_multipart()[1:]] == [2, 4096]
    finally:
        dealer.close(0)
        router.close(0)
        ctx.term()

"""The batching edge's receiver thread: messages are stamped when they arrive, even while the loop is busy, and
replies reach the right peer."""
import time

import pytest
import zmq

from testbed.live.inbox import Inbox


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
        with Inbox(ctx, router) as inbox:
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
    inbox = Inbox(ctx, router)
    inbox._serve = lambda: (_ for _ in ()).throw(zmq.ZMQError(msg="boom"))  # the thread fails at once
    with inbox:
        inbox._thread.join(5)
        with pytest.raises(RuntimeError, match="receiver thread failed"):
            inbox.get(0.01, most=1)
    router.close(0)
    ctx.term()

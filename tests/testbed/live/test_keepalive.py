"""The edge's keepalive bookkeeping (testbed/live/common/keepalive.py) on a hand-driven clock; over sockets:
test_liveness.py (frozen UE), test_auth.py (with CURVE) and test_faults.py (an outage longer than the timeout)."""
from __future__ import annotations

import pytest

from testbed.live.common.keepalive import MISSED, STALL_S, Liveness, silence_s


def watched(timeout_s: float = 1.0, keepalive_ms: int = 200) -> Liveness:
    alive = Liveness(timeout_s)
    alive.expect("a", keepalive_ms)
    alive.expect("b", keepalive_ms)
    alive.expect("undeclared", 0)  # a UE that sends no keepalives is never freed for silence
    return alive


def test_a_session_silent_past_the_timeout_is_named_and_one_heard_is_not() -> None:
    alive = watched()
    t0 = alive.watches["a"].heard_s
    for k in range(1, 12):  # checks every 0.1 s, as the serving loop does
        alive.watches["b"].heard_s = t0 + k * 0.1  # b keeps alive
        assert alive.silent(t0 + k * 0.1) == (["a"] if k * 0.1 > 1.0 else [])
    alive.forget("a")
    assert alive.silent(t0 + 1.2) == [] and "undeclared" not in alive.watches


def test_the_edges_own_stall_is_not_counted_as_silence() -> None:
    alive = watched()
    t0 = alive.watches["a"].heard_s
    alive.silent(t0 + 0.1)
    assert alive.silent(t0 + 0.1 + 5.0) == []  # the edge stood still 5 s (SIGSTOP): its UEs were not heard, not silent
    after = [alive.silent(t0 + 5.1 + k * 0.1) for k in range(1, 12)]  # running again, checking every 0.1 s
    assert after[8] == [] and after[10] == ["a", "b"]  # freed once silent 1 s more on a running edge


@pytest.mark.parametrize("timeout_s, keepalive_s, bound_s", [(1.0, 0.2, 1.0), (6.0, 1.0, 6.0), (1.0, 1.0, MISSED)])
def test_the_bound_is_the_timeout_and_at_least_a_few_keepalives(timeout_s: float, keepalive_s: float,
                                                                 bound_s: float) -> None:
    assert silence_s(timeout_s, keepalive_s) == bound_s
    assert STALL_S < 1.0  # the loop checks every 0.1 s: only a real stall shifts the clocks

"""Edge batch selection as pure functions: FCFS (the SLED baseline) and WISP's SLO-aware Algorithm 1.

A pending verification request carries its deadline ``d_i`` (SPEC WISP eqs. 6 and 12:
``d_i = a_i + alpha * N_d / s_c - T_draft - T_network``), the tokens it is expected to commit ``g_i``,
its estimated verification cost alone ``v_i``, its KV memory ``m_i`` and its cached/new token counts
(for the batch-time estimate ``T_hat(B)``, wisv/serving/estimator.py).

SLO-aware selection at time ``t``: requests past their latest start time ``LST_i = d_i - v_i - delta``
are *critical* and go first in earliest-deadline order; the rest follow by decreasing utility
``U_i = g_i / v_i``.  The batch grows in that order and stops at the first request that would break the
memory budget ``sum m <= M`` or the deadline test ``t + T_hat(B) + slack <= min d_i`` over the members that can
still meet their deadline (``d_i >= t + v_i``): a request whose deadline is already lost is served but
constrains no one, otherwise one late request would shrink every batch to one under overload.  The first
request is always taken when its memory fits (a late request is served, not starved).

``lost_last`` (the edge's default) refines the order under overload: a lost request (``d_i < t + v_i``) is
critical by the paper's rule, and EDF would put it first, so that serving the hopeless ones makes the
next ones late too (EDF's domino effect).  With ``lost_last`` the order is: critical requests that can still
make it (EDF), then the rest by utility, then the lost ones (EDF).  They are still served when a batch has
room, and alone when nothing else waits.

``horizon_s`` (0 in the paper) looks ahead one batch: a request is critical when its LST falls before
``t + horizon``.  The next dispatch comes only after the batch being built, so a request whose LST falls
inside it and that waits for the next one starts late; with batches capped at ``horizon`` (``arrival_reserve_s``)
every request critical by then is taken in time.  FCFS takes requests in arrival order and stops only at the
memory budget or ``max_batch``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

BatchTime = Callable[[list[int], list[int], list[int]], float]  # (cached, new, block per request) -> seconds

SCHEDULER_CHOICES = ("fcfs", "slo")  # batch selection rules: select_fcfs, select_slo
LOST_ORDER_CHOICES = ("last", "edf")  # slo: requests past saving go last (default) or first by EDF (the paper)


@dataclass(frozen=True)
class Request:
    """One pending verification request."""

    rid: str  # request id (session + round)
    arrival_s: float  # a_i, when the edge received it
    deadline_s: float  # d_i
    g_tokens: float  # expected committed tokens (accepted + correction)
    v_s: float  # estimated verification time alone
    mem_bytes: int  # KV memory the request needs on the engine
    cached: int = 0  # cached prefix tokens (estimator feature)
    new: int = 1  # tokens to forward (estimator feature)
    block: int = 0  # of those, the positions the batched pass feeds, K + 1 (estimator feature; 0: all of new)

    @property
    def utility(self) -> float:
        """U_i = g_i / v_i."""
        return self.g_tokens / max(self.v_s, 1e-9)


def deadline_s(arrival_s: float, slo_tok_s: float, n_draft: int, t_draft_s: float, t_network_s: float,
               alpha: float = 1.0) -> float:
    """Eqs. 6 and 12: d_i = a_i + (alpha * N_d / s_c - T_draft - T_network)."""
    if slo_tok_s <= 0 or n_draft < 1:
        raise ValueError(f"need slo_tok_s > 0 and n_draft >= 1, got {slo_tok_s}, {n_draft}")
    return arrival_s + alpha * n_draft / slo_tok_s - t_draft_s - t_network_s


def latest_start_s(r: Request, delta_s: float) -> float:
    """LST_i = d_i - v_i - delta."""
    return r.deadline_s - r.v_s - delta_s


def select_fcfs(pending: Sequence[Request], mem_budget_bytes: int, max_batch: int) -> list[Request]:
    """Arrival order, up to max_batch requests within the memory budget."""
    batch, mem = [], 0
    for r in sorted(pending, key=lambda r: (r.arrival_s, r.rid)):
        if len(batch) >= max_batch or mem + r.mem_bytes > mem_budget_bytes:
            break
        batch.append(r)
        mem += r.mem_bytes
    return batch


def is_lost(r: Request, now_s: float) -> bool:
    """The request cannot meet its deadline even if verified alone right now."""
    return r.deadline_s < now_s + r.v_s


def slo_order(pending: Sequence[Request], now_s: float, delta_s: float, lost_last: bool = False,
              horizon_s: float = 0.0) -> list[Request]:
    """Critical requests (now + horizon >= LST) by deadline, then the rest by decreasing utility; with
    ``lost_last``, requests that can no longer meet their deadline go after all others, by deadline."""
    edf = lambda r: (r.deadline_s, r.rid)  # noqa: E731
    lost = sorted((r for r in pending if lost_last and is_lost(r, now_s)), key=edf)
    ids = {r.rid for r in lost}
    critical = sorted((r for r in pending if r.rid not in ids and now_s + horizon_s >= latest_start_s(r, delta_s)),
                      key=edf)
    ids |= {r.rid for r in critical}
    rest = sorted((r for r in pending if r.rid not in ids), key=lambda r: (-r.utility, r.arrival_s, r.rid))
    return critical + rest + lost


def select_slo(pending: Sequence[Request], now_s: float, mem_budget_bytes: int, batch_time: BatchTime, *,
               delta_s: float = 0.0, max_batch: int = 64, lost_last: bool = False,
               slack_s: float | None = None, max_batch_s: float = math.inf, horizon_s: float = 0.0) -> list[Request]:
    """WISP Algorithm 1: grow the batch in slo_order until memory, deadline or max_batch stops it.

    ``delta_s`` is the guard in LST; ``slack_s`` (default: ``delta_s``) the time the batch must keep before the
    earliest feasible deadline (the paper's test has none).  ``max_batch_s`` also stops it where its estimated
    time would pass this bound (see ``arrival_reserve_s``; the paper has none); ``horizon_s`` is slo_order's
    look-ahead."""
    slack_s = delta_s if slack_s is None else slack_s
    batch: list[Request] = []
    for r in slo_order(pending, now_s, delta_s, lost_last, horizon_s):
        cand = batch + [r]
        if len(cand) > max_batch or sum(x.mem_bytes for x in cand) > mem_budget_bytes:
            break
        feasible = [x.deadline_s for x in cand if not is_lost(x, now_s)]  # a lost deadline binds no one
        t_hat = batch_time([x.cached for x in cand], [x.new for x in cand], [x.block or x.new for x in cand])
        late = bool(feasible) and now_s + t_hat + slack_s > min(feasible)
        if (late or t_hat > max_batch_s) and batch:
            break
        batch = cand
    return batch


def arrival_reserve_s(tightest_budget_s: float, one_request_s: float, delta_s: float) -> float:
    """Longest batch that still leaves a request of the tightest class arriving just after dispatch as much time
    for its own batch as this one takes: half its budget less the guard, ``(budget - delta) / 2``.  ``inf`` when no
    class has a deadline; never less than one request's time.

    Algorithm 1 looks only at the requests already waiting.  Under load its utility fill grows batches to
    ``max_batch`` whenever none is critical, and a tight request that arrives during such a batch (~45 ms of a
    ~50-60 ms budget here) is lost before it is ever considered; so are the others of its class that arrive with
    it, if the time left holds one request's batch only."""
    if not math.isfinite(tightest_budget_s):
        return math.inf
    return max((tightest_budget_s - delta_s) / 2, one_request_s)

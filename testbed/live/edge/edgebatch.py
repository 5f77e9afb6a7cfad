"""Batched DRAFT verification on the edge: the scheduler picks each batch, the engine verifies it in one pass, and every
session in it finishes its round (wisv/serving/batchverify.py, wisv/serving/scheduler.py, protocols/edge_side.py).  A
request that fails (its scheduling view, or its verification: a KV budget refusal, an internal error) fails alone: after
a failed pass the batch's requests are verified again one by one (``DraftBatcher.step``).

A request's scheduling inputs: arrival = when its DRAFT reached the edge; deadline from the session's SLO
class (``slo_tok_s`` in the OPEN ``meta``; none = best effort, no deadline) with the UE-reported drafting
time and the RTT of its CSI (WISP eqs. 6/12); expected committed tokens = the session's mean so far;
verification cost from the estimator profile (testbed.profile).
"""
from __future__ import annotations

import logging
import math
import statistics
import time
import weakref
from collections import defaultdict, deque
from dataclasses import dataclass

from protocols.edge_side import EdgeSession
from wisv.decoding.sessions import Block
from wisv.serving.batchverify import request_shape
from wisv.serving.engine import VerifyEngine, VerifyRequest
from wisv.serving.estimator import EstimatorProfile, LiveFit, live_update
from wisv.serving.scheduler import (
    LOST_ORDER_CHOICES,
    SCHEDULER_CHOICES,
    Request,
    arrival_reserve_s,
    deadline_s,
    select_fcfs,
    select_slo,
)
from wisv.serving.wdt import SessionHistory, WDTPredictor, confidence_summary, stop_depth, update_session

log = logging.getLogger("testbed.serve")
BUDGET_WINDOW = 64  # recent budgets kept per SLO class for the arrival reserve
Held = tuple[bytes, EdgeSession]  # (peer, session holding a validated DRAFT)
Done = tuple[bytes, EdgeSession, Block | Exception, float, int]  # (peer, session, block or error, batch s, batch size)


@dataclass(frozen=True, kw_only=True)
class BatcherConfig:
    """How the batcher picks each batch: ServeConfig's --scheduler, --max-batch and slo flags, in seconds; checked on
    construction (a ServeConfig built in code, not from flags, meets the same bounds)."""

    scheduler: str = "fcfs"  # batch selection: fcfs | slo (WISP; needs the estimator)
    max_batch: int = 16  # most requests in one verification pass
    guard_s: float = 0.0  # slo: WISP's guard delta, requests turn critical this much earlier, s
    lost_order: str = "last"  # slo: lost requests go last, or by EDF (the paper)
    slack_s: float | None = None  # slo: time a batch keeps before its earliest feasible deadline, s (None: guard_s)
    arrival_reserve: bool = True  # slo: no batch so long that a tight request arriving meanwhile must miss

    def __post_init__(self) -> None:
        if self.scheduler not in SCHEDULER_CHOICES:
            raise ValueError(f"unknown scheduler {self.scheduler!r}; choose one of {SCHEDULER_CHOICES}")
        if self.lost_order not in LOST_ORDER_CHOICES:
            raise ValueError(f"unknown lost-request order {self.lost_order!r}; choose one of {LOST_ORDER_CHOICES}")
        if self.guard_s < 0:
            raise ValueError(f"guard time must be >= 0, got {self.guard_s}")
        if self.slack_s is not None and self.slack_s < 0:
            raise ValueError(f"batch slack must be >= 0, got {self.slack_s}")


class DraftBatcher:
    """Verifies held DRAFTs batch by batch until none is left."""

    def __init__(self, engine: VerifyEngine, cfg: BatcherConfig | None = None, *,
                 estimator: EstimatorProfile | None = None, wdt: WDTPredictor | None = None):
        cfg = cfg or BatcherConfig()
        if cfg.scheduler == "slo" and estimator is None:
            raise ValueError("the slo scheduler needs a verification-time profile (--estimator, from testbed.profile)")
        self.engine, self.scheduler, self.max_batch, self.estimator = engine, cfg.scheduler, cfg.max_batch, estimator
        self.guard_s = cfg.guard_s  # WISP's delta: requests turn critical this much earlier; batches keep this slack
        self.lost_last = cfg.lost_order == "last"  # wisv/serving/scheduler.py: lost_last
        self.slack_s = cfg.slack_s  # time a batch keeps before its earliest feasible deadline; None = guard_s
        self.live = LiveFit()  # online affine correction of the profile from the batches' measured times
        self.reserve = cfg.arrival_reserve  # slo: bound batches so that a tight request arriving meanwhile can make it
        self.budgets: dict[float, deque] = defaultdict(lambda: deque(maxlen=BUDGET_WINDOW))  # class -> d_i - a_i
        self.wdt = wdt  # g_i from the WDT predictor (wisv/serving/wdt.py); None: the session's running mean
        self.histories: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # session -> (history, its rounds,
        #                                                                         generated, K) when last seen

    def run(self, held: list[Held]) -> list[Done]:
        """Verify every held DRAFT, batch by batch (``Done`` per request)."""
        queue, done = list(held), []
        while queue:
            finished, queue = self.step(queue)
            done += finished
        return done

    def step(self, queue: list[Held]) -> tuple[list[Done], list[Held]]:
        """Verify one batch chosen from the queue; (its results, the requests still waiting).

        A request fails alone: one whose scheduling view cannot be built is answered with its error at once, and
        when a batch's pass raises (a KV budget refusal, an internal error), each of its requests is verified again
        alone, so that only those that fail by themselves get the error (the engine drops the caches a failed pass
        touched and never a session's committed state, so the retry sees what the batch saw)."""
        views, failed = self._views(queue)
        batch = self._choose(views) if views else []
        reqs = [s.verify_request() for _, s in batch]  # by each protocol's round class (a tree: its parents)
        raw = self._predict_raw(batch) if self.estimator and batch else 0.0  # before verify moves the caches
        t0 = time.perf_counter()
        try:
            blocks, size = self.engine.verify(reqs), len(batch)
        except Exception as e:  # noqa: BLE001 - retried alone below, each request gets its own outcome
            blocks, size = self._alone(reqs, e), 1
        dt = time.perf_counter() - t0
        if self.estimator and size == len(batch) > 0:
            self.live = live_update(self.live, raw, dt)
        gone = {id(s) for _, s, *_ in failed} | {id(s) for _, s in batch}
        return (failed + [(peer, s, blocks[s.verify.sid], dt, size) for peer, s in batch],
                [(p, s) for p, s in queue if id(s) not in gone])

    def _alone(self, reqs: list[VerifyRequest], err: Exception) -> dict[str, Block | Exception]:
        """After a failed pass: each request verified by itself (its block or its own error)."""
        if len(reqs) == 1:
            return {reqs[0].sid: err}
        log.warning("a batch of %d failed (%s: %s); verifying its requests one by one", len(reqs),
                    type(err).__name__, err)
        out: dict[str, Block | Exception] = {}
        for r in reqs:
            try:
                out[r.sid] = self.engine.verify([r])[r.sid]
            except Exception as e:  # noqa: BLE001 - this request's own failure, answered to its session alone
                out[r.sid] = e
        return out

    def select(self, queue: list[Held]) -> list[Held]:
        """The next batch from the queue, by the configured scheduler."""
        return self._choose(self._views(queue)[0])

    def _views(self, queue: list[Held]) -> tuple[list[tuple[Request, Held]], list[Done]]:
        """Each held DRAFT's scheduling view; the DRAFTs whose view raises, as failed results."""
        views, failed = [], []
        for pair in queue:
            try:
                views.append((self.request(*pair), pair))
            except Exception as e:  # noqa: BLE001 - that session fails alone
                failed.append((pair[0], pair[1], e, 0.0, 0))
        return views, failed

    def _choose(self, views: list[tuple[Request, Held]]) -> list[Held]:
        """The next batch among the viewed DRAFTs, by the configured scheduler."""
        pending = [r for r, _ in views]
        reqs = {r.rid: pair for r, pair in views}
        if self.scheduler == "fcfs":
            chosen = select_fcfs(pending, mem_budget_bytes=2**62, max_batch=self.max_batch)
        else:
            cap = (arrival_reserve_s(self.tightest_budget_s(), min(r.v_s for r in pending), self.guard_s)
                   if self.reserve else math.inf)
            chosen = select_slo(pending, time.perf_counter(), 2**62, self.batch_time, delta_s=self.guard_s,
                                max_batch=self.max_batch, lost_last=self.lost_last, slack_s=self.slack_s,
                                max_batch_s=cap, horizon_s=cap if math.isfinite(cap) else 0.0)
        for r in chosen:
            if math.isfinite(r.deadline_s) and r.deadline_s > r.arrival_s:  # a budget <= 0 was never feasible
                self.budgets[reqs[r.rid][1].slo_tok_s].append(r.deadline_s - r.arrival_s)
        return [reqs[r.rid] for r in chosen]

    def tightest_budget_s(self) -> float:
        """The smallest per-class median of recent verification budgets (d_i - a_i); inf before any deadline."""
        return min((statistics.median(b) for b in self.budgets.values()), default=math.inf)

    def batch_time(self, cached: list[int], new: list[int], block: list[int] | None = None) -> float:
        """The profile's estimate with the live correction, seconds."""
        return self.live.predict(self.estimator.predict_s(cached, new, block))

    def _predict_raw(self, batch: list[Held]) -> float:
        """The profile's (unscaled) estimate for a batch about to be verified."""
        reqs = [self.request_shape(s) for _, s in batch]
        return self.estimator.predict_s(*map(list, zip(*reqs)))

    @staticmethod
    def request_shape(s: EdgeSession) -> tuple[int, int, int]:
        """(cached, new, block) of a held DRAFT."""
        return request_shape(s.verify, len(s.draft_tokens))

    def _caught_up(self, s: EdgeSession) -> SessionHistory:
        """The session's history for the WDT predictor, brought up to date from its counters: a round finished since
        the last request committed ``generated`` more tokens, of which all but one were accepted draft tokens of the
        K then held."""
        h, rounds, generated, last_k = self.histories.get(s, (SessionHistory(), 0, 0, 0))
        if s.rounds > rounds and last_k:
            committed = s.generated - generated
            h = update_session(h, last_k, min(last_k, max(0, committed - 1)), committed)
        return h

    def history(self, s: EdgeSession, k: int) -> SessionHistory:
        """The history before the session's held K-token DRAFT (remembered with K for the next update)."""
        h = self._caught_up(s)
        self.histories[s] = (h, s.rounds, s.generated, k)
        return h

    def stop_depth(self, s: EdgeSession) -> int | None:
        """The depth to suggest for the session's next block (wisv.serving.wdt.stop_depth; None without a predictor),
        from its history including the round just verified."""
        return None if self.wdt is None else stop_depth(self.wdt, self._caught_up(s), s.draft_len)

    def expected_g(self, s: EdgeSession, msg, k: int) -> float:
        """g_i of a held K-token DRAFT: the WDT predictor's (with the DRAFT's draft features when it carries them),
        else the session's running mean (K / 2 + 1 before its first round)."""
        if self.wdt is None:
            return s.generated / s.rounds if s.rounds else k / 2 + 1
        f = msg.tensors.get("features")
        return self.wdt.g(k, self.history(s, k), confidence_summary(f) if f is not None else None)

    def request(self, peer: bytes, s: EdgeSession) -> Request:
        """Scheduling view of a held DRAFT."""
        msg, _, tokens = s.incoming
        cached, new, block = self.request_shape(s)
        v = self.batch_time([cached], [new]) if self.estimator else float(new)  # alone: one pass
        d = math.inf
        if s.slo_tok_s:
            csi = msg.header.get("csi") or {}
            d = deadline_s(s.msg_t0, s.slo_tok_s, len(tokens), float(msg.header.get("t_draft_s", 0.0)),
                           float(csi.get("rtt_ms", 0.0)) / 1e3)
        g = self.expected_g(s, msg, len(tokens))
        return Request(s.verify.sid, s.msg_t0, d, g, max(v, 1e-6), 0, cached, new, block)


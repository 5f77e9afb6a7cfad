"""The draft window K that follows the channel: pick K to minimise the predicted time per committed token.

A round that drafts K tokens costs ``T(K) = K tau_d + T_comm(K, CSI) + T_verify(K)`` (wisv/timing/roundtime.py's model,
or the UE's live measurements of the same terms) and commits ``E[C(K)] = 1 + sum_{j<=K} prod_{i<=j} p_i`` tokens in
expectation, where ``p_i`` is the chance that draft token i is accepted given that the ones before it were (the
correction or bonus token is the ``1``).  ``choose_k`` returns the K of ``[k_min, k_max]`` with the least
``T(K) / E[C(K)]``: a long RTT (a large fixed cost per round) pushes K up, a slow uplink that carries per-token
payload (FH's hidden states) or a drafter that is rarely right pushes it down.

The acceptance comes from two sources (``AcceptanceHistory``, decayed counts updated after every verdict):
the recent history gives a per-token acceptance rate ``alpha`` (the geometric MLE: accepted tokens over accepted
tokens plus rejections; a fully accepted block is censored, it adds no rejection), and the drafter's confidence
(its max probability at each drafted token) refines it through a per-bin calibration table learned from the same
verdicts.  Before drafting, K is chosen from ``alpha``; while drafting, ``keep_drafting`` ends the block early when
the next token's calibrated chance times the chance that the block survives so far is worth less than the time it
adds, at the rate the chosen K promises (a one-step look-ahead of the same objective).

``VerifyFit`` is the UE's estimate of the edge's verify time as a line in the positions verified (from the
``t_verify_s`` the VERDICTs report).  All pure: no clocks, no models, no sockets.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from channel.csi import CSI
from wisv.timing.check import Ratio, StopGain
from wisv.timing.latency import PayloadBits
from wisv.timing.roundtime import comm_s

CONF_EDGES = (0.3, 0.5, 0.7, 0.9)  # bin edges of the drafter's max probability for the calibration table
AUTO_K_MAX = 32  # largest K auto considers unless told otherwise
AUTO_DRAFT_LEN = 0  # the draft_len value that stands for ``--draft-len auto`` in configs


def expected_committed(p_accept: Sequence[float]) -> float:
    """E[committed tokens] of a block whose token i is accepted with chance p_accept[i] given all before it were:
    ``1 + sum_j prod_{i<=j} p_i`` (the correction or bonus token always commits)."""
    total, survive = 1.0, 1.0
    for p in p_accept:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"acceptance probabilities must be in [0, 1], got {p}")
        survive *= p
        total += survive
    return total


@dataclass(frozen=True)
class WindowChoice:
    """What choose_k decided, with the cost it saw for every K."""

    k: int  # the chosen window, tokens
    s_per_token: float  # predicted seconds per committed token at k
    committed: float  # predicted committed tokens per round at k
    cost_s_per_token: dict[int, float] = field(default_factory=dict)  # K -> predicted seconds per committed token


def choose_k(round_s: Callable[[int], float], p_accept: Callable[[int], Sequence[float]] | float, k_min: int = 1,
             k_max: int = AUTO_K_MAX) -> WindowChoice:
    """The K in [k_min, k_max] with the least ``round_s(K) / expected_committed(p(K))``; ties go to the smaller K.

    ``p_accept``: a per-token acceptance rate (the same for every position), or K -> the K per-position
    probabilities."""
    if not 1 <= k_min <= k_max:
        raise ValueError(f"need 1 <= k_min <= k_max, got {k_min}, {k_max}")
    probs = (lambda k: [float(p_accept)] * k) if isinstance(p_accept, (int, float)) else p_accept
    cost, committed = {}, {}
    for k in range(k_min, k_max + 1):
        t = round_s(k)
        if not t > 0 or not math.isfinite(t):
            raise ValueError(f"round_s({k}) = {t}: a round must take a positive, finite time")
        committed[k] = expected_committed(probs(k))
        cost[k] = t / committed[k]
    best = min(cost, key=lambda k: (cost[k], k))
    return WindowChoice(best, cost[best], committed[best], cost)


def link_cost(protocol: str, csi: CSI, pb: PayloadBits, mismatch_rate: float = 0.0,
              exchange_overhead_s: float = 0.0) -> Callable[[int], float]:
    """K -> the protocol's link time of a K-token round under ``csi`` (wisv.timing.roundtime.comm_s; SH's queries at
    ``mismatch_rate`` per token)."""
    if not 0 <= mismatch_rate <= 1:
        raise ValueError(f"need mismatch_rate in [0, 1], got {mismatch_rate}")
    return lambda k: comm_s(protocol, k, mismatch_rate * k, csi, pb, exchange_overhead_s)


def round_cost(protocol: str, csi: CSI, pb: PayloadBits, tau_d_s: float, verify_s: Callable[[int], float],
               mismatch_rate: float = 0.0, exchange_overhead_s: float = 0.0,
               draft_s: Callable[[int], float] | None = None, overhead_s: float = 0.0) -> Callable[[int], float]:
    """K -> seconds of one round from live terms: drafting (``draft_s(K)``, or ``K tau_d``), the protocol's link time
    under ``csi`` (``link_cost``), the edge's ``verify_s(K)`` and ``overhead_s``, the round's measured time that none
    of those terms holds (host hops, encoding, the UE's commit)."""
    if tau_d_s < 0 or overhead_s < 0:
        raise ValueError(f"need tau_d_s >= 0 and overhead_s >= 0, got {tau_d_s}, {overhead_s}")
    link = link_cost(protocol, csi, pb, mismatch_rate, exchange_overhead_s)
    drafting = draft_s or (lambda k: k * tau_d_s)
    return lambda k: drafting(k) + link(k) + verify_s(k) + overhead_s


def keep_drafting(survival: float, p_next: float, tokens_per_s: float, marginal_s: float) -> bool:
    """One-step look-ahead while drafting: add the next token when its expected committed tokens
    (``survival * p_next``: the block so far is accepted and so is it) are worth the time it adds at the rate the
    chosen window promises (``tokens_per_s * marginal_s``)."""
    return survival * p_next >= tokens_per_s * marginal_s


def _bin(confidence: float) -> int:
    return sum(confidence >= e for e in CONF_EDGES)


@dataclass(frozen=True)
class AcceptanceHistory:
    """Decayed counts of verification outcomes: the per-token rate ``alpha`` and a confidence calibration.

    A prior of ``prior_tokens`` tokens at rate ``prior_alpha`` starts it (and keeps it from 0 or 1)."""

    accepted: float = 0.0  # decayed accepted draft tokens
    rejected: float = 0.0  # decayed first rejections (one per block that was not fully accepted)
    bin_accepted: tuple[float, ...] = (0.0,) * (len(CONF_EDGES) + 1)  # per confidence bin, accepted tokens
    bin_decided: tuple[float, ...] = (0.0,) * (len(CONF_EDGES) + 1)  # per bin, tokens verification decided
    prior_alpha: float = 0.6  # acceptance rate before any verdict
    prior_tokens: float = 4.0  # weight of the prior, tokens
    decay: float = 0.9  # each round's weight of the counts before it

    @property
    def alpha(self) -> float:
        """Per-token acceptance rate: (accepted + prior) / (accepted + rejected + prior weight)."""
        a = self.accepted + self.prior_alpha * self.prior_tokens
        return a / (self.accepted + self.rejected + self.prior_tokens)

    def p_token(self, confidence: float | None) -> float:
        """Chance a token of this drafter confidence (max probability) is accepted, given those before it were:
        its bin's rate, shrunk toward ``alpha`` by a prior of ``prior_tokens``."""
        if confidence is None:
            return self.alpha
        b = _bin(confidence)
        return (self.bin_accepted[b] + self.alpha * self.prior_tokens) / (self.bin_decided[b] + self.prior_tokens)


def update_history(h: AcceptanceHistory, drafted: int, accepted: int,
                   confidences: Sequence[float] | None = None) -> AcceptanceHistory:
    """The history after one verdict: ``accepted`` of ``drafted`` tokens; ``confidences`` [drafted] the drafter's max
    probability at each (the accepted ones and the first rejected one go into the calibration)."""
    if not 0 <= accepted <= drafted:
        raise ValueError(f"need 0 <= accepted <= drafted, got {accepted}, {drafted}")
    if drafted == 0:
        return h
    d = h.decay
    rej = 1.0 if accepted < drafted else 0.0
    ba, bd = [d * v for v in h.bin_accepted], [d * v for v in h.bin_decided]
    if confidences is not None:
        for i, c in enumerate(list(confidences)[: accepted + 1]):
            b = _bin(float(c))
            bd[b] += 1.0
            ba[b] += 1.0 if i < accepted else 0.0
    return AcceptanceHistory(d * h.accepted + accepted, d * h.rejected + rej, tuple(ba), tuple(bd),
                             h.prior_alpha, h.prior_tokens, h.decay)


@dataclass(frozen=True)
class VerifyFit:
    """The edge's verify time as a line in the positions it verifies, ``t = c_s + b_s * (K + 1)``, by decayed least
    squares over the VERDICTs' ``t_verify_s``; until two window sizes are seen, a flat line at their mean."""

    n: float = 0.0  # decayed sums over rounds of 1, x, x^2, t, x t (x = K + 1 positions)
    sx: float = 0.0
    sxx: float = 0.0
    st: float = 0.0
    sxt: float = 0.0
    decay: float = 0.95  # each round's weight of the sums before it

    @property
    def has_slope(self) -> bool:
        """At least two window sizes were seen: the line has a slope (else it is flat at the mean)."""
        return self.n > 0 and self.sxx / self.n - (self.sx / self.n) ** 2 >= 1e-6

    def predict_s(self, k: int) -> float:
        """Predicted verify time of a K-token block, s (0 before any verdict)."""
        return self.at(k + 1)

    def at(self, x: float) -> float:
        """The line at ``x`` (not below 0; 0 before any point; flat at the mean until x varied)."""
        if self.n <= 0:
            return 0.0
        mean_t = self.st / self.n
        var = self.sxx / self.n - (self.sx / self.n) ** 2
        if var < 1e-6:
            return mean_t
        slope = max(0.0, (self.sxt / self.n - self.sx / self.n * mean_t) / var)
        return max(0.0, mean_t + slope * (x - self.sx / self.n))


def update_verify(fit: VerifyFit, k: int, t_verify_s: float) -> VerifyFit:
    """The fit after a verdict that verified a K-token block in ``t_verify_s``."""
    if k < 1:
        return fit
    return update_line(fit, float(k + 1), t_verify_s)


def update_line(fit: VerifyFit, x: float, t: float) -> VerifyFit:
    """The line after one more point (x, t); a non-finite or negative t leaves it as it was."""
    if not t >= 0 or not math.isfinite(t) or not math.isfinite(x):
        return fit
    d = fit.decay
    return VerifyFit(d * fit.n + 1, d * fit.sx + x, d * fit.sxx + x * x, d * fit.st + t, d * fit.sxt + x * t, d)


class WindowTracker:
    """What ``--draft-len auto`` learns over a run and the two questions it answers (the HF candidate-generator
    shape: ``choose`` before a round, ``update`` after its verdict).

    ``choose(round_s)`` picks the round's K from the history's ``alpha``; ``stop_rule`` is the DraftSession stop
    callback that then ends the block early on low drafter confidence (``keep_drafting``).  The caller builds
    ``round_s``: the UE from its live terms (``round_cost`` with ``tau_d_s`` and ``verify``), the simulator from
    its latency model."""

    def __init__(self, k_min: int = 1, k_max: int = AUTO_K_MAX, history: AcceptanceHistory | None = None):
        if not 1 <= k_min <= k_max:
            raise ValueError(f"need 1 <= k_min <= k_max, got {k_min}, {k_max}")
        self.k_min, self.k_max = k_min, k_max
        self.history = history or AcceptanceHistory()
        self.verify = VerifyFit()  # the edge's measured time per round (VERDICT t_edge_s) as a line in K
        self.drafting = VerifyFit()  # the UE's drafting time per block as a line in K (its fixed cost: the catch-up)
        self.tau_d_s: float | None = None  # EWMA of the drafting time per token, s
        self.tau_from_prefill = False  # tau_d_s is a block's that included the drafter's prompt prefill (no other yet)
        self.prefill_s = 0.0  # EWMA of the drafter's prefill of a prompt: a first block's drafting beyond K tau_d, s
        self.overhead = VerifyFit(decay=0.9)  # the round's measured time the terms leave out, as a line in the
        #   link model's time (host hops and the emulator's framing grow with the link), s
        self.link_s: Callable[[int], float] | None = None  # the link model of the round in flight (set by its sizer)
        self.edge_decode_s: float | None = None  # the edge's measured decode time per token alone (its CHUNKs), s
        self.since_edge_rounds: int | None = None  # speculative rounds since a CHUNK last measured it (None: never)
        self.edge_tokens_since_spec = 0  # tokens the edge generated alone since the last speculative round
        self.edge_running = False  # the UE's last round (any prompt's) was the edge's alone
        self.spec_backoff = 0  # auto: speculation probes since it last won a round (wisv.timing.handover.next_backoff)
        self.spec_check = Ratio()  # auto: its speculative rounds' measured over predicted cost (wisv/timing/check.py)
        self.edge_check = Ratio()  # auto: the edge's rounds alone, the same
        self.stop_gain = StopGain()  # auto with a lookup stop: what the rounds right after a stop committed
        self.unstopped_tokens = 0  # ... and the edge's tokens in runs that did not ask for it since one last did
        self.last: WindowChoice | None = None

    def draft_s(self, k: int) -> float:
        """Predicted drafting time of a K-token block: the measured line once two sizes were seen, else K tau_d."""
        if self.drafting.has_slope and self.drafting.at(0.0) > 0:  # a noisy fit with no fixed cost: per token
            return self.drafting.at(float(k))
        return k * (self.tau_d_s or 0.0)

    def overhead_s(self, link_s: float) -> float:
        """Predicted time a round of link time ``link_s`` (the model's) spends outside the measured terms, s."""
        return self.overhead.at(link_s)

    def learn_drafting(self, drafted: int, t_draft_s: float | None, prefilled: bool = False,
                       t_prefill_s: float | None = None, smooth: float = 0.3) -> None:
        """Learn the drafting time from a block of ``drafted`` tokens drafted in ``t_draft_s``.  A block whose
        drafting began with the drafter's prefill of the prompt (``prefilled``, a prompt's first) pays it, which is no
        cost per drafted token.  Where the drafter timed that read (``t_prefill_s``: the forward that read the prompt
        and gave the first token), the block's other tokens are clean drafting and the read beyond one token's
        drafting is ``prefill_s``.  Without it, such a block sets the drafting time only while nothing else has
        (``tau_from_prefill``), the first block without one replaces it, and once drafting is known such a block
        teaches ``prefill_s`` as what it took beyond its K tokens' drafting."""
        if drafted <= 0 or t_draft_s is None or not t_draft_s > 0:
            return
        if prefilled and t_prefill_s is not None and drafted >= 2 and 0 <= t_prefill_s < t_draft_s:
            self._learn_tau((t_draft_s - t_prefill_s) / (drafted - 1), smooth, from_prefill=False)
            self._learn_prefill(t_prefill_s - self.tau_d_s, smooth)
            return
        if prefilled and self.tau_d_s is not None and not self.tau_from_prefill:
            self._learn_prefill(t_draft_s - self.draft_s(drafted), smooth)
        if not (prefilled and self.tau_d_s is not None):
            self._learn_tau(t_draft_s / drafted, smooth, from_prefill=prefilled)
            if not prefilled:
                self.drafting = update_line(self.drafting, float(drafted), t_draft_s)

    def _learn_tau(self, tau: float, smooth: float, from_prefill: bool) -> None:
        fresh = self.tau_d_s is None or self.tau_from_prefill
        self.tau_d_s = tau if fresh else self.tau_d_s + smooth * (tau - self.tau_d_s)
        self.tau_from_prefill = from_prefill

    def _learn_prefill(self, extra_s: float, smooth: float) -> None:
        extra = max(0.0, extra_s)
        self.prefill_s = extra if self.prefill_s == 0 else self.prefill_s + smooth * (extra - self.prefill_s)

    def round_s(self, protocol: str, csi: CSI, pb: PayloadBits, mismatch_rate: float = 0.0) -> Callable[[int], float]:
        """K -> predicted seconds of a round from what was measured: drafting, the link under ``csi``, the edge's
        time and the overhead; keeps the link model to learn the overhead from the round's measured time."""
        link = self.link_s = link_cost(protocol, csi, pb, mismatch_rate)
        base = round_cost(protocol, csi, pb, self.tau_d_s or 0.0, self.verify.predict_s, mismatch_rate,
                          draft_s=self.draft_s)
        return lambda k: base(k) + self.overhead_s(link(k))

    def choose(self, round_s: Callable[[int], float], k_cap: int | None = None) -> WindowChoice:
        """The round's window (at most ``k_cap``, e.g. the budget left)."""
        hi = max(self.k_min, min(self.k_max, k_cap if k_cap is not None else self.k_max))
        self.last = choose_k(round_s, self.history.alpha, min(self.k_min, hi), hi)
        return self.last

    def stop_rule(self, round_s: Callable[[int], float]) -> Callable[[float, int], bool]:
        """``stop(confidence, n_drafted)`` for the token after ``n_drafted`` of the block: True ends the block."""
        choice = self.last
        rate = 1.0 / choice.s_per_token
        survival = [self.history.alpha]  # the first token has no confidence check (DraftSession asks from the 2nd)

        def stop(confidence: float, n: int) -> bool:
            p = self.history.p_token(confidence)
            if not keep_drafting(survival[0], p, rate, round_s(n + 1) - round_s(n)):
                return True
            survival[0] *= p
            return False
        return stop

    def update(self, drafted: int, accepted: int, confidences: Sequence[float] | None = None,
               t_draft_s: float | None = None, t_verify_s: float | None = None, smooth: float = 0.3,
               t_round_s: float | None = None, prefilled: bool = False, t_prefill_s: float | None = None) -> None:
        """Learn from one verdict: acceptance (and confidence calibration), drafting time (per token and as a line,
        ``learn_drafting``), the edge's time, and with ``t_round_s`` (the round's measured time, draft to verdict)
        the overhead."""
        self.history = update_history(self.history, drafted, accepted, confidences)
        self.learn_drafting(drafted, t_draft_s, prefilled, t_prefill_s, smooth)
        if drafted > 0 and t_verify_s is not None:
            self.verify = update_verify(self.verify, drafted, t_verify_s)
        if drafted > 0 and None not in (t_round_s, t_draft_s, t_verify_s, self.link_s):
            link = self.link_s(drafted)
            self.overhead = update_line(self.overhead, link, max(0.0, t_round_s - t_draft_s - t_verify_s - link))


class TreeWindowTracker(WindowTracker):
    """``--tree-budget auto``: the same objective over a best-first tree's token budget N.

    A tree of N tokens costs what a chain of N does to draft and verify, and the tree protocol's payloads on the
    link (wisv.timing.roundtime.comm_s "tree"); it commits one token per accepted level plus one.  The history holds a
    per-level acceptance rate (accepted depth over the tree's depth, as a chain's accepted over drafted) and the
    tree's depth per token of budget, so a budget N is expected to reach ``depth_per_token * N`` levels, each accepted
    with that rate given the ones above it."""

    def __init__(self, k_min: int = 1, k_max: int = AUTO_K_MAX):
        super().__init__(k_min, k_max)
        self.depth_per_token = 0.5  # EWMA of tree depth / tree size (prior: a tree half as deep as its budget)

    def levels(self, n: int) -> list[float]:
        """The per-level acceptance chances of a budget-N tree."""
        return [self.history.alpha] * max(1, round(self.depth_per_token * n))

    def choose(self, round_s: Callable[[int], float], k_cap: int | None = None) -> WindowChoice:
        hi = max(self.k_min, min(self.k_max, k_cap if k_cap is not None else self.k_max))
        self.last = choose_k(round_s, self.levels, min(self.k_min, hi), hi)
        return self.last

    def update_tree(self, size: int, depth: int, accepted_depth: int, t_draft_s: float | None = None,
                    t_verify_s: float | None = None, smooth: float = 0.3) -> None:
        """Learn from one tree verdict: the accepted depth of a tree of ``size`` tokens and ``depth`` levels."""
        if size < 1 or not 0 <= accepted_depth <= depth <= size:
            raise ValueError(f"need 0 <= accepted_depth <= depth <= size, size >= 1; got {accepted_depth}, {depth}, "
                             f"{size}")
        self.depth_per_token += smooth * (depth / size - self.depth_per_token)
        self.history = update_history(self.history, depth, accepted_depth)
        if t_verify_s is not None:
            self.verify = update_verify(self.verify, size, t_verify_s)  # the target verifies all N nodes
        if t_draft_s is not None and t_draft_s > 0:
            tau = t_draft_s / size
            self.tau_d_s = tau if self.tau_d_s is None else self.tau_d_s + smooth * (tau - self.tau_d_s)

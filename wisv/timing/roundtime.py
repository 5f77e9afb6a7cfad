"""Pure per-round and end-to-end latency model: compute plus communication (SPEC eqs. 14, 16, 18-22).

What one round costs, by protocol (all stages sequential: no overlap of drafting, link and verification):

    greedy  T_draft + T_comm(one exchange, uplink s_greedy) + T_verify
    reject  T_draft + T_comm(one exchange, uplink s_reject) + T_verify
    fh      T_draft + T_FH  (eq. 6)                           + T_verify + T_head   (eq. 18)
    sh      T_draft + T_SH  (eq. 10, m queried positions)     + T_verify + T_head   (eq. 19)
    tree    T_draft + T_comm(one exchange, uplink s_tree)     + T_verify

A tree of K tokens (best-first, one node per drafter call: wisv/decoding/tree.py) costs the drafter K calls and the
target one pass over K + 1 positions, as a chain of K; only its payload differs (K parent indices up, the path down).

``m`` is the number of greedy-mismatch positions of the block: the decision head's candidate set,
which SH also queries (``protocols.registry.Protocol.query``, for a description with ``hidden_query``).  The
head runs only for the WISV protocols (a description's ``head``), ``T_head = m * head_flops(d_in, H) / (eta_ES F_ES)``
with ``d_in = d_d + d_t + d_c``.  Greedy and reject return the same feedback as FH (index + token, ``S_fb + O_dn``).
Each protocol's payloads come from its description (wisv.timing.protodesc).  Eq. 22 sums the rounds.  The hardware
and model choices live in one ``Deployment``; a round is a ``RoundInputs``.

Fixed costs (all 0 by default, so the paper's equations are unchanged): a profile's fixed costs
(``HardwareProfile.call_overhead_s``, with the model's ``n_weights``) are charged once per compute phase
plus once per forward call, i.e. one phase of K calls for drafting and one phase of one call for the
verification pass; ``Deployment.exchange_overhead_s`` is charged once per request/reply exchange (1 per
round, 2 for an SH round that queries hidden states).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from channel.csi import CSI, FEATURE_DIM
from channel.outage import Outages
from wisv.timing.compute import (
    DEFAULT_CONSTANTS,
    FlopConstants,
    ModelDims,
    compute_s,
    draft_flops,
    flops_per_token,
    get_architecture,
    head_flops,
    verify_flops,
)
from wisv.timing.hardware import HardwareProfile, get_profile
from wisv.timing.latency import PayloadBits, down_s, s_req, s_sh2, t_single_exchange, up_s
from wisv.timing.protodesc import describe, downlink_bits, exchanges, round_names, uplink_bits

PROTOCOLS = round_names()  # the protocols a round runs, as described (wisv.timing.protodesc)
WISV_PROTOCOLS = tuple(n for n in PROTOCOLS if describe(n).head)  # protocols that run the decision head


@dataclass(frozen=True)
class Deployment:
    """Who runs what where: the model pair, the two devices, the payload encoding and the head size."""

    drafter: ModelDims  # runs on the UE
    target: ModelDims  # runs on the edge server
    ue: HardwareProfile  # drafting device
    edge: HardwareProfile  # verifying device (also runs the decision head)
    payload: PayloadBits  # encoding constants of the uplink/downlink messages
    head_hidden: int = 256  # decision-head hidden width H (the paper only says "small"; our choice)
    csi_dim: int = FEATURE_DIM  # d_c, length of the CSI feature vector fed to the head
    consts: FlopConstants = DEFAULT_CONSTANTS  # c1..c4 of eq. 13
    exchange_overhead_s: float = 0.0  # fixed host time per request/reply exchange (encode, process hops), s
    chunk_overhead_s: float = 0.0  # host time per streamed chunk beyond its passes (the edge's send between two
    #   passes, the hops to the UE), s: server-only's stream (wisv.timing.alone)
    ue_chunk_overhead_s: float = 0.0  # the UE's host time per chunk of a stream it generates itself, beyond the
    #   drafter's passes (its chunk loop and record), s: on-device (wisv.timing.alone)
    stream_start_overhead_s: float = 0.0  # server-only's start beyond its warm model: the first chunk's arrival past
    #   the OPEN, the GENERATE and one decode pass priced back to back (the edge's prefill and first pass run on a
    #   core that idled through the round trips; the UE's hops between OPEN_OK and GENERATE), s (wisv.timing.alone)

    @property
    def head_d_in(self) -> int:
        """d_in = d_d + d_t + d_c (eq. 17)."""
        return self.drafter.d_model + self.target.d_model + self.csi_dim

    @classmethod
    def paper_llama(cls, ue: str = "jetson-agx-orin", edge: str = "a40") -> Deployment:
        """The paper's testbed: Llama-3.2-1B on a Jetson AGX Orin, Llama-3.1-8B on an A40, paper packing."""
        drafter, target = get_architecture("llama-3.2-1b"), get_architecture("llama-3.1-8b")
        return cls(drafter, target, get_profile(ue), get_profile(edge),
                   PayloadBits.paper(vocab=drafter.vocab, d_d=drafter.d_model))


@dataclass(frozen=True)
class RoundInputs:
    """What a round's latency depends on, besides the link and the deployment."""

    protocol: str  # a round's protocol (PROTOCOLS: greedy | reject | fh | sh | ef | tree)
    k: int  # K, tokens drafted this round
    l: int  # L, committed prefix length at the start of the round (tokens)
    m: float = 0  # greedy mismatches in the block (head candidates, SH queries); may be an average

    def __post_init__(self) -> None:
        if self.protocol not in round_names():
            raise ValueError(f"unknown protocol {self.protocol!r}; known: {PROTOCOLS}")
        if self.k < 1 or self.l < 0:
            raise ValueError(f"need K >= 1 and L >= 0, got K={self.k}, L={self.l}")
        if not 0 <= self.m <= self.k:
            raise ValueError(f"need 0 <= m <= K, got m={self.m}, K={self.k}")

    @staticmethod
    def make_dummy(protocol: str = "fh") -> RoundInputs:
        return RoundInputs(protocol, k=8, l=100, m=2)


@dataclass(frozen=True)
class RoundTimes:
    """Time components of one round, seconds."""

    draft_s: float  # T_draft, eq. 14
    comm_s: float  # link time (eq. 6, eq. 10 or one greedy/reject exchange)
    verify_s: float  # T_verify, eq. 16
    head_s: float  # T_head, eq. 17 over the m candidates (0 for greedy/reject)

    @property
    def total_s(self) -> float:
        """Eqs. 18/19: the sum of the components."""
        return self.draft_s + self.comm_s + self.verify_s + self.head_s


def n_weights(dims: ModelDims, c: FlopConstants = DEFAULT_CONSTANTS) -> float:
    """Weights a forward call streams: f(0) / 2, the multiply-adds of one token with an empty cache (eq. 13)."""
    return flops_per_token(dims, 0, c) / 2.0


def t_draft_s(dims_d: ModelDims, L: int, K: int, ue: HardwareProfile, c: FlopConstants = DEFAULT_CONSTANTS) -> float:
    """Eq. 14: T_draft = F_draft / (eta_UE * F_UE), plus the UE's fixed cost of one phase of K forward calls."""
    return compute_s(draft_flops(dims_d, L, K, c), ue) + ue.call_overhead_s(n_weights(dims_d, c), K)


def t_verify_s(dims_t: ModelDims, L: int, K: int, edge: HardwareProfile,
               c: FlopConstants = DEFAULT_CONSTANTS) -> float:
    """Eq. 16: T_verify = F_verify / (eta_ES * F_ES), plus the edge's fixed cost of one phase of one call (over K + 1
    positions: a multi-row call), times what the edge's calibration measured against that for K (``verify_factor``:
    1 for a profile without one)."""
    model = compute_s(verify_flops(dims_t, L, K, c), edge) + edge.call_overhead_s(n_weights(dims_t, c), 1, 1)
    return model * edge.verify_factor(K)


def t_prefill_s(dims: ModelDims, n_tokens: int, profile: HardwareProfile,
                c: FlopConstants = DEFAULT_CONSTANTS) -> float:
    """One forward call over ``n_tokens`` new tokens with an empty cache (a prompt prefill), s."""
    if n_tokens <= 0:
        return 0.0
    return (compute_s(verify_flops(dims, 0, n_tokens, c), profile)
            + profile.call_overhead_s(n_weights(dims, c), 1, int(n_tokens > 1)))


def n_exchanges(protocol: str, m: float) -> int:
    """Request/reply exchanges of one round: 2 for an SH round with queried positions, else 1."""
    return exchanges(describe(protocol), m)


def t_head_s(n_queried: float, d_in: int, H: int, edge: HardwareProfile) -> float:
    """Decision-head time: n_queried * head_flops(d_in, H) on the edge (eq. 17 with eq. 11)."""
    if n_queried < 0:
        raise ValueError(f"n_queried must be >= 0, got {n_queried}")
    return compute_s(n_queried * head_flops(d_in, H), edge)


def comm_s(protocol: str, k: int, m: float, csi: CSI, pb: PayloadBits, exchange_overhead_s: float = 0.0) -> float:
    """Link time of one round of ``protocol`` (wisv.timing.latency), plus ``exchange_overhead_s`` per exchange: its
    described uplink and VERDICT in one exchange (greedy, ef, reject, tree, FH: eq. 6), and for a protocol that
    queries hidden states, the HIDDEN_REQ/HIDDEN exchange at ``m`` positions (SH: eq. 10)."""
    if protocol not in round_names():
        raise ValueError(f"unknown protocol {protocol!r}; known: {round_names()}")
    d = describe(protocol)
    fixed = exchanges(d, m) * exchange_overhead_s
    t = t_single_exchange(uplink_bits(d, k, pb), downlink_bits(d, k, pb), csi)
    if d.hidden_query and m > 0:
        t += down_s(s_req(m, pb), csi) + up_s(s_sh2(m, pb), csi) + csi.rtt_ms / 1e3
    return t + fixed


def round_times(r: RoundInputs, csi: CSI, dep: Deployment) -> RoundTimes:
    """Each time component of one round (eqs. 14, 16, 17 and the protocol's link time)."""
    head = 0.0
    if describe(r.protocol).head:
        head = t_head_s(r.m, dep.head_d_in, dep.head_hidden, dep.edge)
    return RoundTimes(
        draft_s=t_draft_s(dep.drafter, r.l, r.k, dep.ue, dep.consts),
        comm_s=comm_s(r.protocol, r.k, r.m, csi, dep.payload, dep.exchange_overhead_s),
        verify_s=t_verify_s(dep.target, r.l, r.k, dep.edge, dep.consts),
        head_s=head,
    )


def round_time_s(r: RoundInputs, csi: CSI, dep: Deployment) -> float:
    """Eqs. 18/19 (and their greedy/reject analogues): total seconds of one round."""
    return round_times(r, csi, dep).total_s


def rounds_s(rounds: Iterable[tuple[int, int, int]], protocol: str, csi_at: Callable[[float], CSI], dep: Deployment,
             t0_s: float = 0.0, memo: dict | None = None, outages: Outages | None = None) -> float:
    """Eq. 22 over recorded rounds ``(K drafted, prefix L, m mismatches)``, each under the CSI in force at its
    start (``csi_at(t)``, t counted from ``t0_s``).  A round that drafted nothing (a 1-token budget left) is
    charged as K = 1.  ``memo`` caches round times across calls.  A round that meets one of the link's
    ``outages`` is paused until the outage ends (one that starts in an outage waits for its end)."""
    memo = {} if memo is None else memo
    t = t0_s
    for k, l, m in rounds:
        csi, k1 = csi_at(t), max(1, int(k))
        key = (k1, int(l), min(int(m), k1), csi)
        if key not in memo:
            memo[key] = round_time_s(RoundInputs(protocol, k=k1, l=int(l), m=key[2]), csi, dep)
        t = outages.stretch(t, memo[key]) if outages else t + memo[key]
    return t - t0_s


def e2e_s(rounds: Iterable[float]) -> float:
    """Eq. 22: end-to-end latency, the sum of the per-round times (seconds)."""
    return float(sum(rounds))

"""The `auto` protocol's choice among the WISV protocols the edge's head serves: the paper's RTT rule and a cost-model
rule between FH and SH (SPEC eqs. 6, 10); EF, which uploads no more than greedy, whenever the head reads no drafter
hidden states."""
from __future__ import annotations

from dataclasses import dataclass

from channel.csi import CSI
from wisv.timing.latency import PayloadBits, t_fh, t_sh_expected
from wisv.timing.protodesc import describe

RTT_THRESHOLD_MS = 10.0  # paper's hardware-testbed rule: FH if RTT > 10 ms, else SH
AUTO_RULES = ("cost", "rtt")


@dataclass
class MismatchStats:
    """Exponentially smoothed mismatch statistics of recent rounds (what SH would have queried)."""

    alpha: float = 0.3  # weight of the newest round
    m_mean: float = 1.0  # smoothed number of mismatches per round (prior: one)
    p_any: float = 0.5  # smoothed fraction of rounds with at least one mismatch (prior: half)

    def update(self, mismatches: int) -> None:
        self.m_mean += self.alpha * (mismatches - self.m_mean)
        self.p_any += self.alpha * (float(mismatches > 0) - self.p_any)


def choose_rtt(csi: CSI) -> str:
    """Paper rule: FH when the measured RTT exceeds 10 ms (one round trip saved), else SH."""
    return "fh" if csi.rtt_ms > RTT_THRESHOLD_MS else "sh"


def choose_cost(csi: CSI, k: int, stats: MismatchStats, pb: PayloadBits) -> str:
    """Cost rule: the protocol with the lower predicted round communication time under ``csi``."""
    fh = t_fh(k, csi, pb)
    sh = t_sh_expected(k, stats.m_mean, stats.p_any, csi, pb)
    return "fh" if fh <= sh else "sh"


def choose(rule: str, csi: CSI, k: int, stats: MismatchStats, pb: PayloadBits,
           allowed: tuple[str, ...] = ("fh", "sh")) -> str:
    """Dispatch on the rule name ('cost' or 'rtt') among the ``allowed`` protocols (protocols.registry.servable): one
    that uploads no hidden states when allowed (ef: its round costs greedy's bytes, never more than fh's or sh's),
    else fh or sh."""
    if rule not in AUTO_RULES:
        raise ValueError(f"unknown auto rule {rule!r}; choose one of {AUTO_RULES}")
    bare = [p for p in allowed if not describe(p).uploads_hidden]
    if bare:
        return bare[0]
    if rule == "rtt":
        return choose_rtt(csi)
    if rule == "cost":
        return choose_cost(csi, k, stats, pb)
    raise ValueError(f"unknown auto rule {rule!r}; choose one of {AUTO_RULES}")

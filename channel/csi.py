"""Channel state information (CSI): the link-state type, its normalised features and its scalar quality.

Units: rates in Mbit/s, RTT in ms, packet error rates (PER) as probabilities in [0, 1).
An infinite rate means "no rate limit"; ``CSI.ideal()`` is the unemulated link.

Expected serialization time (SPEC "Communication time"): ``S / (R * (1 - PER))`` for ``S`` bits.

``features()`` -> ``[FEATURE_DIM]`` float32, each entry in [0, 1]:
  0, 1  rate_up, rate_down: ``(log10(R) - log10(RATE_LO_MBPS)) / (log10(RATE_HI_MBPS) - log10(RATE_LO_MBPS))``, clipped
  2     rtt: ``rtt_ms / RTT_HI_MS``, clipped
  3, 4  per_up, per_down: raw PER

``quality()`` -> q in (0, 1], the geometric mean of three scores, each in (0, 1]:
  ``s_rate(R_eff) = R_eff / (R_eff + RATE_HALF_MBPS)`` for the goodputs ``R_eff = R * (1 - PER)`` of
  both directions, and ``s_rtt = RTT_HALF_MS / (RTT_HALF_MS + rtt_ms)``.  q is strictly increasing in
  both rates, strictly decreasing in RTT and in both PERs, and q == 1 only for the ideal link.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

RATE_LO_MBPS = 0.1  # features(): rate mapped to 0
RATE_HI_MBPS = 1000.0  # features(): rate mapped to 1
RTT_HI_MS = 200.0  # features(): RTT mapped to 1
FEATURE_NAMES = ("rate_up", "rate_down", "rtt", "per_up", "per_down")
FEATURE_DIM = len(FEATURE_NAMES)
RATE_HALF_MBPS = 10.0  # quality(): a goodput of this many Mbit/s scores 0.5
RTT_HALF_MS = 50.0  # quality(): an RTT of this many ms scores 0.5


@dataclass(frozen=True)
class CSI:
    """Link state of one UE-edge link at one time."""

    rate_up_mbps: float  # uplink (UE -> edge) rate, Mbit/s; > 0, inf = unlimited
    rate_down_mbps: float  # downlink (edge -> UE) rate, Mbit/s; > 0, inf = unlimited
    rtt_ms: float  # round-trip propagation time, ms; >= 0 and finite
    per_up: float = 0.0  # uplink packet error rate, in [0, 1)
    per_down: float = 0.0  # downlink packet error rate, in [0, 1)

    def __post_init__(self) -> None:
        for f in fields(self):
            try:
                object.__setattr__(self, f.name, float(getattr(self, f.name)))
            except (TypeError, ValueError) as e:
                raise ValueError(f"CSI.{f.name} must be a number, got {getattr(self, f.name)!r}") from e
        for name in ("rate_up_mbps", "rate_down_mbps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"CSI.{name} must be > 0 Mbit/s, got {getattr(self, name)}")
        if not 0 <= self.rtt_ms < math.inf:
            raise ValueError(f"CSI.rtt_ms must be finite and >= 0 ms, got {self.rtt_ms}")
        for name in ("per_up", "per_down"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"CSI.{name} must be in [0, 1), got {getattr(self, name)}")

    @classmethod
    def symmetric(cls, rate_mbps: float, rtt_ms: float, per: float = 0.0) -> CSI:
        """Same rate and PER in both directions."""
        return cls(rate_mbps, rate_mbps, rtt_ms, per, per)

    @classmethod
    def ideal(cls) -> CSI:
        """The unemulated link: unlimited rate, no delay, no loss."""
        return cls(math.inf, math.inf, 0.0, 0.0, 0.0)

    @property
    def is_ideal(self) -> bool:
        return self == CSI.ideal()

    def uplink_s(self, nbytes: int) -> float:
        """Expected uplink serialization time of nbytes, s (no propagation)."""
        return serialization_s(nbytes, self.rate_up_mbps, self.per_up)

    def downlink_s(self, nbytes: int) -> float:
        """Expected downlink serialization time of nbytes, s (no propagation)."""
        return serialization_s(nbytes, self.rate_down_mbps, self.per_down)

    def features(self) -> np.ndarray:
        """Normalised feature vector for the decision head: [FEATURE_DIM] float32 in [0, 1]."""
        return np.array(
            [_rate_feature(self.rate_up_mbps), _rate_feature(self.rate_down_mbps),
             min(self.rtt_ms / RTT_HI_MS, 1.0), self.per_up, self.per_down],
            dtype=np.float32,
        )

    def quality(self) -> float:
        """Scalar channel quality q in (0, 1], 1 = ideal link (formula in the module docstring)."""
        s_up = _rate_score(self.rate_up_mbps * (1 - self.per_up))
        s_down = _rate_score(self.rate_down_mbps * (1 - self.per_down))
        s_rtt = RTT_HALF_MS / (RTT_HALF_MS + self.rtt_ms)
        return float((s_up * s_down * s_rtt) ** (1 / 3))

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, float]) -> CSI:
        """Inverse of to_dict; missing or unknown keys raise ValueError naming them."""
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in d]
        unknown = sorted(set(d) - set(names))
        if missing or unknown:
            raise ValueError(f"CSI dict: missing keys {missing}, unknown keys {unknown}")
        return cls(**{n: d[n] for n in names})


def serialization_s(nbytes: int, rate_mbps: float, per: float) -> float:
    """Expected time to carry nbytes at rate_mbps with packet error rate per: S / (R (1 - PER)), s."""
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    return nbytes * 8 / (rate_mbps * 1e6 * (1 - per))


def _rate_feature(rate_mbps: float) -> float:
    lo, hi = math.log10(RATE_LO_MBPS), math.log10(RATE_HI_MBPS)
    x = (math.log10(rate_mbps) - lo) / (hi - lo) if math.isfinite(rate_mbps) else 1.0
    return min(max(x, 0.0), 1.0)


def _rate_score(goodput_mbps: float) -> float:
    return 1.0 if math.isinf(goodput_mbps) else goodput_mbps / (goodput_mbps + RATE_HALF_MBPS)

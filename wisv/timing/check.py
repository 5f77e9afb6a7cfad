"""A prediction's check against what it predicted: decayed measured over predicted seconds, as pure functions.

``auto`` predicts two costs per token before each round (wisv/timing/handover.py): speculation's and the edge's
alone.  Each side's rounds then measure what the prediction was for: ``check_round`` keeps a side's decayed measured
seconds and the seconds its uncorrected predictions gave for the same tokens, and ``Ratio.factor`` corrects the
side's next prediction by their ratio.  ``StopGain`` keeps what the speculative rounds right after a lookup stop
committed (protocols/edge_run.py), which decides whether the next run is given the stop
(wisv/timing/handover.py ``stop_pays``).
"""
from __future__ import annotations

from dataclasses import dataclass

CHECK_DECAY = 0.8  # each round's weight of a side's measured and predicted seconds before it
CHECK_BOUNDS = (0.5, 2.0)  # a side's correction stays within these factors


@dataclass(frozen=True)
class Ratio:
    """A side's decayed measured seconds and the seconds its (uncorrected) predictions gave for the same tokens."""

    measured_s: float = 0.0  # decayed seconds its rounds took, request to reply
    predicted_s: float = 0.0  # decayed predicted seconds per token times the tokens those rounds committed

    @property
    def factor(self) -> float:
        """Measured over predicted, within ``CHECK_BOUNDS``; 1 before any round."""
        if self.predicted_s <= 0:
            return 1.0
        lo, hi = CHECK_BOUNDS
        return min(hi, max(lo, self.measured_s / self.predicted_s))


def check_round(r: Ratio, predicted_s_per_token: float, measured_s: float, tokens: int,
                decay: float = CHECK_DECAY) -> Ratio:
    """The side's ratio after a round that committed ``tokens`` in ``measured_s`` where its uncorrected prediction
    was ``predicted_s_per_token`` (a round that committed nothing, or was not timed, leaves it)."""
    if not 0 <= decay < 1:
        raise ValueError(f"need decay in [0, 1), got {decay}")
    if tokens < 1 or measured_s <= 0 or predicted_s_per_token <= 0:
        return r
    return Ratio(decay * r.measured_s + measured_s, decay * r.predicted_s + predicted_s_per_token * tokens)


@dataclass(frozen=True)
class StopGain:
    """Decayed tokens committed and seconds taken (request to verdict) by the speculative rounds that followed a
    lookup stop, and their count."""

    tokens: float = 0.0  # decayed tokens those rounds committed
    seconds: float = 0.0  # decayed seconds they took, request to verdict
    rounds: float = 0.0  # decayed count of those rounds

    @property
    def mean_tokens(self) -> float | None:
        """Tokens such a round commits, decayed mean; None before any."""
        return self.tokens / self.rounds if self.rounds > 0 else None

    @property
    def mean_s(self) -> float | None:
        """Seconds such a round takes, decayed mean; None before any."""
        return self.seconds / self.rounds if self.rounds > 0 else None


def learn_stop_gain(g: StopGain, tokens: int, seconds: float, decay: float = CHECK_DECAY) -> StopGain:
    """The gain after one more speculative round that followed a lookup stop: ``tokens`` committed in ``seconds``."""
    if not 0 <= decay < 1 or tokens < 0 or not seconds >= 0:
        raise ValueError(f"need decay in [0, 1), tokens >= 0 and seconds >= 0, got {decay}, {tokens}, {seconds}")
    return StopGain(decay * g.tokens + tokens, decay * g.seconds + seconds, decay * g.rounds + 1.0)

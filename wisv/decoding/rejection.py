"""WISP rejection predictor (UE side): draft-logit features, labels from verification outcomes, a small MLP,
the stop-at-first-predicted-rejection rule and wasted drafting time (SPEC WISP "WDT").

Features of each drafted token, from the drafter's logits at that step: confidence (max probability),
entropy (nats), top-1 minus top-2 probability margin, and the standard deviation of the logits.
Labels come from logged rounds: the accepted tokens are 0 and the first rejected token is 1; tokens
after the first rejection never reached verification on the greedy path and are excluded.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from wisv.tasks.evaluate import recall_fpr

FEATURES = ("confidence", "entropy", "margin", "logit_std")


def draft_features(logits: torch.Tensor) -> torch.Tensor:
    """logits [K, V] -> features [K, 4] (confidence, entropy, margin, logit std)."""
    logits = logits.float()
    p = torch.softmax(logits, dim=-1)  # [K, V]
    top2 = torch.topk(p, 2, dim=-1).values  # [K, 2]
    entropy = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
    return torch.stack([top2[:, 0], entropy, top2[:, 0] - top2[:, 1], logits.std(-1)], dim=-1)


def round_labels(drafted: int, accepted: int) -> list[int]:
    """Labels of one round's drafted tokens that verification decided: [0] * accepted + [1] if one was rejected."""
    if not 0 <= accepted <= drafted:
        raise ValueError(f"need 0 <= accepted <= drafted, got {accepted}, {drafted}")
    return [0] * accepted + ([1] if accepted < drafted else [])


def stop_length(reject_probs: list[float], threshold: float, k_max: int) -> int:
    """Tokens to send: draft until the first token predicted rejected (that token is not sent; the edge's
    correction replaces it), at least one and at most k_max."""
    for i, p in enumerate(reject_probs[:k_max]):
        if p >= threshold:
            return max(1, i)
    return min(len(reject_probs), k_max)


DEFAULT_THRESHOLD = 0.5  # a predictor saved without a chosen operating point


def choose_threshold(probs: list[list[float]], accepted: list[int], k_max: int, tau_d_s: float, round_s: float,
                     grid: tuple[float, ...] = tuple(i / 20 for i in range(1, 20)) + (0.98,)) -> tuple[float, dict]:
    """The operating point: the threshold of ``grid`` that minimises the modelled time per committed token over
    logged rounds, ``sum(sent * tau_d + round_s) / sum(min(accepted, sent) + 1)``, where ``sent`` is what
    stop-at-first-predicted-rejection would send and ``round_s`` a round's fixed cost (RTT + verification).
    A low threshold cuts more waste but ends more blocks on tokens the target would have accepted, and each
    such stop costs one more round.  Returns (threshold, {threshold: modelled seconds per token}) (pure)."""
    if not probs or len(probs) != len(accepted):
        raise ValueError(f"need one accepted count per round, got {len(probs)} rounds and {len(accepted)} counts")
    cost = {}
    for th in grid:
        sent = [stop_length(p, th, k_max) for p in probs]
        tokens = sum(min(a, s) + 1 for a, s in zip(accepted, sent))
        cost[th] = sum(s * tau_d_s + round_s for s in sent) / tokens
    return min(cost, key=lambda th: (cost[th], th)), cost


def wasted_drafting(drafted: int, accepted: int, tau_d_s: float) -> tuple[int, float]:
    """W = max(0, K - L) wasted draft tokens and T_wdt = tau_d * W seconds."""
    w = max(0, drafted - accepted)
    return w, tau_d_s * w


class RejectionPredictor(nn.Module):
    """Standardised 4 features -> hidden -> p(rejected)."""

    def __init__(self, hidden: int = 16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(len(FEATURES), hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.register_buffer("mean", torch.zeros(len(FEATURES)))
        self.register_buffer("std", torch.ones(len(FEATURES)))
        self.register_buffer("threshold", torch.tensor(DEFAULT_THRESHOLD))  # operating point (choose_threshold)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std).squeeze(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, 4] -> p(rejected) [N]."""
        return torch.sigmoid(self.logits(x))


@dataclass(frozen=True)
class PredictorMetrics:
    """Held-out quality at a threshold: recall on rejected tokens, false-positive rate on accepted ones."""

    recall: float  # rejected tokens flagged / rejected tokens
    fpr: float  # accepted tokens flagged / accepted tokens
    n_rejected: int
    n_accepted: int


def evaluate_predictor(model: RejectionPredictor, x: torch.Tensor, y: torch.Tensor,
                       threshold: float) -> PredictorMetrics:
    with torch.no_grad():
        flag = model(x) >= threshold
    recall, fpr = recall_fpr(flag, y)
    return PredictorMetrics(recall, fpr, int((y == 1).sum()), int((y == 0).sum()))


def train_predictor(x: torch.Tensor, y: torch.Tensor, epochs: int = 200, lr: float = 1e-2, hidden: int = 16,
                    seed: int = 0) -> RejectionPredictor:
    """Full-batch Adam on class-balanced BCE; deterministic for a seed."""
    if not (y == 1).any() or not (y == 0).any():
        raise ValueError("need both accepted (0) and rejected (1) tokens to train the predictor")
    torch.manual_seed(seed)
    model = RejectionPredictor(hidden)
    model.mean.copy_(x.mean(0))
    model.std.copy_(x.std(0).clamp_min(1e-6))
    pos = float((y == 1).sum())
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor((len(y) - pos) / pos))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        opt.zero_grad()
        loss = loss_fn(model.logits(x), y.float())
        loss.backward()
        opt.step()
    return model.eval()


def split_rounds(n_rounds: int, test_frac: float, seed: int) -> np.ndarray:
    """Boolean mask [n_rounds] of held-out rounds (whole rounds, so a round's tokens stay together)."""
    rng = np.random.default_rng(seed)
    return rng.random(n_rounds) < test_frac


def save_predictor(model: RejectionPredictor, path: str) -> None:
    """Weights and standardisation as safetensors (hidden width is read back from the shapes)."""
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, path)


def load_predictor(path: str) -> RejectionPredictor:
    """A predictor written by save_predictor (or scripts/train/rejection_predictor.py); ValueError when not one."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    try:
        state = load_file(path)
        model = RejectionPredictor(hidden=int(state["net.0.weight"].shape[0]))
        state.setdefault("threshold", torch.tensor(DEFAULT_THRESHOLD))  # saved before it carried one
        model.load_state_dict(state)
    except (OSError, KeyError, RuntimeError, SafetensorError) as e:
        raise ValueError(f"{path}: not a rejection predictor ({e}); "
                         "train one with scripts/train/rejection_predictor.py") from e
    return model.eval()


def confidence_stop(min_top_prob: float) -> Callable[[torch.Tensor], bool]:
    """The DraftSession.draft ``stop`` callback of ``transformers``' assisted generation (its
    ``assistant_confidence_threshold``): True when the drafter's top-1 probability for the token is below
    ``min_top_prob`` (features as ``draft_features``).  Unlike transformers' rule, the unsure token is not sent."""
    if not 0.0 <= min_top_prob <= 1.0:
        raise ValueError(f"min_top_prob must be in [0, 1], got {min_top_prob}")
    return lambda features: float(features[0]) < min_top_prob


def stop_rule(model: RejectionPredictor, threshold: float | None = None):
    """The DraftSession.draft ``stop`` callback: True when the token is predicted rejected (p >= threshold;
    None: the predictor's own operating point)."""
    threshold = float(model.threshold) if threshold is None else threshold
    def stop(features: torch.Tensor) -> bool:
        with torch.no_grad():
            return float(model(features[None])[0]) >= threshold
    return stop

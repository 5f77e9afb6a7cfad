"""The edge's WDT predictor: each pending block's expected accepted length (``g_i``) and wasted draft tokens.

WISP's rejection predictor runs on the UE and stops drafting at the first predicted rejection; the edge's scheduler
(wisv/serving/scheduler.py, Algorithm 1: ``U_i = g_i / v_i``) needs ``g_i``, the tokens a pending request will commit.
Without a predictor it takes the session's running mean.  This predicts it per block from what the edge holds when the
DRAFT arrives: the block length K, the session's history (rounds, accepted and drafted so far), and, when the DRAFT
carries them (``features``: per token the drafter's max probability, entropy and top-1 minus top-2 margin), a
summary of the drafter's confidence:

- ``conf_survival`` = ``sum_j prod_{i<=j} c_i``, the accepted length expected if each max probability ``c_i`` were the
  chance of acceptance;
- ``first_doubt`` = the tokens before the first whose max probability is below 0.5;
- ``conf_min``, ``entropy_mean``, ``margin_mean``.

The model is a ridge regression of the accepted length on those features (one per block; clipped to [0, K]); the
committed tokens are ``g = accepted + 1`` and the wasted ones ``K - accepted`` (WISP's WDT).  It is trained from round
records (wisv.records.RoundRow: ``drafted``, ``accepted`` and the ``draft_*`` columns the UE fills from the same
features), so the testbed's own runs train it.  ``stop_depth`` is the depth the edge may suggest in a VERDICT for the
session's next block.  Pure functions; ``scripts/train/wdt_predictor.py`` trains and evaluates it.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

DOUBT = 0.5  # max probability below which a token is "in doubt" (first_doubt)
CONF_COLUMNS = ("draft_conf_survival", "draft_first_doubt", "draft_conf_min", "draft_entropy_mean",
                "draft_margin_mean")  # RoundRow columns of a block's confidence summary
FEATURES = ("bias", "k", "hist_accepted", "hist_frac_k", "hist_full", *CONF_COLUMNS)  # model inputs, in order
NO_FEATURES = FEATURES[:5]  # what is known without draft features


def confidence_summary(features: np.ndarray) -> dict[str, float]:
    """features [K, 3] (max probability, entropy, margin) -> the CONF_COLUMNS of the block."""
    f = np.asarray(features, dtype=np.float64)
    if f.ndim != 2 or f.shape[1] < 3 or not len(f):
        raise ValueError(f"need draft features [K, 3] with K >= 1, got shape {f.shape}")
    c = np.clip(f[:, 0], 0.0, 1.0)
    doubt = np.flatnonzero(c < DOUBT)
    return {"draft_conf_survival": float(np.cumprod(c).sum()),
            "draft_first_doubt": float(doubt[0] if doubt.size else len(c)), "draft_conf_min": float(c.min()),
            "draft_entropy_mean": float(f[:, 1].mean()), "draft_margin_mean": float(f[:, 2].mean())}


@dataclass(frozen=True)
class SessionHistory:
    """What the edge knows of a session's earlier rounds."""

    rounds: int = 0
    drafted: int = 0  # draft tokens verified so far
    accepted: int = 0  # of those, accepted
    full: int = 0  # rounds whose whole block was accepted
    committed: int = 0  # tokens committed so far (accepted + corrections/bonuses)


def update_session(h: SessionHistory, drafted: int, accepted: int, committed: int) -> SessionHistory:
    """The history after one verdict."""
    if not 0 <= accepted <= drafted:
        raise ValueError(f"need 0 <= accepted <= drafted, got {accepted}, {drafted}")
    return SessionHistory(h.rounds + 1, h.drafted + drafted, h.accepted + accepted, h.full + (accepted == drafted),
                          h.committed + committed)


def running_mean_g(h: SessionHistory, k: int) -> float:
    """The baseline g_i: the session's mean committed tokens per round, K / 2 + 1 before its first round (as the
    edge's batcher had it)."""
    return h.committed / h.rounds if h.rounds else k / 2 + 1


def block_features(k: int, h: SessionHistory, conf: dict[str, float] | None) -> np.ndarray:
    """[len(FEATURES)] inputs of one pending block (the confidence ones 0 without draft features)."""
    prior = 0.5  # accepted fraction before any round
    frac = (h.accepted + prior) / (h.drafted + 1.0)
    hist_acc = h.accepted / h.rounds if h.rounds else k * prior
    full = (h.full + prior) / (h.rounds + 1.0)
    base = [1.0, float(k), hist_acc, frac * k, full * k]
    return np.array(base + [float(conf[c]) if conf else 0.0 for c in CONF_COLUMNS])


@dataclass
class WDTPredictor:
    """Ridge coefficients over FEATURES (``coef_conf``, for blocks with draft features) and over NO_FEATURES
    (``coef_base``, without)."""

    coef_conf: list[float]
    coef_base: list[float]
    meta: dict = field(default_factory=dict)  # training data, held-out metrics

    def accepted(self, k: int, h: SessionHistory, conf: dict[str, float] | None) -> float:
        """Predicted accepted tokens of a K-token block, in [0, K]."""
        x = block_features(k, h, conf)
        y = x @ np.asarray(self.coef_conf) if conf else x[:len(NO_FEATURES)] @ np.asarray(self.coef_base)
        return float(np.clip(y, 0.0, k))

    def g(self, k: int, h: SessionHistory, conf: dict[str, float] | None) -> float:
        """g_i: predicted committed tokens (accepted + the correction or bonus token)."""
        return self.accepted(k, h, conf) + 1.0

    def wasted(self, k: int, h: SessionHistory, conf: dict[str, float] | None) -> float:
        """Predicted wasted draft tokens of the block, K - accepted."""
        return k - self.accepted(k, h, conf)

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(asdict(self) | {"features": list(FEATURES)}, indent=1))
        return p

    @classmethod
    def load(cls, path: str | Path) -> WDTPredictor:
        try:
            d = json.loads(Path(path).read_text())
            if d.pop("features", list(FEATURES)) != list(FEATURES):
                raise ValueError("its features differ from this version's")
            pred = cls(**d)
        except (OSError, json.JSONDecodeError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: not a WDT predictor ({e}); train one with scripts/train/wdt_predictor.py") from e
        if len(pred.coef_conf) != len(FEATURES) or len(pred.coef_base) != len(NO_FEATURES):
            raise ValueError(f"{path}: coefficient counts {len(pred.coef_conf)}/{len(pred.coef_base)}, expected "
                             f"{len(FEATURES)}/{len(NO_FEATURES)}")
        return pred


def stop_depth(pred: WDTPredictor, h: SessionHistory, k_max: int) -> int:
    """The depth to suggest for the session's next block (for a UE without its own predictor): one past the accepted
    length predicted for a ``k_max`` block from the history alone (the next block is not drafted yet), i.e. draft up to
    where the edge expects the first rejection, as WISP's stop rule does, in [1, k_max]."""
    return int(min(k_max, max(1, round(pred.accepted(k_max, h, None)) + 1)))


def history_frame(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per round of each prompt (in order): the SessionHistory before it, as columns h_rounds .. h_committed."""
    rows = []
    for _, g in rounds.groupby("prompt_id", sort=False):
        h = SessionHistory()
        for r in g.sort_values("round").itertuples():
            rows.append({"_index": r.Index, **{f"h_{k}": v for k, v in asdict(h).items()}})
            committed = int(r.committed) if pd.notna(r.committed) else int(r.accepted) + 1
            h = update_session(h, int(r.drafted), int(r.accepted), committed)
    return pd.DataFrame(rows).set_index("_index").loc[rounds.index]


def design(rounds: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X [N, F], y accepted [N], baseline g [N], has draft features [N]) of round records."""
    hist = history_frame(rounds)
    xs, base, has = [], [], []
    for (_, r), (_, hr) in zip(rounds.iterrows(), hist.iterrows()):
        h = SessionHistory(*(int(hr[f"h_{k}"]) for k in ("rounds", "drafted", "accepted", "full", "committed")))
        conf = {c: float(r[c]) for c in CONF_COLUMNS} if all(c in r and pd.notna(r[c]) for c in CONF_COLUMNS) \
            else None
        xs.append(block_features(int(r["drafted"]), h, conf))
        base.append(running_mean_g(h, int(r["drafted"])))
        has.append(conf is not None)
    return np.stack(xs), rounds["accepted"].to_numpy(float), np.array(base), np.array(has)


def fit_ridge(x: np.ndarray, y: np.ndarray, ridge: float = 1e-2) -> np.ndarray:
    """Ridge least squares (the bias column unpenalised) on standardised columns; coefficients in raw units."""
    mu, sd = x.mean(0), x.std(0)
    sd[sd < 1e-9] = 1.0
    mu[0], sd[0] = 0.0, 1.0  # the bias column
    z = (x - mu) / sd
    pen = ridge * len(y) * np.eye(x.shape[1])
    pen[0, 0] = 0.0
    w = np.linalg.solve(z.T @ z + pen, z.T @ y)
    coef = w / sd
    coef[0] -= float((mu[1:] / sd[1:]) @ w[1:])
    return coef


def fit_wdt(rounds: pd.DataFrame, ridge: float = 1e-2) -> WDTPredictor:
    """Fit both coefficient sets on round records (rows with draft features for coef_conf)."""
    x, y, _, has = design(rounds)
    if not has.any():
        raise ValueError("no round has draft features (draft_* columns): run the UE with --draft-features")
    return WDTPredictor(fit_ridge(x[has], y[has], ridge).tolist(),
                        fit_ridge(x[:, :len(NO_FEATURES)], y, ridge).tolist(), {"train_rounds": int(len(y))})


def evaluate(pred: WDTPredictor, rounds: pd.DataFrame) -> dict[str, float]:
    """On (held-out) round records: MAE of g_i, predicted vs the running mean, and WDT per round."""
    x, y, base, has = design(rounds)
    k = rounds["drafted"].to_numpy(float)
    acc = np.array([np.clip(xi @ np.asarray(pred.coef_conf) if h
                            else xi[:len(NO_FEATURES)] @ np.asarray(pred.coef_base), 0, ki)
                    for xi, h, ki in zip(x, has, k)])
    g_true = y + 1
    mae_pred, mae_mean = float(np.abs(acc + 1 - g_true).mean()), float(np.abs(base - g_true).mean())
    hist_only = np.clip(x[:, :len(NO_FEATURES)] @ np.asarray(pred.coef_base), 0, k)
    return {"rounds": int(len(y)), "mae_g_predicted": mae_pred, "mae_g_running_mean": mae_mean,
            "mae_g_history_only": float(np.abs(hist_only + 1 - g_true).mean()),
            "mae_reduction_pct": 100 * (1 - mae_pred / mae_mean) if mae_mean > 0 else float("nan"),
            "wdt_tokens_per_round": float((k - y).mean()), "wdt_predicted_per_round": float((k - acc).mean()),
            "wdt_mae_tokens": float(np.abs((k - acc) - (k - y)).mean())}


def split_prompts(prompt_ids: Sequence[str], test_frac: float, seed: int) -> set[str]:
    """Held-out prompts (whole prompts, so no session is split between training and test)."""
    ids = sorted(set(prompt_ids))
    rng = np.random.default_rng(seed)
    return {p for p in ids if rng.random() < test_frac}

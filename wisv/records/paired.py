"""Paired comparison of two methods on the same prompts (pure: numpy, scipy, pandas).

Two methods that answered the same prompts are compared prompt by prompt, not by two means: a prompt is *lost*
when the baseline got it right and the method got it wrong, *gained* the other way round (McNemar's discordant
pairs).  The accuracy delta gets a percentile bootstrap interval over prompts (resampled in pairs), and the exact
McNemar p-value is the two-sided binomial test of ``lost`` against ``lost + gained`` at 1/2.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest


@dataclass(frozen=True)
class PairedAccuracy:
    """Method against baseline on n shared prompts."""

    n: int  # prompts both methods answered
    lost: int  # right under the baseline, wrong under the method
    gained: int  # wrong under the baseline, right under the method
    delta: float  # accuracy(method) - accuracy(baseline), in [-1, 1]
    ci_low: float  # bootstrap lower bound of delta
    ci_high: float  # bootstrap upper bound of delta
    mcnemar_p: float  # exact two-sided McNemar p-value (1.0 with no discordant pair)

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def bootstrap_delta_ci(base: np.ndarray, new: np.ndarray, level: float = 0.95, n_boot: int = 10_000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(new) - mean(base), resampling prompts in pairs (seeded: reproducible).
    ``base``, ``new``: [n] 0/1 per prompt.  (nan, nan) for no prompt."""
    diff = np.asarray(new, float) - np.asarray(base, float)  # [n]
    if len(diff) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(n_boot, len(diff)))  # [B, n]
    means = diff[idx].mean(axis=1)  # [B]
    alpha = (1 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def paired_accuracy(base: np.ndarray, new: np.ndarray, level: float = 0.95, n_boot: int = 10_000,
                    seed: int = 0) -> PairedAccuracy:
    """Lost, gained, the delta, its bootstrap interval and McNemar's p for per-prompt correctness [n] (0/1)."""
    b, m = np.asarray(base, bool), np.asarray(new, bool)
    if b.shape != m.shape:
        raise ValueError(f"paired accuracy needs the same prompts: {b.shape} vs {m.shape}")
    lost, gained = int((b & ~m).sum()), int((~b & m).sum())
    lo, hi = bootstrap_delta_ci(b, m, level, n_boot, seed)
    p = binomtest(lost, lost + gained, 0.5).pvalue if lost + gained else 1.0
    delta = float(m.mean() - b.mean()) if len(b) else float("nan")
    return PairedAccuracy(len(b), lost, gained, delta, lo, hi, float(p))


def paired_frame(base: pd.DataFrame, new: pd.DataFrame, key: str = "prompt_id",
                 col: str = "correct") -> tuple[np.ndarray, np.ndarray]:
    """The two methods' ``col`` on the prompts both have, aligned by ``key`` (rows with no value dropped)."""
    both = base[[key, col]].dropna().merge(new[[key, col]].dropna(), on=key, suffixes=("_base", "_new"))
    return both[f"{col}_base"].to_numpy(bool), both[f"{col}_new"].to_numpy(bool)


RELATIVE = ("aal", "rounds_per_prompt", "latency_s")  # the measures whose change the comparison gives in percent
RELATIVE_COLUMNS = ["group", "protocol", "against", "prompts", *(f"{m}_change_pct" for m in RELATIVE), "accuracy_base",
                    "accuracy_new", "lost", "gained", "delta_ci_low", "delta_ci_high", "fluency_ppl_ratio",
                    "fluency_ext_ppl_ratio", "drift_rouge_l"]  # the comparison's shown columns, in order


def relative_rows(by_group: pd.DataFrame, paired: pd.DataFrame | None) -> pd.DataFrame:
    """Per group and method (not the first): each of RELATIVE as a % change from the first method, its fluency and
    ROUGE-L against the target, and the paired accuracy (lost, gained, the delta's interval; NaN where the prompts
    have no answer to check, so the run wrote no ``paired``).  ``by_group`` and ``paired``: a run's
    summary_by_group.csv and paired.csv."""
    protocols = list(dict.fromkeys(by_group["protocol"]))
    key = by_group.set_index(["protocol", "group"])
    pairs = paired.set_index(["protocol", "group"]) if paired is not None and len(paired) else None
    rows = []
    for proto in protocols[1:]:
        for g in dict.fromkeys(by_group.loc[by_group["protocol"] == proto, "group"]):
            new, base = key.loc[(proto, g)], key.loc[(protocols[0], g)]
            pa = pairs.loc[(proto, g)] if pairs is not None and (proto, g) in pairs.index else None
            acc = {"lost": pa["lost"], "gained": pa["gained"], "delta_ci_low": pa["ci_low"],
                   "delta_ci_high": pa["ci_high"]} if pa is not None else dict.fromkeys(
                       ("lost", "gained", "delta_ci_low", "delta_ci_high"), float("nan"))
            rows.append({"group": g, "protocol": proto, "against": protocols[0], "prompts": int(new["prompts"]),
                         **{f"{m}_change_pct": 100 * (new[m] / base[m] - 1) for m in RELATIVE},
                         **{f"{m}_{w}": x[m] for m in RELATIVE for w, x in (("base", base), ("new", new))},
                         "accuracy_base": base["accuracy"], "accuracy_new": new["accuracy"], **acc,
                         **{m: new.get(m, float("nan")) for m in ("fluency_ppl_ratio", "fluency_ext_ppl_ratio",
                                                                  "drift_rouge_l")}})
    return pd.DataFrame(rows, columns=None if rows else RELATIVE_COLUMNS)


RUN_VS_RUN_COLUMNS = ["protocol", "prompts", "identical_outputs", "aal_base", "aal_new", "rounds_change_pct",
                      "latency_change_pct", "latency_ci_low_pct", "latency_ci_high_pct", "faster", "slower"]


def run_vs_run(base: pd.DataFrame, new: pd.DataFrame, n_boot: int = 10_000, seed: int = 0) -> dict:
    """One protocol in two runs on the same prompts (say, two drafters), prompt by prompt: outputs identical, AAL of
    each (accepted draft tokens per round), the % change of total rounds and of mean latency with a paired bootstrap
    95% interval of the latter (prompts resampled in pairs), and the prompts faster and slower.  ``base``, ``new``:
    a run's outputs.jsonl rows (prompt_id, tokens, rounds, t_e2e_s, acceptance_histogram)."""
    both = base.merge(new, on="prompt_id", suffixes=("_b", "_n"))
    if both.empty:
        raise ValueError("the two runs share no prompt")
    lat = paired_time_change(both["t_e2e_s_b"].to_numpy(float), both["t_e2e_s_n"].to_numpy(float), n_boot, seed)
    return {"prompts": len(both), "identical_outputs": int((both["tokens_b"] == both["tokens_n"]).sum()),
            "aal_base": _aal(both, "_b"), "aal_new": _aal(both, "_n"),
            "rounds_change_pct": 100 * (both["rounds_n"].sum() / both["rounds_b"].sum() - 1),
            "latency_change_pct": lat["change_pct"], "latency_ci_low_pct": lat["ci_low_pct"],
            "latency_ci_high_pct": lat["ci_high_pct"], "faster": lat["faster"], "slower": lat["slower"]}


def paired_time_change(base: np.ndarray, new: np.ndarray, n_boot: int = 10_000, seed: int = 0) -> dict:
    """Two methods' times [n] on the same prompts: the % change of the total, its paired bootstrap 95% interval
    (prompts resampled in pairs; seeded) and the prompts faster and slower under ``new``."""
    b, m = np.asarray(base, float), np.asarray(new, float)
    if b.shape != m.shape or not len(b):
        raise ValueError(f"paired times need the same prompts, at least one: {b.shape} vs {m.shape}")
    idx = np.random.default_rng(seed).integers(0, len(b), size=(n_boot, len(b)))  # [B, n]
    ratio = m[idx].sum(axis=1) / b[idx].sum(axis=1)  # [B]
    return {"change_pct": 100 * (m.sum() / b.sum() - 1), "ci_low_pct": 100 * (float(np.quantile(ratio, 0.025)) - 1),
            "ci_high_pct": 100 * (float(np.quantile(ratio, 0.975)) - 1),
            "faster": int((m < b).sum()), "slower": int((m > b).sum())}


def _aal(df: pd.DataFrame, sfx: str) -> float:
    """Accepted draft tokens per round over the prompts, from each prompt's histogram (index = tokens accepted)."""
    hist = [np.asarray(h, float) for h in df[f"acceptance_histogram{sfx}"]]
    return float(sum((h * np.arange(len(h))).sum() for h in hist) / sum(h.sum() for h in hist))


SPEEDUP_COLUMNS = ("speedup_vs_server", "speedup_ci_low", "speedup_ci_high")  # a report's speed-up over server-only


def paired_speedup(base: pd.DataFrame, new: pd.DataFrame, n_boot: int = 10_000, seed: int = 0) -> dict:
    """``new``'s speed-up over ``base`` on the prompts both finished: base's total end-to-end time over new's, with
    the paired bootstrap 95% interval of ``paired_time_change`` turned into a speed-up (1 / ratio is monotone, so the
    interval's ends swap).  ``base``, ``new``: a run's outputs (prompt_id, t_e2e_s); NaN with no shared prompt."""
    both = base[["prompt_id", "t_e2e_s"]].dropna().merge(new[["prompt_id", "t_e2e_s"]].dropna(), on="prompt_id",
                                                          suffixes=("_b", "_n"))
    if both.empty:
        return dict.fromkeys(SPEEDUP_COLUMNS, float("nan"))
    ch = paired_time_change(both["t_e2e_s_b"].to_numpy(float), both["t_e2e_s_n"].to_numpy(float), n_boot, seed)
    speed = [100 / (100 + ch[k]) for k in ("change_pct", "ci_high_pct", "ci_low_pct")]
    return dict(zip(SPEEDUP_COLUMNS, speed))

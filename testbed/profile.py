"""``python -m testbed.profile``: time batches of cold, warm and mixed verification requests, fit WISP's estimator.

The batches run on the actual target and device; the WISP verification-time estimator (wisv/serving/estimator.py) is
fitted to them and its profile written.

Each sample builds a batch on the batched engine (wisv/serving/batchverify.py): *warm* requests have a cached
prefix (16..--max-prefix tokens, prefilled untimed) and feed K + 1 tokens; *cold* requests feed a whole
prompt (8..--max-prompt tokens) plus K.  The timed call is one ``verify`` of the batch.  Each of the ``--repeats``
timings of a batch comes from a separate pass over all batches (the batch rebuilt identically from its own seed, in a
fresh order per pass), so a slow spell of a shared VM, which lasts seconds, hits one repeat of many batches rather than
every repeat of a few.  The batch's time is the minimum of its repeats by default
(``--stat``): on a shared VM other work only ever adds time, so the minimum is the cost of the batch itself;
the profile also reports the held-out errors against the median repeat, and the held-out R^2/MAPE had only
the first 1, 2, ... repeats been used (how many repeats the machine needed).  Batches are split
train/test (--test-frac, seeded), fitted by OLS with bootstrap CIs; the JSON profile holds the coefficients,
CIs, train and held-out R^2 / MAE / MAPE, and the raw samples go to a CSV beside it.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

import config
from testbed.common.machine import machine_info
from wisv.models.loader import builtin_paths, default_dtype, load_model
from wisv.pairs import PAIR_NAMES, apply_pair
from wisv.serving.batchverify import BatchVerifier, request_shape
from wisv.serving.engine import VerifyRequest
from wisv.serving.estimator import batch_features, fit_metrics, fit_ols, fit_profile

STATS = ("min", "median")  # how a batch's repeats become its time


@dataclass
class ProfileConfig:
    """What to time and where to write the fitted profile."""

    pair: str | None = field(default=None, metadata={
        "choices": PAIR_NAMES})  # named pair (python -m wisv.pairs build NAME; a plugin's); --drafter/--target win
    target: str | None = None  # local HF target directory (None: built-in toy target)
    device: str = "cpu"  # torch device
    batches: int = 150  # timed batches (>= 2)
    max_batch: int = 6  # requests per batch: 1..max_batch
    max_prefix: int = 512  # warm requests: cached prefix 16..max_prefix tokens
    max_prompt: int = 256  # cold requests: prompt 8..max_prompt tokens
    max_draft_len: int = 16  # K: 1..max_draft_len tokens
    test_frac: float = 0.25  # held-out fraction of batches
    repeats: int = 7  # each batch is timed this many times, >= 1 (rolled back in between)
    stat: str = field(default="min", metadata={"choices": STATS})  # repeats' statistic (min: others only add time)
    n_boot: int = 200  # bootstrap resamples for the CIs
    seed: int = 0  # sampling and split seed
    out: str = "results/verify_profile.json"  # the profile; samples go to <out stem>_samples.csv


def sample_batch(rng: np.random.Generator, cfg: ProfileConfig, kind: str) -> list[tuple[int, int]]:
    """[(cached, K)] per request: kind 'warm' (cached > 0), 'cold' (cached 0, prompt as 'K' + prompt) or 'mixed'."""
    reqs = []
    for _ in range(int(rng.integers(1, cfg.max_batch + 1))):
        warm = kind == "warm" or (kind == "mixed" and rng.random() < 0.5)
        k = int(rng.integers(1, cfg.max_draft_len + 1))
        reqs.append((int(rng.integers(16, cfg.max_prefix + 1)), k) if warm else (0, k))
    return reqs


@dataclass
class Prepared:
    """One batch ready to time: its engine with the warm prefixes cached, the requests, and the state to restore."""

    eng: BatchVerifier
    batch: list[VerifyRequest]
    cached: list[int]
    new: list[int]
    block: list[int]  # K + 1 per request: the positions the batched pass feeds
    before: dict[str, int]


def prepare_batch(target, reqs: list[tuple[int, int]], rng: np.random.Generator, cfg: ProfileConfig) -> Prepared:
    """Build the sessions of one batch (warm prefixes prefilled untimed)."""
    vocab = int(target.config.vocab_size)
    eng, batch, shapes = BatchVerifier(target), [], []
    for i, (c, k) in enumerate(reqs):
        sid = f"r{i}"
        if c:  # warm: prompt of c + 1 tokens, cache covers c after one untimed round
            eng.open(sid, rng.integers(3, vocab, c).tolist())
            eng.verify([VerifyRequest(sid, [int(rng.integers(3, vocab))])])
            eng.commit(sid, 1, int(rng.integers(3, vocab)))
        else:
            eng.open(sid, rng.integers(3, vocab, int(rng.integers(8, cfg.max_prompt + 1))).tolist())
        batch.append(VerifyRequest(sid, rng.integers(3, vocab, k).tolist()))
        shapes.append(request_shape(eng.sessions[sid], k))
    cached, new, block = (list(col) for col in zip(*shapes))
    return Prepared(eng, batch, cached, new, block, {sid: st.cached_len for sid, st in eng.sessions.items()})


def time_once(p: Prepared) -> float:
    """One timed batched verify, then roll the caches back so the next timing does the same work."""
    t0 = time.perf_counter()
    p.eng.verify(p.batch)
    secs = time.perf_counter() - t0
    for sid, length in p.before.items():
        p.eng.rollback(sid, length)
    return secs


def run(cfg: ProfileConfig) -> dict:
    torch.set_num_threads(1)
    cfg = apply_pair(cfg, drafter=None)
    target = load_model(Path(cfg.target or builtin_paths()[1]), "target", cfg.device, default_dtype(cfg.device))
    rng = np.random.default_rng(cfg.seed)
    warm = prepare_batch(target, [(64, 4)], rng, cfg)
    for _ in range(3):  # warm-up (allocator, kernels)
        time_once(warm)
    kinds = [("cold", "warm", "mixed")[i % 3] for i in range(cfg.batches)]
    specs = [sample_batch(rng, cfg, kind) for kind in kinds]
    shape: list[tuple[list, list, list] | None] = [None] * cfg.batches
    times: list[list[float]] = [[] for _ in specs]
    with tqdm(total=cfg.batches * max(1, cfg.repeats), desc="profile batches x repeats") as bar:
        for r in range(max(1, cfg.repeats)):  # one pass over every batch per repeat, in a fresh order each time
            for i in np.random.default_rng([cfg.seed, r]).permutation(cfg.batches):
                p = prepare_batch(target, specs[i], np.random.default_rng([cfg.seed, int(i)]), cfg)
                assert shape[i] in (None, (p.cached, p.new, p.block)), "a batch must be rebuilt identically"
                shape[i] = (p.cached, p.new, p.block)
                times[i].append(time_once(p))
                bar.update(1)
    df = pd.DataFrame([{"kind": kind, "batch": len(sh[1]), "cached": sh[0], "new": sh[1], "block": sh[2],
                        "seconds": summarize_times(t, cfg.stat), "times_s": [round(x, 7) for x in t]}
                       for kind, sh, t in zip(kinds, shape, times)])
    x = np.stack([batch_features(c, n, b) for c, n, b in zip(df.cached, df.new, df.block)])
    test = np.random.default_rng(cfg.seed + 1).random(len(df)) < cfg.test_frac
    reps = np.array(times)  # [batches, repeats], unrounded
    prof = fit_profile(x, df.seconds.to_numpy(), test, cfg.n_boot, cfg.seed,
                       meta={"config": asdict(cfg), "machine": machine_info(), "device": cfg.device,
                             "batches_train": int((~test).sum()), "batches_test": int(test.sum()),
                             "torch": torch.__version__,
                             "by_repeats": repeats_needed(x, reps, test, cfg.stat)})
    # the same fit against each batch's *median* repeat: what a loaded machine sees
    prof.meta["test_vs_median"] = fit_metrics(np.median(reps[test], axis=1), x[test] @ prof.coef_vector())
    out = prof.save(cfg.out)
    out.with_name(out.stem + "_config.toml").write_text(config.to_toml(cfg, prof.meta["machine"]))
    df.assign(test=test).to_csv(out.with_name(out.stem + "_samples.csv"), index=False)
    _print(prof)
    return asdict(prof)


def summarize_times(times: list[float], stat: str) -> float:
    """The batch's time from its repeats: ``min`` (the undisturbed cost: on a shared VM interference only ever
    slows a run down) or ``median``."""
    if stat not in ("min", "median"):
        raise ValueError(f"stat must be min or median, not {stat!r}")
    return float(np.min(times) if stat == "min" else np.median(times))


def repeats_needed(x: np.ndarray, times: np.ndarray, test: np.ndarray, stat: str) -> list[dict]:
    """Held-out fit quality when only the first r repeats of every batch are used, r = 1..R (times [N, R])."""
    out = []
    for r in range(1, times.shape[1] + 1):
        y = np.array([summarize_times(t[:r], stat) for t in times])
        coef = fit_ols(x[~test], y[~test])
        out.append({"repeats": r, **fit_metrics(y[test], x[test] @ coef)})
    return out


def _print(prof) -> None:
    for k, v in prof.coef.items():
        print(f"{k:10s} {v:.4g}  (95% CI {prof.ci_lo[k]:.4g} .. {prof.ci_hi[k]:.4g})")
    for split in ("train", "test"):
        m = getattr(prof, split)
        if m:
            print(f"{split:5s} R^2 {m['r2']:.3f}  MAE {m['mae_s'] * 1e3:.3f} ms  MAPE {m['mape_pct']:.1f}%")
    m = prof.meta.get("test_vs_median")
    if m and prof.meta["config"]["stat"] != "median":
        print(f"test against each batch's median repeat: R^2 {m['r2']:.3f}  MAPE {m['mape_pct']:.1f}%")
    for row in prof.meta.get("by_repeats", []):
        print(f"  with {row['repeats']} repeat(s) per batch: held-out R^2 {row['r2']:.3f}  MAPE {row['mape_pct']:.1f}%")


def parse_args(argv: list[str] | None = None) -> ProfileConfig:
    ap = config.add_flags(argparse.ArgumentParser(prog="python -m testbed.profile",
                                                  description=__doc__.splitlines()[0]), ProfileConfig)
    cfg = config.parse(ProfileConfig, argv, ap)
    if cfg.repeats < 1 or cfg.batches < 2:
        ap.error("need --repeats >= 1 and --batches >= 2")
    return cfg


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))

"""``python -m testbed.profile``: time batches of cold, warm and mixed verification requests on the actual
target and device, fit the WISP verification-time estimator (wisv/estimator.py) and write its profile.

Each sample builds a batch on the batched engine (wisv/batchverify.py): *warm* requests have a cached
prefix (16..--max-prefix tokens, prefilled untimed) and feed K + 1 tokens; *cold* requests feed a whole
prompt (8..--max-prompt tokens) plus K.  The timed call is one ``verify`` of the batch, repeated ``--repeats`` times with the caches rolled back in
between; the median is kept (single timings on a small shared VM are noisy).  Batches are split
train/test (--test-frac, seeded), fitted by OLS with bootstrap CIs; the JSON profile holds the coefficients,
CIs, train and held-out R^2 / MAE / MAPE, and the raw samples go to a CSV beside it.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from wisv.batchverify import BatchVerifier, VerifyRequest
from wisv.estimator import batch_features, fit_profile
from wisv.models import builtin_paths, default_dtype, load_model


@dataclass
class ProfileConfig:
    """What to time and where to write the fitted profile."""

    target: str | None = None  # local HF target directory (None: built-in toy target)
    device: str = "cpu"  # torch device
    batches: int = 150  # timed batches
    max_batch: int = 6  # requests per batch: 1..max_batch
    max_prefix: int = 512  # warm requests: cached prefix 16..max_prefix tokens
    max_prompt: int = 256  # cold requests: prompt 8..max_prompt tokens
    max_draft_len: int = 16  # K: 1..max_draft_len
    test_frac: float = 0.25  # held-out fraction of batches
    repeats: int = 3  # each batch is timed this many times (rolled back in between); the median is kept
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


def time_batch(target, reqs: list[tuple[int, int]], rng: np.random.Generator, cfg: ProfileConfig) -> tuple[list, list, float]:
    """Build the sessions (warm prefixes prefilled untimed), time one batched verify; (cached, new, seconds)."""
    vocab = int(target.config.vocab_size)
    eng, batch, cached, new = BatchVerifier(target), [], [], []
    for i, (c, k) in enumerate(reqs):
        sid = f"r{i}"
        if c:  # warm: prompt of c + 1 tokens, cache covers c after one untimed round
            eng.open(sid, rng.integers(3, vocab, c).tolist())
            eng.verify([VerifyRequest(sid, [int(rng.integers(3, vocab))])])
            eng.commit(sid, 1, int(rng.integers(3, vocab)))
            c = eng.sessions[sid].cached_len
        else:
            eng.open(sid, rng.integers(3, vocab, int(rng.integers(8, cfg.max_prompt + 1))).tolist())
        st = eng.sessions[sid]
        batch.append(VerifyRequest(sid, rng.integers(3, vocab, k).tolist()))
        cached.append(c)
        new.append(len(st.seq) - st.cached_len + k)
    before = {sid: st.cached_len for sid, st in eng.sessions.items()}
    times = []
    for _ in range(max(1, cfg.repeats)):
        t0 = time.perf_counter()
        eng.verify(batch)
        times.append(time.perf_counter() - t0)
        for sid, length in before.items():  # roll back: the next repeat does the same work
            eng.rollback(sid, length)
    return cached, new, float(np.median(times))


def run(cfg: ProfileConfig) -> dict:
    torch.set_num_threads(1)
    target = load_model(Path(cfg.target or builtin_paths()[1]), "target", cfg.device, default_dtype(cfg.device))
    rng = np.random.default_rng(cfg.seed)
    time_batch(target, [(64, 4)], rng, cfg)  # warm-up (allocator, kernels)
    rows = []
    for i in tqdm(range(cfg.batches), desc="profile batches"):
        kind = ("cold", "warm", "mixed")[i % 3]
        cached, new, secs = time_batch(target, sample_batch(rng, cfg, kind), rng, cfg)
        rows.append({"kind": kind, "batch": len(new), "cached": cached, "new": new, "seconds": secs})
    df = pd.DataFrame(rows)
    x = np.stack([batch_features(c, n) for c, n in zip(df.cached, df.new)])
    test = np.random.default_rng(cfg.seed + 1).random(len(df)) < cfg.test_frac
    prof = fit_profile(x, df.seconds.to_numpy(), test, cfg.n_boot, cfg.seed,
                       meta={"config": asdict(cfg), "device": cfg.device, "batches_train": int((~test).sum()),
                             "batches_test": int(test.sum()), "torch": torch.__version__})
    out = prof.save(cfg.out)
    df.assign(test=test).to_csv(out.with_name(out.stem + "_samples.csv"), index=False)
    _print(prof)
    return asdict(prof)


def _print(prof) -> None:
    for k, v in prof.coef.items():
        print(f"{k:10s} {v:.4g}  (95% CI {prof.ci_lo[k]:.4g} .. {prof.ci_hi[k]:.4g})")
    for split in ("train", "test"):
        m = getattr(prof, split)
        if m:
            print(f"{split:5s} R^2 {m['r2']:.3f}  MAE {m['mae_s'] * 1e3:.3f} ms  MAPE {m['mape_pct']:.1f}%")


def parse_args(argv: list[str] | None = None) -> ProfileConfig:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = ProfileConfig()
    for name, default in asdict(d).items():
        kind = type(default) if default is not None else str
        ap.add_argument("--" + name.replace("_", "-"), type=kind, default=default)
    return ProfileConfig(**vars(ap.parse_args(argv)))


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))

"""Train the EAGLE-style feature head (wisv/decoding/featdraft.py) on the target's features of the distillation pool.

The pool: the target's own greedy generations of the training prompts (the toy pair's train split, or
``--prompts-file``), and the target's final-layer (post-norm) hidden states over each.  The head reads
[f_{p-1} ; e(x_p)] from the last prompt token on (the first feature zero, as a session's first block starts) and
predicts f_p; loss = smooth L1 (f^_p, f_p) + ``w_token`` x CE (lm_head(f^_p), x_{p+1}), as EAGLE.  Training is
seeded and resumable (``OUT/ckpt.pt`` every ``--save-every`` steps and at ``--max-train-s``; a rerun goes on from it);
the pool is cached in ``OUT/pool.pt``, and the target's features over each ``--pool-files`` file under
``<cache>/distill/feat/`` (a later run, on these files and more, computes only the new ones).  At the end it writes
the head (``OUT/head.pt``, ``head.json``) and, with ``--eval-prompts N``, the AAL of greedy SD at K =
``--draft-len`` with the head and with the drafter on the test prompts (``OUT/eval.json``).

Usage: ``python -m scripts.train.feature_drafter --out runs/feathead [--steps 600] [--max-train-s 300]``
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

import config
from scripts.train.distill_cache import read_cache
from wisv.decoding.featdraft import (
    FeatureDraftSession,
    FeatureHead,
    head_param_count,
    load_head,
    save_head,
)
from wisv.decoding.speculative import spec_rows, speculative_generate
from wisv.models.loader import load_pair
from wisv.pairs import cache_dir
from wisv.records.rows import to_frame
from wisv.records.summary import summarize_rounds
from wisv.tasks.evaluate import eos_id, greedy_reference
from wisv.tasks.prompts import prompt_rows


@dataclass
class FeatureDrafterConfig:
    """One training run (saved as OUT/train_config.toml)."""

    out: str = "runs/feature-drafter"  # output directory: pool, checkpoint, head, eval
    drafter: str | None = None  # local HF drafter directory (None: built-in toy pair)
    target: str | None = None  # local HF target directory (None: built-in toy pair)
    prompts_file: str | None = None  # JSONL training prompts (None: toy train split; with --pool-files: eval prompts)
    prompts: int = field(default=200, metadata={"min": 1})  # training prompts (first N); with --pool-files,
    #   generations taken from them
    pool_files: list[str] = field(default_factory=list, metadata={  # the pool: target features over the cached
        "pattern": r".+\.jsonl"})  # generations of these files (<cache>/distill/gen/*.jsonl), in turn (none: generate)
    max_new_tokens: int = field(default=160, metadata={"min": 1})  # target generation per training prompt, tokens
    layers: int = field(default=1, metadata={"min": 1})  # decoder layers of the head
    heads: int = field(default=4, metadata={"min": 1})  # attention heads
    window: int = field(default=64, metadata={"min": 1})  # positions the head attends to
    steps: int = field(default=600, metadata={"min": 1})  # optimizer steps
    batch: int = field(default=16, metadata={"min": 1})  # sequences per step
    lr: float = field(default=1e-3, metadata={"above": 0})  # AdamW learning rate (cosine to 10%)
    w_token: float = field(default=0.1, metadata={"min": 0})  # weight of the token CE beside the feature regression
    ce_positions: int = field(default=0, metadata={  # loss positions per step, a seeded sample of the batch's
        "min": 0})  # (0: all); the LM head over a large vocabulary is the costly part
    noise: float = field(default=0.05, metadata={"min": 0})  # std of the Gaussian noise on input features
    #   (relative to their RMS), EAGLE's augmentation
    unroll: bool = False  # a second pass on the head's own (detached) predicted features, as it drafts (EAGLE-3's test)
    seed: int = 0  # torch seed: init, batch order, noise
    max_train_s: float = field(default=0.0, metadata={  # stop training after this many seconds, s
        "min": 0})  # (0: no limit); a rerun resumes
    stop_step: int = field(default=0, metadata={  # end this run at this step, its cosine schedule still spanning
        "min": 0})  # --steps (0: at --steps); a rerun with a later one, or none, resumes
    save_every: int = field(default=100, metadata={"min": 1})  # checkpoint every N steps
    eval_prompts: int = field(default=20, metadata={"min": 0})  # test prompts for the AAL comparison (0: none)
    eval_split: str = "test"  # toy split of the eval prompts (with --prompts-file: its rows after the training ones)
    draft_len: int = field(default=8, metadata={"min": 1})  # K of the AAL comparison
    threads: int = field(default=1, metadata={"min": 1})  # torch intra-op threads


@torch.no_grad()
def build_pool(target, rows: list[dict], max_new: int) -> list[dict]:
    """Per prompt: tokens x [T+1] from the last prompt token on and features f [T+1, d_t] fp16 (f[0]: that token's):
    the target's greedy generation, then its features as ``pool_from_cache`` reads them."""
    gens = [(len(r["prompt_ids"]), r["prompt_ids"] + greedy_reference(target, r["prompt_ids"], max_new)) for r in rows]
    return pool_from_cache(target, gens, batch=1)


@torch.no_grad()
def pool_from_cache(target, seqs: list[tuple[int, list[int]]], batch: int = 16) -> list[dict]:
    """As ``build_pool``, from generations already made: (prompt length, prompt + greedy continuation ids) each; the
    target's features come from one teacher-forced pass per batch (right-padded, so a row's states are its own)."""
    pool = []
    for i in range(0, len(seqs), batch):
        part = seqs[i:i + batch]
        n = max(len(ids) for _, ids in part)
        x = torch.zeros(len(part), n, dtype=torch.long)
        mask = torch.zeros(len(part), n, dtype=torch.long)
        for b, (_, ids) in enumerate(part):
            x[b, :len(ids)], mask[b, :len(ids)] = torch.tensor(ids), 1
        h = target(x, attention_mask=mask, output_hidden_states=True).hidden_states[-1]  # [B, n, d_t] post-norm
        for b, (plen, ids) in enumerate(part):
            pool.append({"x": torch.tensor(ids[plen - 1:]), "f": h[b, plen - 1:len(ids)].half()})
    return pool


def interleave(per_file: list[list], n: int) -> list:
    """Up to ``n`` items of the lists, taken from each in turn (a, b, a, b, a, ...)."""
    out = [items[i] for i in range(max(map(len, per_file), default=0)) for items in per_file if i < len(items)]
    return out[:n]


def read_generations(path: Path) -> dict[str, tuple[int, list[int]]]:
    """Key -> (prompt length, prompt + greedy continuation ids) of one distillation cache file, the empty
    continuations left out."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such generation cache (scripts.train.smollm2_drafter writes them)")
    gens = {k: (int(r[0]), [int(t) for t in r[1]]) for k, r in read_cache(path).items()}
    return {k: g for k, g in gens.items() if len(g[1]) > g[0]}


def feature_cache(gen_file: Path) -> Path:
    """Where the target's features over one generation cache file are kept (<cache>/distill/feat/<its name>.pt: the
    file's name holds the generation settings and the target's identity)."""
    return cache_dir() / "distill" / "feat" / f"{gen_file.stem}.pt"


def file_features(target, gen_file: Path, most: int | None = None, chunk: int = 256) -> list[dict]:
    """The pool entries (``pool_from_cache``) of one generation cache file's first ``most`` rows (None: all), in its
    order.  They are cached by row key, saved every ``chunk`` rows: a rerun, or a file grown since, computes only the
    rows it lacks."""
    gens, path = read_generations(gen_file), feature_cache(gen_file)
    keys = list(gens)[:most]
    have = torch.load(path, weights_only=True) if path.is_file() else {}
    todo = [k for k in keys if k not in have]
    t0 = time.monotonic()
    for i in range(0, len(todo), chunk):
        part = todo[i:i + chunk]
        have.update(zip(part, pool_from_cache(target, [gens[k] for k in part])))
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(have, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").replace(path)
        print(f"[features] {gen_file.name}: {min(i + chunk, len(todo))}/{len(todo)} new rows "
              f"({time.monotonic() - t0:.0f} s)", flush=True)
    return [have[k] for k in keys]


def batch_of(pool: list[dict], idx: list[int], window: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Inputs and targets of ``idx``'s sequences, one random crop of at most 2 x window each, padded:
    f_in [B, T, d] (f_{p-1}; zero at a sequence's start), x_in [B, T], f_out [B, T, d], y [B, T] (-100: none)."""
    crops = []
    for i in idx:
        x, f = pool[i]["x"], pool[i]["f"].float()
        n = len(x) - 1  # positions with a next token
        t = min(n, 2 * window)
        s = int(torch.randint(0, n - t + 1, (1,), generator=gen)) if n > t else 0
        f_prev = torch.cat([torch.zeros(1, f.shape[1]), f[:-1]])  # [len, d]: the feature before each position
        crops.append((f_prev[s:s + t], x[s:s + t], f[s:s + t], x[s + 1:s + t + 1]))
    T, d = max(len(c[1]) for c in crops), crops[0][0].shape[1]
    f_in, f_out = torch.zeros(len(crops), T, d), torch.zeros(len(crops), T, d)
    x_in, y = torch.zeros(len(crops), T, dtype=torch.long), torch.full((len(crops), T), -100)
    for b, (fp, xi, fo, yo) in enumerate(crops):
        f_in[b, :len(xi)], x_in[b, :len(xi)], f_out[b, :len(xi)], y[b, :len(xi)] = fp, xi, fo, yo
    return f_in, x_in, f_out, y


def loss_of(head: FeatureHead, batch: tuple[torch.Tensor, ...], noise: float, gen: torch.Generator,
            unroll: bool = False, ce_positions: int = 0) -> tuple[torch.Tensor, dict]:
    """EAGLE's loss: smooth L1 on the predicted features + w x token CE (the caller weights), on real positions.
    ``unroll``: averaged with a second pass whose input features are the first pass's predictions (detached; the
    first position keeps its own), as the head drafts past its first token."""
    f_in, x_in, f_out, y = batch
    rms = f_out.pow(2).mean().sqrt()
    f_in = f_in + noise * rms * torch.randn(f_in.shape, generator=gen)
    mask = y >= 0  # [B, T]
    if ce_positions and int(mask.sum()) > ce_positions:  # the CE (and the regression) on a seeded sample
        real = mask.flatten().nonzero()[:, 0]
        keep = real[torch.randperm(len(real), generator=gen)[:ce_positions]]
        mask = torch.zeros_like(mask).flatten().index_fill_(0, keep, True).view_as(mask)
    f_hat, _ = head(f_in, x_in)  # [B, T, d]
    reg, ce, acc = _terms(head, f_hat, f_out, y, mask)
    m = {"reg": reg.item(), "ce": ce.item(), "acc": acc.item()}
    if unroll:
        own = torch.cat([f_in[:, :1], f_hat[:, :-1].detach()], dim=1)  # [B, T, d] f^_{p-1} for f_{p-1}
        reg2, ce2, acc2 = _terms(head, head(own, x_in)[0], f_out, y, mask)
        reg, ce = (reg + reg2) / 2, (ce + ce2) / 2
        m["acc_own"] = acc2.item()
    return reg, m | {"_ce": ce}


def _terms(head: FeatureHead, f_hat: torch.Tensor, f_out: torch.Tensor, y: torch.Tensor, mask: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(smooth L1, token CE, token accuracy) of predicted features [B, T, d] on the real positions."""
    logits = head.lm_head(f_hat[mask])  # [N, V]
    return (F.smooth_l1_loss(f_hat[mask], f_out[mask]), F.cross_entropy(logits, y[mask]),
            (logits.argmax(-1) == y[mask]).float().mean())


def train(cfg: FeatureDrafterConfig, head: FeatureHead, pool: list[dict], out: Path) -> dict:
    """Resumable training loop; returns the last step's metrics."""
    torch.manual_seed(cfg.seed)
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.1 + 0.9 * 0.5 * (1 + torch.cos(
        torch.tensor(torch.pi * min(s, cfg.steps) / cfg.steps)).item()))
    step, ckpt, runs = 0, out / "ckpt.pt", []
    if ckpt.is_file():
        st = torch.load(ckpt, weights_only=True)
        head.load_state_dict(st["head"])
        opt.load_state_dict(st["opt"])
        sched.load_state_dict(st["sched"])
        step = st["step"]
        runs = st.get("runs") or [{"from_step": 0, "to_step": step, "recorded": False}]  # older checkpoints
        print(f"resumed at step {step}")
    runs.append(_segment(cfg, step, step, len(pool)))
    t0, last = time.monotonic(), {"step": step, "runs": runs}
    head.train()
    end = min(cfg.steps, cfg.stop_step or cfg.steps)  # this run's last step
    while step < end:
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)  # the batch and noise of this step
        idx = torch.randint(0, len(pool), (min(cfg.batch, len(pool)),), generator=gen).tolist()
        reg, m = loss_of(head, batch_of(pool, idx, cfg.window, gen), cfg.noise, gen, cfg.unroll, cfg.ce_positions)
        loss = reg + cfg.w_token * m.pop("_ce")
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        step += 1
        runs[-1]["to_step"] = step
        last = {"step": step, **m, "runs": runs}
        if step % 50 == 0 or step == cfg.steps:
            own = f" acc on own features {m['acc_own']:.3f}" if "acc_own" in m else ""
            took = time.monotonic() - t0
            print(f"step {step}: reg {m['reg']:.4f} ce {m['ce']:.3f} acc {m['acc']:.3f}{own} ({took:.0f} s)")
        out_of_time = cfg.max_train_s and time.monotonic() - t0 > cfg.max_train_s
        if step % cfg.save_every == 0 or step == end or out_of_time:
            torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "step": step,
                        "runs": runs}, ckpt)
        if out_of_time:
            print(f"stopped at step {step}: --max-train-s {cfg.max_train_s} reached (a rerun resumes)")
            break
    head.eval()
    return last


def _segment(cfg: FeatureDrafterConfig, from_step: int, to_step: int, generations: int) -> dict:
    """One training run's part of a head's history (a rerun resumes and adds its own): the steps it took, and the
    settings that may differ between runs."""
    return {"from_step": from_step, "to_step": to_step, "steps": cfg.steps, "lr": cfg.lr, "batch": cfg.batch,
            "generations": generations, "pool_files": list(cfg.pool_files or []), "recorded": True}


def evaluate(cfg: FeatureDrafterConfig, drafter, target, head: FeatureHead, rows: list[dict]) -> dict:
    """AAL of greedy SD at K with the feature head and with the drafter, same prompts; both lossless-checked."""
    res = {}
    for name, make in (("feature_head", lambda s: FeatureDraftSession(drafter, s, head)), ("drafter", None)):
        recs, same = [], 0
        for r in rows:
            ids = r["prompt_ids"]
            o = speculative_generate(drafter, target, ids, max_new_tokens=cfg.max_new_tokens, draft_len=cfg.draft_len,
                                     make_draft=make, eos_token_id=eos_id(target))
            recs += spec_rows(o, r["prompt_id"], len(ids))
            same += o.tokens == greedy_reference(target, ids, cfg.max_new_tokens)
        s = summarize_rounds(to_frame(recs))
        res[name] = {"aal": float(s["aal"]), "rounds": len(recs), "identical_to_target": same / len(rows)}
    return res


def run(cfg: FeatureDrafterConfig) -> dict:
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    config.write_config_beside(out / "train.json", cfg)
    if cfg.pool_files and cfg.eval_prompts and not cfg.prompts_file:
        raise ValueError("--pool-files with --eval-prompts needs --prompts-file (its first rows are the eval prompts)")
    missing = [f for f in cfg.pool_files if not Path(f).is_file()]
    if missing and not (out / "pool.pt").is_file():  # before the models load, so the error is the first line
        raise FileNotFoundError(f"{missing[0]}: no such generation cache (scripts.train.smollm2_drafter writes them)")
    drafter, target, tok = load_pair(cfg.drafter, cfg.target)
    target.eval()
    if cfg.pool_files:  # the pool comes from the caches; a prompts file gives only the eval prompts
        rows, held_out = [], prompt_rows(tok, "test", cfg.eval_prompts, cfg.prompts_file) if cfg.eval_prompts else []
    else:
        rows = prompt_rows(tok, "train", cfg.prompts + (cfg.eval_prompts if cfg.prompts_file else 0), cfg.prompts_file)
        rows, held_out = rows[:cfg.prompts], rows[cfg.prompts:]  # a prompts file: the rows after the training ones
    pool_path = out / "pool.pt"
    if pool_path.is_file():
        pool = torch.load(pool_path, weights_only=True)
    else:
        t0 = time.monotonic()
        if cfg.pool_files:  # a file gives at most --prompts rows to the interleave: only those are computed
            pool = interleave([file_features(target, Path(f), cfg.prompts) for f in cfg.pool_files], cfg.prompts)
        else:
            pool = build_pool(target, rows, cfg.max_new_tokens)
        torch.save(pool, pool_path)
        n = sum(len(p["x"]) for p in pool)
        print(f"pool: {len(pool)} generations, {n} positions ({time.monotonic() - t0:.0f} s)")
    torch.manual_seed(cfg.seed)
    head = FeatureHead.from_target(target, n_layers=cfg.layers, n_heads=cfg.heads, window=cfg.window)
    last = train(cfg, head, pool, out)
    runs = [r for r in last.pop("runs") if r["to_step"] > r["from_step"]]  # the runs that trained it, oldest first
    # ("train" is the last run's whole config)
    meta = {"train": asdict(cfg), "last": last, "runs": runs, "trainable_params": head_param_count(head),
            "pool_positions": sum(len(p["x"]) - 1 for p in pool)}
    save_head(head, out, meta, base=drafter)  # the embedding stays out where the drafter has the target's
    result = {"last": last, "trainable_params": meta["trainable_params"], "pool_positions": meta["pool_positions"]}
    if cfg.eval_prompts:
        ev = held_out if cfg.prompts_file else prompt_rows(tok, cfg.eval_split, cfg.eval_prompts)
        result["eval"] = evaluate(cfg, drafter, target, load_head(out, drafter), ev)
        result["eval"]["prompts"], result["eval"]["k"] = len(ev), cfg.draft_len
        for name, r in result["eval"].items():
            if isinstance(r, dict):
                same = r["identical_to_target"]
                print(f"{name}: AAL {r['aal']:.2f} at K={cfg.draft_len}, identical to target {same:.0%}")
    (out / "eval.json").write_text(json.dumps(result, indent=1))
    return result


def parse_args(argv: list[str] | None = None) -> FeatureDrafterConfig:
    return config.parse(FeatureDrafterConfig, argv, prog="python -m scripts.train.feature_drafter",
                        description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":  # bad input (a value, a missing or unwritable path) is one line and exit 2
    sys.exit(config.run_reporting("python -m scripts.train.feature_drafter", main, (ValueError, OSError)))

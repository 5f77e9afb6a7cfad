"""The SmolLM2 drafter's learning curve: greedy SD AAL at K against distillation tokens, on seen kinds, unseen kinds
and free form.

Each milestone checkpoint of a scripts/train/smollm2_drafter.py run (``<run dir>/milestones/``, named by the
generated tokens seen), the undistilled copy of the target's layers (tokens 0) and the pair's built drafter (a
reference line) are evaluated on the same fixed sample of the broad suite's **test** pools: ``--per-group`` prompts of
each group (family x role: question-seen, question-unseen, free-seen, free-unseen), spread over the group's kinds
(``sample_groups``).  ``--pool calib`` samples the calib pools instead (groups question-seen, question-dev, free-seen,
free-dev: the dev kinds are in no distillation pool), so that a choice between drafters is made without the test
pools.  "free" pools the two free-form groups' rounds.  AAL counts accepted draft tokens per round.

Usage: ``python -m scripts.train.drafter_curve [--run-dir DIR] [--per-group 24] [--draft-len 8] [--max-new-tokens 64]``,
after ``python -m wisv.pairs build smollm2`` and a training run.  Writes ``--out`` (JSON) and ``--plot`` (PNG).
"""
from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

import config
from scripts.train.distill_state import milestones, read_run
from scripts.train.drafter_ceiling import variant
from scripts.train.smollm2_drafter import DistillConfig, run_dir
from wisv.decoding.featdraft import FeatureDraftSession, cast_beside_head, read_head_config
from wisv.decoding.speculative import spec_rows, speculative_generate
from wisv.models.loader import DTYPE_CHOICES, load_pair, resolve_dtype
from wisv.pairs import resolve_pair
from wisv.records.rows import to_frame
from wisv.records.summary import summarize_rounds
from wisv.tasks import suite
from wisv.tasks.evaluate import eos_id
from wisv.tasks.prompts import encode_prompt

POOLED = {"free": ("free-seen", "free-unseen")}  # groups whose rounds are also summarised together


@dataclass
class CurveConfig:
    """One learning-curve measurement (written into the JSON)."""

    pair: str = "smollm2"  # the named pair (its target, tokenizer and built drafter)
    run_dir: str = ""  # the training run ("": the training script's default run directory for --seed)
    seed: int = 1234  # the training run's seed (names its default run directory) and the prompt sample's seed
    pool: str = field(default="test", metadata={"choices": ("test", "calib")})  # the suite pools sampled: test
    #   (reports) or calib (choices)
    per_group: int = field(default=24, metadata={"min": 1})  # prompts per group (family x role)
    draft_len: int = field(default=8, metadata={"min": 1})  # K of the greedy SD runs
    max_new_tokens: int = field(default=64, metadata={"min": 1})  # generation budget per prompt, tokens
    last: int = field(default=0, metadata={"min": 0})  # evaluate only the last N milestones (0: all)
    milestones: bool = True  # evaluate the run's milestones (--last of them)
    undistilled: bool = True  # also the undistilled copy of the target's layers (tokens 0)
    built: bool = True  # also the pair's built drafter (a reference line)
    drafter: str | None = None  # that reference drafter's HF directory instead of the pair's (None: the pair's)
    drafter_dtype: str = field(default="float32", metadata={"choices": DTYPE_CHOICES})  # the built drafter's
    #   weights (and its LM head under the feature head); the target stays float32
    feature_head: str = ""  # also this EAGLE-style feature head (scripts/train/feature_drafter.py; "": none)
    feature_rows: int = field(default=1, metadata={"min": 1})  # the target's feature rows the head reads per round
    threads: int = field(default=1, metadata={"min": 1})  # torch intra-op threads
    out: str = "results/smollm2/drafter_curve.json"  # the JSON
    plot: str | None = None  # the PNG (None: beside --out, with .png; "": none), so that a measurement written
    #   elsewhere never touches the shipped figure


def sample_groups(rows: list[dict], n: int, seed: int) -> dict[str, list[dict]]:
    """``n`` rows per group (family-role), spread over the group's kinds: kinds in turn (sorted), each kind's rows in
    a seeded order."""
    by_group: dict[str, dict[str, list[dict]]] = {}
    for r in rows:
        group = f"{suite.family(r['kind'])}-{suite.role(r['kind'])}"
        by_group.setdefault(group, {}).setdefault(r["kind"], []).append(r)
    out = {}
    for group in sorted(by_group, key=lambda g: (g.startswith("free"), g)):  # questions first
        kinds = {k: random.Random(f"{seed}:{k}").sample(v, len(v)) for k, v in sorted(by_group[group].items())}
        picked, depth = [], 0
        while len(picked) < n and any(depth < len(v) for v in kinds.values()):
            picked += [v[depth] for v in kinds.values() if depth < len(v)][:n - len(picked)]
            depth += 1
        out[group] = picked
    return out


def suite_sample(n: int, seed: int, pool: str = "test") -> dict[str, list[dict]]:
    """The fixed sample of one of the suite's pools (test or calib; questions and free form)."""
    return sample_groups(suite.load_suite(pool) + suite.load_suite(pool, "free"), n, seed)


def group_aal(drafter, target, groups: dict[str, list[dict]], cfg: CurveConfig,
              make_draft=None) -> dict[str, dict[str, float]]:
    """Greedy SD AAL at ``draft_len`` per group (prompt_ids rows) and per pooled group ("aal"), and per kind
    ("aal_kind"); ``make_draft`` (prompt ids -> DraftSession) drafts with another session, e.g. a feature head."""
    recs, by_kind = {}, {}
    for name, rows in groups.items():
        recs[name] = []
        for r in rows:
            o = speculative_generate(drafter, target, r["prompt_ids"], max_new_tokens=cfg.max_new_tokens,
                                     draft_len=cfg.draft_len, eos_token_id=eos_id(target), make_draft=make_draft)
            got = spec_rows(o, r["prompt_id"], len(r["prompt_ids"]))
            recs[name] += got
            by_kind.setdefault(r["kind"], []).extend(got)
    for name, parts in POOLED.items():
        if all(p in recs for p in parts):
            recs[name] = [x for p in parts for x in recs[p]]
    aal = {name: round(summarize_rounds(to_frame(rs))["aal"], 4) for name, rs in recs.items()}
    return {"aal": aal, "aal_kind": {k: round(summarize_rounds(to_frame(rs))["aal"], 4)
                                     for k, rs in sorted(by_kind.items())}}


def plot_path(cfg: CurveConfig) -> str:
    """Where the PNG goes: ``--plot`` when given ("": none), else beside ``--out``."""
    return str(Path(cfg.out).with_suffix(".png")) if cfg.plot is None else cfg.plot


def plot(result: dict, path: str) -> None:
    """AAL against generated tokens seen, one line per group; the built drafter as dashed levels."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pts = result["points"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, g in enumerate(pts[0]["aal"] if pts else []):
        ax.plot([p["tokens"] for p in pts], [p["aal"][g] for p in pts], "o-", color=f"C{i}", label=g)
        if result.get("built"):
            ax.axhline(result["built"]["aal"][g], color=f"C{i}", ls="--", lw=0.8)
        if result.get("feature_head"):
            ax.axhline(result["feature_head"]["aal"][g], color=f"C{i}", ls=":", lw=1.2)
    positive = [p["tokens"] for p in pts if p["tokens"] > 0]
    ax.set_xscale("symlog", linthresh=min(positive) if positive else 1)
    c = result["config"]
    ax.set(xlabel="generated tokens seen in distillation", ylabel=f"AAL (greedy SD, K={c['draft_len']})",
           title=f"SmolLM2 drafter: {c['per_group']} suite test prompts per group "
                 "(dashed: built drafter; dotted: feature head)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> CurveConfig:
    return config.parse(CurveConfig, argv, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_args(argv)
    torch.set_num_threads(cfg.threads)
    if cfg.feature_head:
        read_head_config(cfg.feature_head)  # a bad directory fails before any evaluation
    rdir = Path(cfg.run_dir) if cfg.run_dir else run_dir(DistillConfig(seed=cfg.seed))
    run = read_run(rdir) if cfg.milestones or cfg.undistilled else {"config": None}  # only those read the run
    paths = resolve_pair(cfg.pair)
    pair = load_pair(cfg.drafter or paths.drafter, paths.target)
    head = cast_beside_head(pair.drafter, cfg.feature_head, resolve_dtype(cfg.drafter_dtype, "cpu"))
    groups = {g: [{"prompt_id": r["prompt_id"], "kind": r["kind"],
                   "prompt_ids": encode_prompt(pair.tokenizer, r["prompt"])} for r in rows]
              for g, rows in suite_sample(cfg.per_group, cfg.seed, cfg.pool).items()}
    ckpts = (milestones(rdir)[-cfg.last:] if cfg.last else milestones(rdir)) if cfg.milestones else []
    todo = ([(0, 0, None)] if cfg.undistilled else []) + ckpts
    print(f"[curve] {rdir}: {len(ckpts)} milestones; groups { {g: len(v) for g, v in groups.items()} }", flush=True)
    t0, points = time.perf_counter(), []
    for tokens, step, path in todo:
        drafter = variant(pair.target, run["layers"], run["head_vocab"], path)
        points.append({"tokens": tokens, "step": step, "checkpoint": path and path.name,
                       **group_aal(drafter, pair.target, groups, cfg)})
        print(f"[curve] {points[-1]} ({time.perf_counter() - t0:.0f} s)", flush=True)
    built = {"drafter": cfg.drafter or str(paths.drafter), **group_aal(pair.drafter, pair.target, groups, cfg)} \
        if cfg.built else None
    feat = None
    if head is not None:
        meta = read_head_config(cfg.feature_head).get("meta", {})
        feat = {"head": cfg.feature_head, "steps": meta.get("last", {}).get("step"),
                "pool_positions": meta.get("pool_positions"), "feature_rows": cfg.feature_rows,
                **group_aal(pair.drafter, pair.target, groups, cfg, lambda ids: FeatureDraftSession(
                    pair.drafter, ids, head, feature_rows=cfg.feature_rows))}
        print(f"[curve] feature head {feat['aal']} ({time.perf_counter() - t0:.0f} s)", flush=True)
    result = {"config": asdict(cfg), "run_dir": str(rdir), "run_config": run["config"],
              "groups": {g: {"n": len(v), "kinds": sorted({r["kind"] for r in v})} for g, v in groups.items()},
              "points": points, "built": built, "feature_head": feat, "wall_s": round(time.perf_counter() - t0, 1)}
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(result, indent=1) + "\n")
    png = plot_path(cfg)
    if png:
        plot(result, png)
    print(f"[curve] wrote {cfg.out}" + (f" and {png}" if png else "") + f", {result['wall_s']} s", flush=True)
    return result


if __name__ == "__main__":  # bad input (a value, a missing or unwritable path) is one line and exit 2
    sys.exit(config.run_reporting("python -m scripts.train.drafter_curve", main, (ValueError, OSError)))

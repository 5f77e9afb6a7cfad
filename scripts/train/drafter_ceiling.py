"""Where the SmolLM2 drafter's AAL ceiling is: greedy SD AAL at one K against distillation tokens (each epoch's
checkpoint of scripts/train/smollm2_drafter.py, and the undistilled copy) and against exit depth (the target's
first d layers, undistilled, and distilled where a run with ``--layers 0 .. d-1`` left checkpoints), and, for the
last checkpoint, the head: the kept vocabulary (drafter.json's ``head_vocab``) against the full one (AAL, per-token
cost ratio, and the share of the target's greedy tokens the head can propose); on the first prompts of the long-form
test pool and of the generic held-out set.

Usage: ``python -m scripts.train.drafter_ceiling [--prompts 4 4] [--depths 4 8 12] [--draft-len 8]``, after training
(the checkpoints are under ``<cache>/distill/checkpoints/``) and ``python -m wisv.pairs build smollm2``.  Every drafter
here but the full-head row uses the shipped head (drafter.json's ``head_vocab``).  AAL is timing-free; the cost
ratio (median of interleaved repeats) is as noisy as the machine.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import LlamaForCausalLM

import config
from scripts.bench.smollm2_drafter import per_token_ms
from wisv.decoding.speculative import spec_rows, speculative_generate
from wisv.models.loader import load_pair
from wisv.models.restricted_head import restrict
from wisv.pairs import cache_dir, resolve_pair
from wisv.pairs.drafter import apply_weights, early_exit, read_spec
from wisv.records.rows import to_frame
from wisv.records.summary import summarize_rounds
from wisv.tasks.evaluate import eos_id, greedy_reference
from wisv.tasks.pools import GENERIC_HELDOUT, pool_path
from wisv.tasks.prompts import prompt_rows

_CKPT_RE = re.compile(r"-e(\d+)-t(\d+)\.safetensors$")


@dataclass
class CeilingConfig:
    """One ceiling measurement (written into the JSON)."""

    pair: str = "smollm2"  # the named pair (its target and tokenizer)
    prompts_files: list[str] = field(default_factory=lambda: [str(pool_path("test")), str(GENERIC_HELDOUT)])  # sets
    prompts: list[int] = field(default_factory=lambda: [4, 4], metadata={"min": 1})  # first N prompts of each set
    draft_len: int = field(default=8, metadata={"min": 1})  # K of the greedy SD runs
    max_new_tokens: int = field(default=64, metadata={"min": 1})  # generation budget per prompt, tokens
    depths: list[int] = field(default_factory=lambda: [4, 8, 12],
                              metadata={"min": 1})  # undistilled exits: the target's first d layers
    seed: int = 1234  # the training run's seed (names its checkpoints)
    cost_steps: int = field(default=20, metadata={"min": 1})  # decode steps per per-token timing (head comparison)
    cost_repeats: int = field(default=3,
                              metadata={"min": 1})  # interleaved repeats of the per-token timings (median taken)
    threads: int = field(default=1, metadata={"min": 1})  # torch intra-op threads
    out: str = "results/smollm2/drafter_ceiling.json"  # the JSON


def checkpoints(seed: int, depth: int | None = None, earlier: bool = False) -> list[tuple[int, int, Path]]:
    """(epoch, generated tokens seen, path) of the training run's checkpoints, by epoch: the shipped exit's, or (with
    ``depth``) those of a run that kept the target's first ``depth`` layers (``--layers 0 .. depth-1``).  With
    ``earlier``, those of earlier runs instead, which were moved into subdirectories of the checkpoint directory
    (one per run, e.g. ``run1152/``)."""
    found, tag = [], "" if depth is None else f"-L{depth}"
    root = cache_dir() / "distill" / "checkpoints"
    for p in root.glob(f"{'*/' if earlier else ''}smollm2-s{seed}{tag}-e*-t*.safetensors"):
        m = _CKPT_RE.search(p.name)
        found.append((int(m.group(1)), int(m.group(2)), p))
    return sorted(found)


def aal(drafter, target, sets: dict[str, list[dict]], cfg: CeilingConfig) -> dict[str, float]:
    """Greedy SD AAL at ``draft_len`` on each prompt set."""
    out = {}
    for name, rows in sets.items():
        recs = []
        for i, r in enumerate(rows):
            o = speculative_generate(drafter, target, r["prompt_ids"], max_new_tokens=cfg.max_new_tokens,
                                     draft_len=cfg.draft_len, eos_token_id=eos_id(target))
            recs += spec_rows(o, str(i), len(r["prompt_ids"]))
        out[name] = round(summarize_rounds(to_frame(recs))["aal"], 4)
    return out


def variant(target: LlamaForCausalLM, layers: list[int], head_vocab: list[int] | None,
            weights: Path | None) -> LlamaForCausalLM:
    """An early exit at ``layers`` with ``weights`` laid over it and the shipped head."""
    model = early_exit(target, layers)
    if weights is not None:
        apply_weights(model, weights)
    if head_vocab:
        restrict(model, head_vocab)
    return model.eval()


def heads(pair, spec: dict, weights: Path | None, sets: dict[str, list[dict]], cfg: CeilingConfig,
          kept_aal: dict[str, float]) -> list[dict]:
    """The last checkpoint with the kept head (its AAL: ``kept_aal``, measured already) and with the full head: AAL,
    per-token cost ratio (interleaved medians) and the head's coverage of the target's greedy tokens on each set."""
    kept = set(spec["head_vocab"])
    refs = {n: [t for r in rows for t in greedy_reference(pair.target, r["prompt_ids"], cfg.max_new_tokens)]
            for n, rows in sets.items()}
    models = {f"kept ({len(kept):,} tokens)": variant(pair.target, spec["layers"], spec["head_vocab"], weights),
              "full": variant(pair.target, spec["layers"], None, weights)}
    times = {name: [] for name in [*models, "target"]}
    for _ in range(cfg.cost_repeats):
        for name, m in [*models.items(), ("target", pair.target)]:
            times[name].append(per_token_ms(m, cfg.cost_steps))
    t_ms = sorted(times["target"])[len(times["target"]) // 2]
    out = []
    for name, m in models.items():
        ms = sorted(times[name])[len(times[name]) // 2]
        cov = {n: round(sum(t in kept for t in ts) / max(1, len(ts)), 4) if name != "full" else 1.0
               for n, ts in refs.items()}
        out.append({"head": name, "aal": kept_aal if name != "full" else aal(m, pair.target, sets, cfg),
                    "ms_per_token": round(ms, 3),
                    "target_ms_per_token": round(t_ms, 3), "cost_ratio": round(ms / t_ms, 4), "coverage": cov})
        print(f"[ceiling] head {out[-1]}", flush=True)
    return out


def distilled_depths(pair, spec: dict, head: list[int] | None, sets: dict[str, list[dict]], cfg: CeilingConfig,
                     by_tokens: list[dict]) -> list[dict]:
    """Distilled exits at other depths (runs of the training script with ``--layers 0 .. d-1``, checkpoints named
    ``-L{d}-``), each epoch's AAL beside the shipped exit's at its nearest token count: exit depth at equal data."""
    out = []
    for d in cfg.depths:
        for epoch, tokens, path in checkpoints(cfg.seed, d) if list(range(d)) != spec["layers"] else []:
            peer = min(by_tokens[1:] or by_tokens, key=lambda r: abs(r["tokens"] - tokens))
            out.append({"layers": d, "distilled": True, "epoch": epoch, "tokens": tokens,
                        "aal": aal(variant(pair.target, list(range(d)), head, path), pair.target, sets, cfg),
                        "shipped_exit_at_tokens": peer["tokens"], "shipped_exit_aal": peer["aal"]})
    shipped = by_tokens[-1]
    out.append({"layers": len(spec["layers"]), "distilled": True, "epoch": shipped["epoch"],
                "tokens": shipped["tokens"], "aal": shipped["aal"]})
    return out


def main(argv: list[str] | None = None) -> dict:
    cfg = config.parse(CeilingConfig, argv, description=__doc__.splitlines()[0])
    torch.set_num_threads(cfg.threads)
    paths = resolve_pair(cfg.pair)
    pair = load_pair(paths.drafter, paths.target)
    spec = read_spec()
    sets = {f"{Path(f).parent.name}/{Path(f).name}": prompt_rows(pair.tokenizer, "test", n, f)
            for f, n in zip(cfg.prompts_files, cfg.prompts)}
    head = spec.get("head_vocab")
    by_tokens = [{"epoch": 0, "tokens": 0, "aal": aal(variant(pair.target, spec["layers"], head, None), pair.target,
                                                       sets, cfg)}]
    for epoch, tokens, path in checkpoints(cfg.seed):
        by_tokens.append({"epoch": epoch, "tokens": tokens, "run": "shipped",
                          "aal": aal(variant(pair.target, spec["layers"], head, path), pair.target, sets, cfg)})
        print(f"[ceiling] {by_tokens[-1]}", flush=True)
    earlier = []
    for epoch, tokens, path in checkpoints(cfg.seed, earlier=True):
        earlier.append({"epoch": epoch, "tokens": tokens, "run": path.parent.name,
                        "aal": aal(variant(pair.target, spec["layers"], head, path), pair.target, sets, cfg)})
        print(f"[ceiling] earlier run {earlier[-1]}", flush=True)
    by_depth = [{"layers": d, "distilled": False,
                 "aal": by_tokens[0]["aal"] if list(range(d)) == spec["layers"] else
                 aal(variant(pair.target, list(range(d)), head, None), pair.target, sets, cfg)} for d in cfg.depths]
    by_depth += distilled_depths(pair, spec, head, sets, cfg, by_tokens)
    for row in by_depth:
        print(f"[ceiling] depth {row}", flush=True)
    last = checkpoints(cfg.seed)[-1][2] if checkpoints(cfg.seed) else None
    by_head = heads(pair, spec, last, sets, cfg, by_tokens[-1]["aal"]) if head else []
    result = {"config": asdict(cfg), "by_tokens": by_tokens, "earlier_runs": earlier, "by_depth": by_depth,
              "by_head": by_head}
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()

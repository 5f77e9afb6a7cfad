"""Distil the SmolLM2 pair's early-exit drafter on the target's own greedy generations (seeded, CPU).

Usage: ``python -m scripts.train_smollm2_drafter [--layers 0 1 2 3] [--epochs 2] [--prompts 1152]``, after
``python -m wisv.pairs build smollm2 --stages download target``.  The drafter is the target's first layers, final
norm and LM head restricted to a kept vocabulary (every token of the generations and of the target's top-k there);
the layers named in --train-layers and the final norm are trained on the target's greedy generations of generic
prompts (scripts/smollm2_distill_prompts.py) and of the long-form task's **distill pool**
(``wisv/assets/longform/distill.jsonl``; never its calib or test pool, nor the generic held-out prompts),
optionally plus the old QA task's in-domain questions (``--qa``; none of its test split):
cross-entropy on the target's greedy next token at every generated position, mixed with cross-entropy on the
target's top-k next-token distribution.  ``--max-train-s`` bounds the training's wall time (it stops after the step
that passes it) and ``--pool-rows`` the distill pool's rows, so the run fits a shared CPU.  Saved in fp16 to
wisv/assets/smollm2-drafter/ with drafter.json, which ``python -m wisv.pairs build smollm2`` lays over the target's
copied layers; each epoch's layers also go to ``<cache>/distill/checkpoints/`` (AAL against distillation tokens).
"""
from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoTokenizer, LlamaForCausalLM

import config
from scripts.smollm2_distill_prompts import distill_prompts
from scripts.smollm2_qa_distill_prompts import qa_distill_prompts
from wisv.pairs import cache_dir, pair_dir
from wisv.pairs.drafter import ASSET_DIR, SPEC_FILE, early_exit
from wisv.pairs.fetch import sha256_file
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.pools import pool_path
from wisv.tasks.prompts import encode_prompt

WEIGHTS_FILE = "layers.safetensors"
POOL = "distill"  # the long-form pool distillation reads: calib is the decision head's, test the evaluation's


@dataclass
class DistillConfig:
    """One distillation run (its settings are saved in drafter.json)."""

    layers: list[int] = field(default_factory=lambda: [0, 1, 2, 3])  # target layers the drafter keeps, in order
    train_layers: list[int] = field(default_factory=lambda: [1, 2, 3])  # drafter layers trained (others: copied)
    prompts: int = 1152  # generic distillation prompts (scripts/smollm2_distill_prompts.py)
    max_new_tokens: int = 64  # target greedy generation length per generic prompt, tokens
    pool_rows: int = 160  # first rows of the long-form distill pool used (0: all; the pool spreads its kinds)
    pool_max_new_tokens: int = 64  # target greedy generation length per long-form prompt, tokens
    qa: bool = False  # add the old QA task's in-domain prompts (scripts/smollm2_qa_distill_prompts.py)
    qa_max_new_tokens: int = 48  # target greedy generation length per QA prompt, tokens
    head_min_ids: int = 0  # also keep token ids below this in the head's vocabulary (0: none)
    head_top_k: bool = True  # the head also keeps every id in the target's top-k at a generated position
    top_k: int = 8  # target logits kept per generated position for the soft loss
    soft_weight: float = 0.5  # weight of the top-k soft cross-entropy; the hard one gets 1 - this
    temperature: float = 1.0  # softmax temperature of the target's top-k logits
    gen_batch: int = 32  # prompts per batched generation
    epochs: int = 2  # passes over the distillation set
    max_train_s: float = 900.0  # stop training after the step that passes this wall time, s (0: no limit)
    batch: int = 8  # sequences per optimizer step
    lr: float = 1e-3  # peak AdamW learning rate (linear warm-up, cosine decay)
    warmup_steps: int = 20  # warm-up steps
    seed: int = 1234  # seeds prompt order, batching and torch
    threads: int = 1  # torch intra-op threads (1: the shared 2-core machine thrashes with 2)
    out: str = str(ASSET_DIR)  # where drafter.json and the trained weights go


def generate(target, tok, prompts: list[str], cfg: DistillConfig, tag: str, max_new: int, top_k: int) -> list[list]:
    """[prompt length, prompt + greedy continuation up to EOS, top-k ids, top-k logits] per prompt (the last two
    empty unless ``top_k``), batched, each batch cached on disk under ``tag``."""
    out, t0 = [], time.perf_counter()
    for i in range(0, len(prompts), cfg.gen_batch):
        key = hashlib.sha256(json.dumps([prompts[i:i + cfg.gen_batch], max_new, top_k]).encode()).hexdigest()[:16]
        path = cache_dir() / "distill" / f"smollm2-{tag}gen-{key}.json"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(generate_batch(target, tok, prompts[i:i + cfg.gen_batch], max_new, top_k)))
        out += [list(x) + [[], []][:4 - len(x)] for x in json.loads(path.read_text())]
        print(f"[generate] {tag}{len(out)}/{len(prompts)} prompts, {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def generate_batch(target, tok, prompts: list[str], max_new: int, top_k: int) -> list[list]:
    """One left-padded batch of greedy generations, with the target's top-k logits at each generated position."""
    eos, pad = target.generation_config.eos_token_id, target.generation_config.pad_token_id
    enc = [encode_prompt(tok, p) for p in prompts]
    width = max(map(len, enc))
    ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
    with torch.inference_mode():
        res = target.generate(ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False, eos_token_id=eos,
                              pad_token_id=pad, output_logits=top_k > 0, return_dict_in_generate=True)
    gen = res.sequences[:, width:].tolist()
    top = torch.stack(res.logits, 1).topk(top_k, -1) if top_k > 0 else None
    out = []
    for j, (e, g) in enumerate(zip(enc, gen)):
        g = g[:g.index(eos) + 1] if eos in g else g
        ti = top.indices[j, :len(g)].tolist() if top is not None else []
        tv = [[round(v, 3) for v in r] for r in top.values[j, :len(g)].tolist()] if top is not None else []
        out.append([len(e), e + g, ti, tv])
    return out


def next_token_labels(seq: list[int], prompt_len: int) -> list[int]:
    """The target's greedy next token at each position: the generated token that follows it (the generation is the
    target's greedy decoding); -1 (ignored) inside the prompt and at the last position."""
    return [-1] * (prompt_len - 1) + seq[prompt_len:] + [-1]


def _pad(chunk: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, chunk))
    ids = torch.tensor([s + [0] * (width - len(s)) for s in chunk])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in chunk])
    return ids, mask


def distill_set(target, tok, cfg: DistillConfig) -> list[dict]:
    """Rows (ids, labels, prompt_len, top-k ids and logits) from the target's greedy generations (cached per batch):
    the generic prompts', the long-form distill pool's and, with ``cfg.qa``, the old QA task's in-domain prompts'."""
    seqs = generate(target, tok, distill_prompts(cfg.prompts, cfg.seed), cfg, "generic-", cfg.max_new_tokens,
                    cfg.top_k)
    print(f"[data] long-form pool: {POOL} ({pool_path(POOL)})", flush=True)
    pool = read_jsonl(pool_path(POOL))[:cfg.pool_rows or None]
    seqs += generate(target, tok, [r["prompt"] for r in pool], cfg, f"{POOL}-",
                     cfg.pool_max_new_tokens, cfg.top_k)
    if cfg.qa:
        seqs += generate(target, tok, qa_distill_prompts(cfg.seed), cfg, f"qa-k{cfg.top_k}-", cfg.qa_max_new_tokens,
                         cfg.top_k)
    return [{"ids": s, "labels": next_token_labels(s, n), "prompt_len": n, "top_ids": ti, "top_logits": tv}
            for n, s, ti, tv in seqs]


def trainable(model: LlamaForCausalLM, train_layers: list[int]) -> dict[str, torch.nn.Parameter]:
    """Freeze everything but the trained layers and the final norm; returns those parameters by name."""
    names = tuple(f"model.layers.{i}." for i in train_layers) + ("model.norm.",)
    params = {}
    for name, p in model.named_parameters():
        p.requires_grad = name.startswith(names)
        if p.requires_grad:
            params[name] = p
    return params


def label_vocab(rows: list[dict], min_ids: int = 0, top_k: bool = False) -> torch.Tensor:
    """The kept vocabulary, sorted: every token id that is some position's label, the ids below ``min_ids`` and (with
    ``top_k``) every id in the target's top-k at some generated position.  The training loss's softmax and the
    drafter's head run over these only."""
    tops = {t for r in rows for pos in r["top_ids"] for t in pos} if top_k else set()
    return torch.tensor(sorted({t for r in rows for t in r["labels"] if t >= 0} | set(range(min_ids)) | tops))


def soft_targets(rows: list[dict], width: int, vocab: torch.Tensor, temperature: float) -> torch.Tensor:
    """(batch, width, len(vocab)) target distributions: the softmax of the target's top-k logits at each generated
    position of rows that carry them (tokens outside ``vocab`` dropped, renormalised); zero elsewhere."""
    out = torch.zeros(len(rows), width, len(vocab))
    for b, r in enumerate(rows):
        if not r["top_ids"]:
            continue
        ids, vals = torch.tensor(r["top_ids"]), torch.tensor(r["top_logits"]) / temperature
        pos = torch.searchsorted(vocab, ids).clamp(max=len(vocab) - 1)
        inside = vocab[pos] == ids
        p = torch.softmax(vals, -1) * inside
        p = p / p.sum(-1, keepdim=True).clamp(min=1e-9)
        start = r["prompt_len"] - 1
        out[b, start:start + len(ids)].scatter_(-1, pos, p)
    return out


def batch_loss(model, rows: list[dict], vocab: torch.Tensor, cfg: DistillConfig) -> torch.Tensor:
    """Weighted cross-entropy of the drafter against the target's greedy next tokens over the label vocabulary (a
    ~10x cheaper head than the full 49k), mixed (weight ``soft_weight``) with the cross-entropy against the target's
    top-k distribution on rows that carry it."""
    ids, mask = _pad([r["ids"] for r in rows])
    raw = _pad([r["labels"] for r in rows])[0]
    labels, weight = torch.searchsorted(vocab, raw.clamp(min=0)), (mask * (raw >= 0)).float()
    hidden = model.model(ids, attention_mask=mask).last_hidden_state
    logp = torch.log_softmax(hidden @ model.lm_head.weight[vocab].T, -1)
    hard = -logp.gather(-1, labels.clamp(max=len(vocab) - 1)[..., None])[..., 0]
    soft_p = soft_targets(rows, ids.shape[1], vocab, cfg.temperature)
    has_soft = (soft_p.sum(-1) > 0).float()
    soft = -(soft_p * logp).sum(-1)
    w_soft = cfg.soft_weight * has_soft
    loss = (1 - w_soft) * hard + w_soft * soft
    return (loss * weight).sum() / weight.sum()


def train(model, rows: list[dict], cfg: DistillConfig) -> list[float]:
    """AdamW over the trained parameters; returns the mean loss per epoch."""
    params = trainable(model, cfg.train_layers)
    opt = torch.optim.AdamW(params.values(), lr=cfg.lr, weight_decay=0.0)
    steps = cfg.epochs * ((len(rows) + cfg.batch - 1) // cfg.batch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / cfg.warmup_steps) * 0.5 * (
        1 + torch.cos(torch.tensor(torch.pi * s / steps)).item()))
    rng, losses, t0 = random.Random(cfg.seed), [], time.perf_counter()
    vocab, seen = label_vocab(rows, cfg.head_min_ids, cfg.head_top_k), 0
    print(f"[train] head vocabulary: {len(vocab)} tokens", flush=True)
    model.train()
    for epoch in range(cfg.epochs):
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]["ids"]))  # similar lengths share a batch
        batches = [order[i:i + cfg.batch] for i in range(0, len(order), cfg.batch)]
        rng.shuffle(batches)
        total, done = 0.0, 0
        for b in batches:
            loss = batch_loss(model, [rows[i] for i in b], vocab, cfg)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
            opt.step()
            sched.step()
            total, done = total + loss.item(), done + 1
            seen += sum(len(rows[i]["ids"]) - rows[i]["prompt_len"] for i in b)
            if cfg.max_train_s and time.perf_counter() - t0 > cfg.max_train_s:
                break
        losses.append(total / done)
        checkpoint(model, cfg, epoch + 1, seen)
        print(f"[train] epoch {epoch + 1}/{cfg.epochs}: loss {losses[-1]:.4f}, {done}/{len(batches)} steps, "
              f"{seen} tokens seen, {time.perf_counter() - t0:.0f} s", flush=True)
        if done < len(batches):
            print(f"[train] stopped: --max-train-s {cfg.max_train_s} passed", flush=True)
            break
    return losses


def checkpoint(model, cfg: DistillConfig, epoch: int, tokens: int) -> Path:
    """This epoch's trained tensors (fp16) under <cache>/distill/checkpoints/, named by the seed, the exit depth (if not
    the shipped 4 layers), the epoch and the generated tokens seen."""
    depth = "" if cfg.layers == [0, 1, 2, 3] else f"-L{len(cfg.layers)}"  # the shipped exit keeps the short name
    out = cache_dir() / "distill" / "checkpoints" / f"smollm2-s{cfg.seed}{depth}-e{epoch}-t{tokens}.safetensors"
    out.parent.mkdir(parents=True, exist_ok=True)
    names = trainable(model, cfg.train_layers)
    save_file({k: v.detach().to(torch.float16).contiguous() for k, v in names.items()}, str(out))
    return out


def save(model, rows: list[dict], cfg: DistillConfig, facts: dict) -> Path:
    """The trained tensors in fp16 and drafter.json (layers, weights file and its sha256, the head's vocabulary: the
    labels' tokens, training facts)."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    names = trainable(model, cfg.train_layers)
    save_file({k: v.detach().to(torch.float16).contiguous() for k, v in names.items()}, str(out / WEIGHTS_FILE))
    spec = {"layers": cfg.layers, "weights": WEIGHTS_FILE, "weights_sha256": sha256_file(out / WEIGHTS_FILE),
            "head_vocab": label_vocab(rows, cfg.head_min_ids, cfg.head_top_k).tolist(),
            "training": {"config": asdict(cfg) | {"out": None}, **facts}}
    (out / SPEC_FILE).write_text(json.dumps(spec, indent=1) + "\n")
    return out / SPEC_FILE


def parse_args(argv: list[str] | None = None) -> DistillConfig:
    return config.parse(DistillConfig, argv, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    target_dir = pair_dir("smollm2") / "target"
    target = LlamaForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(target_dir)
    t0 = time.perf_counter()
    rows = distill_set(target, tok, cfg)
    t_data = time.perf_counter() - t0
    model = early_exit(target, cfg.layers)
    del target
    losses = train(model, rows, cfg)
    facts = {"data_s": round(t_data, 1), "train_s": round(time.perf_counter() - t0 - t_data, 1),
             "tokens": sum(len(r["ids"]) for r in rows), "rows": len(rows), "pool": POOL,
             "generated_tokens": sum(len(r["ids"]) - r["prompt_len"] for r in rows),
             "epoch_losses": [round(x, 4) for x in losses],
             "threads": cfg.threads}
    print(f"wrote {save(model, rows, cfg, facts)}: {facts}")


if __name__ == "__main__":
    main()

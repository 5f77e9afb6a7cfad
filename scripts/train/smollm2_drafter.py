"""Distil the SmolLM2 pair's early-exit drafter on the target's own greedy generations (seeded, CPU, resumable).

Usage: ``python -m scripts.train.smollm2_drafter [--layers 0 1 2 3] [--epochs 4] [--prompts 5395] [--suite-rows -1]
[--free-rows -1] [--pool-rows -1] [--run-dir DIR]``, after ``python -m wisv.pairs build smollm2 --stages download
target``.  The drafter is the target's first layers, final norm and LM head restricted to a kept vocabulary (every
token of the generations and of the target's top-k there); the layers named in --train-layers and the final norm are
trained on the target's greedy generations of the sources of scripts/train/distill_sources.py: generic instructions, the
long-form distill pool, the broad suite's question and free-form distill pools (seen kinds only), optionally the old
QA task's prompts; never a calib or test pool nor the generic held-out set.  Loss: cross-entropy on the target's
greedy next token at every generated position, mixed with cross-entropy on the target's top-k distribution.

Resumable: the generations are cached prompt by prompt (scripts/train/distill_cache.py), and the training state is saved
atomically in the run directory every ``--checkpoint-steps`` steps or ``--checkpoint-s`` seconds
(scripts/train/distill_state.py); a run started again with the same settings goes on from there (``--fresh`` starts
over).  ``--max-train-s`` and ``--stop-after-steps`` pause a run (state saved) so that it fits a shared CPU.  The
trained tensors are also kept at milestones of generated tokens seen (``--milestone-tokens``) for
scripts/train/drafter_curve.py.
When every step is done: fp16 weights and drafter.json to wisv/assets/smollm2-drafter/, which ``python -m
wisv.pairs build smollm2`` lays over the target's copied layers.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoTokenizer, LlamaForCausalLM

import config
from scripts.train.distill_cache import cache_path, cached_generate
from scripts.train.distill_sources import Source, sources
from scripts.train.distill_state import config_mismatch, load_state, save_milestone, save_state, write_run
from wisv.pairs import cache_dir, pair_dir
from wisv.pairs.drafter import ASSET_DIR, SPEC_FILE, early_exit
from wisv.pairs.fetch import sha256_file
from wisv.tasks.prompts import encode_prompt

WEIGHTS_FILE = "layers.safetensors"
# Settings that do not change what a run computes: a resumed run may change them.
RUN_FREE = ("max_train_s", "stop_after_steps", "checkpoint_steps", "checkpoint_s", "threads", "out", "run_dir",
            "fresh", "gen_batch")
ADDED_LATER = ("magpie_rows", "magpie_max_new_tokens")  # settings added after runs were saved


@dataclass
class DistillConfig:
    """One distillation run (its settings are saved in drafter.json and the run directory)."""

    layers: list[int] = field(default_factory=lambda: [0, 1, 2, 3])  # target layers the drafter keeps, in order
    train_layers: list[int] = field(default_factory=lambda: [0, 1, 2, 3])  # drafter layers trained (others: copied)
    prompts: int = field(default=5395, metadata={"min": 0})  # generic distillation prompts (0: none)
    max_new_tokens: int = 64  # target greedy generation length per generic prompt, tokens
    pool_rows: int = field(default=-1, metadata={"min": -1})  # first rows of the long-form distill pool (-1: all)
    pool_max_new_tokens: int = 64  # target greedy generation length per long-form prompt, tokens
    suite_rows: int = field(default=-1, metadata={"min": -1})  # first rows of the suite's question pool (-1: all)
    suite_max_new_tokens: int = 64  # target greedy generation length per suite question, tokens
    free_rows: int = field(default=-1, metadata={"min": -1})  # first rows of the suite's free-form pool (-1: all)
    free_max_new_tokens: int = 96  # target greedy generation length per free-form instruction, tokens
    magpie_rows: int = field(default=0, metadata={"min": -1})  # first prompts of wisv/assets/magpie/prompts.jsonl,
    #   sampled from the target (scripts/train/magpie.py; -1: all, 0: none)
    magpie_max_new_tokens: int = 96  # target greedy generation length per Magpie prompt, tokens
    qa: bool = False  # add the old QA task's in-domain prompts (scripts/data/smollm2_qa_distill_prompts.py)
    qa_max_new_tokens: int = 48  # target greedy generation length per QA prompt, tokens
    head_min_ids: int = 0  # also keep token ids below this in the head's vocabulary (0: none)
    head_top_k: bool = True  # the head also keeps every id in the target's top-k at a generated position
    top_k: int = 8  # target logits kept per generated position for the soft loss
    soft_weight: float = 0.5  # weight of the top-k soft cross-entropy; the hard one gets 1 - this
    temperature: float = 1.0  # softmax temperature of the target's top-k logits
    gen_batch: int = 32  # prompts per batched generation
    epochs: int = 4  # passes over the distillation set
    batch: int = 8  # sequences per optimizer step
    lr: float = 1e-3  # peak AdamW learning rate (linear warm-up, cosine decay)
    warmup_steps: int = 20  # warm-up steps
    seed: int = 1234  # seeds prompt order, batching and torch
    milestone_tokens: list[int] = field(default_factory=lambda: [
        25_000, 50_000, 100_000, 200_000, 400_000, 800_000, 1_600_000, 3_200_000])  # generated tokens seen at which
    #   the trained tensors are kept for the learning curve (and at the end)
    checkpoint_steps: int = field(default=200, metadata={"min": 1})  # save the training state every N steps
    checkpoint_s: float = 300.0  # ... and after a step that passes this many seconds since the last save, s
    max_train_s: float = 0.0  # pause (state saved) after the step that passes this training wall time, s (0: none)
    stop_after_steps: int = field(default=0, metadata={"min": 0})  # pause after this many steps in this call (0: none)
    run_dir: str = ""  # the run's state and milestones ("": <cache>/distill/runs/smollm2-s<seed>[-L<depth>])
    fresh: bool = False  # discard the run directory's state and milestones, start at step 0
    threads: int = 1  # torch intra-op threads (1: the shared 2-core machine thrashes with 2)
    out: str = str(ASSET_DIR)  # where drafter.json and the trained weights go when every step is done


def run_dir(cfg: DistillConfig) -> Path:
    """The run directory: --run-dir, or one named by the seed and the exit depth under <cache>/distill/runs/."""
    if cfg.run_dir:
        return Path(cfg.run_dir)
    depth = "" if cfg.layers == [0, 1, 2, 3] else f"-L{len(cfg.layers)}"  # the shipped exit keeps the short name
    return cache_dir() / "distill" / "runs" / f"smollm2-s{cfg.seed}{depth}"


def run_config(cfg: DistillConfig) -> dict:
    """The settings that define what a run computes (a resumed run must have the same).  A setting added after runs
    were saved (``ADDED_LATER``) is left out while it has its default, so that those runs still resume."""
    later = {k: v for k, v in asdict(DistillConfig()).items() if k in ADDED_LATER}
    return {k: v for k, v in asdict(cfg).items() if k not in RUN_FREE and not (k in later and v == later[k])}


def target_identity(target_dir: Path) -> str:
    """A short hash of the built target (its build stamp and config): part of the generation cache's key."""
    parts = [target_dir.parent / "build.json", target_dir / "config.json"]
    return hashlib.sha256(b"".join(p.read_bytes() for p in parts if p.is_file())).hexdigest()[:16]


def _gen_settings(source: Source, cfg: DistillConfig, target_id: str) -> dict:
    return {"target": target_id, "max_new_tokens": source.max_new_tokens, "top_k": cfg.top_k}


def generation_cache(source: Source, cfg: DistillConfig, target_id: str) -> Path:
    """The cache file of a source's generations under these settings."""
    return cache_path(cache_dir() / "distill" / "gen", source.name, _gen_settings(source, cfg, target_id))


def generate(target, tok, source: Source, cfg: DistillConfig, target_id: str) -> list[list]:
    """[prompt length, prompt + greedy continuation up to EOS, top-k ids, top-k logits] per prompt of a source,
    cached prompt by prompt under <cache>/distill/gen/."""
    settings = _gen_settings(source, cfg, target_id)
    path = generation_cache(source, cfg, target_id)
    return cached_generate(source.prompts, path, settings, cfg.gen_batch,
                           lambda ps: generate_batch(target, tok, ps, source.max_new_tokens, cfg.top_k),
                           tag=f"{source.name}: ")


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


def distill_set(target, tok, cfg: DistillConfig, target_id: str) -> list[dict]:
    """Rows (ids, labels, prompt_len, top-k ids and logits, source) from the target's greedy generations of every
    source of scripts/train/distill_sources.py, in order (each checked against the held-out pools there)."""
    rows = []
    for src in sources(cfg):
        print(f"[data] {src.name}: {len(src.prompts)} prompts, up to {src.max_new_tokens} new tokens", flush=True)
        rows += [{"ids": s, "labels": next_token_labels(s, n), "prompt_len": n, "top_ids": ti, "top_logits": tv,
                  "source": src.name} for n, s, ti, tv in generate(target, tok, src, cfg, target_id)]
    return rows


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


def lr_at(step: int, total: int, cfg: DistillConfig) -> float:
    """The learning rate of optimizer step ``step`` (0-based) of ``total``: linear warm-up, cosine decay."""
    return cfg.lr * min(1.0, (step + 1) / cfg.warmup_steps) * 0.5 * (1 + math.cos(math.pi * step / total))


def epoch_batches(lengths: list[int], batch: int, seed: int, epoch: int) -> list[list[int]]:
    """One epoch's batches of row indices: rows of similar length together, batches in an order seeded by
    (seed, epoch) alone, so that a resumed run draws the same batches."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches = [order[i:i + batch] for i in range(0, len(order), batch)]
    random.Random(seed * 1000 + epoch).shuffle(batches)
    return batches


def train(model, rows: list[dict], vocab: torch.Tensor, cfg: DistillConfig, out_dir: Path) -> dict:
    """AdamW over the trained parameters, from the run directory's state if it has one; the state is saved every
    ``checkpoint_steps`` steps or ``checkpoint_s`` seconds and when paused, the trained tensors at each milestone.
    Returns the step reached, the steps in all, the generated tokens seen and the mean loss per finished epoch."""
    params = trainable(model, cfg.train_layers)
    opt = torch.optim.AdamW(params.values(), lr=cfg.lr, weight_decay=0.0)
    per_epoch = math.ceil(len(rows) / cfg.batch)
    total = cfg.epochs * per_epoch
    run = _resume(params, opt, cfg, out_dir, data_id(rows, vocab))
    lengths = [len(r["ids"]) for r in rows]
    t0 = last_save = time.perf_counter()
    done_now, batches = 0, {}
    model.train()
    while run["step"] < total:
        epoch, i = divmod(run["step"], per_epoch)
        batches = batches if epoch in batches else {epoch: epoch_batches(lengths, cfg.batch, cfg.seed, epoch)}
        b = [rows[j] for j in batches[epoch][i]]
        for g in opt.param_groups:
            g["lr"] = lr_at(run["step"], total, cfg)
        loss = batch_loss(model, b, vocab, cfg)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        run["step"], done_now = run["step"] + 1, done_now + 1
        run["tokens"] += sum(len(r["ids"]) - r["prompt_len"] for r in b)
        sums = run["loss_sums"].setdefault(epoch, [0.0, 0])
        sums[0], sums[1] = sums[0] + loss.item(), sums[1] + 1
        _milestones(params, run, cfg, out_dir, last=run["step"] == total)
        if run["step"] % per_epoch == 0:
            checkpoint(model, cfg, epoch + 1, run["tokens"])
            print(f"[train] epoch {epoch + 1}/{cfg.epochs}: loss {sums[0] / sums[1]:.4f}, step {run['step']}/{total}, "
                  f"{run['tokens']} tokens seen, {time.perf_counter() - t0:.0f} s", flush=True)
        paused = ((cfg.max_train_s and time.perf_counter() - t0 > cfg.max_train_s)
                  or (cfg.stop_after_steps and done_now >= cfg.stop_after_steps))
        if paused or run["step"] == total or run["step"] % cfg.checkpoint_steps == 0 \
                or time.perf_counter() - last_save > cfg.checkpoint_s:
            _save(params, opt, run, cfg, out_dir)
            last_save = time.perf_counter()
        if paused and run["step"] < total:
            print(f"[train] paused at step {run['step']}/{total} (state in {out_dir}): run again to go on", flush=True)
            break
    losses = [run["loss_sums"][e][0] / run["loss_sums"][e][1] for e in range(run["step"] // per_epoch)]
    return {"step": run["step"], "total": total, "tokens": run["tokens"], "epoch_losses": losses}


def data_id(rows: list[dict], vocab: torch.Tensor) -> str:
    """A hash of the distillation set and the head's vocabulary: a resumed run must train on the same."""
    h = hashlib.sha256(json.dumps(vocab.tolist()).encode())
    for r in rows:
        h.update(json.dumps([r["ids"], r["prompt_len"], r["top_ids"], r["top_logits"]]).encode())
    return h.hexdigest()[:16]


def _resume(params: dict, opt, cfg: DistillConfig, out_dir: Path, data: str) -> dict:
    """The run's counters, with the trained tensors, optimizer and RNG states restored from its saved state if it has
    one (a state saved under other run-defining settings or on other data is an error); fresh counters otherwise."""
    if cfg.fresh:
        (out_dir / "state.pt").unlink(missing_ok=True)
        shutil.rmtree(out_dir / "milestones", ignore_errors=True)
    state = load_state(out_dir)
    if state is None:
        return {"step": 0, "tokens": 0, "loss_sums": {}, "next_milestone": 0, "data": data}
    bad = config_mismatch(state["config"], run_config(cfg) | {"data": data})
    if bad:
        raise SystemExit(f"error: {out_dir} holds a run with other settings ({', '.join(bad)}): "
                         "give the same ones, another --run-dir, or --fresh")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(state["params"][name])
    opt.load_state_dict(state["optimizer"])
    random.setstate(state["python_rng"])
    torch.set_rng_state(state["torch_rng"])
    print(f"[train] resumed {out_dir} at step {state['step']}, {state['tokens']} tokens seen", flush=True)
    return {"step": state["step"], "tokens": state["tokens"], "next_milestone": state["next_milestone"],
            "loss_sums": {int(e): list(v) for e, v in state["loss_sums"].items()}, "data": data}


def _save(params: dict, opt, run: dict, cfg: DistillConfig, out_dir: Path) -> None:
    save_state(out_dir, {"params": {k: v.detach().clone() for k, v in params.items()},
                         "optimizer": opt.state_dict(), "step": run["step"], "tokens": run["tokens"],
                         "next_milestone": run["next_milestone"], "loss_sums": run["loss_sums"],
                         "python_rng": random.getstate(), "torch_rng": torch.get_rng_state(),
                         "config": run_config(cfg) | {"data": run["data"]}})


def _milestones(params: dict, run: dict, cfg: DistillConfig, out_dir: Path, last: bool) -> None:
    """Keep the trained tensors when the tokens seen pass the next milestone, and at the last step."""
    passed = [m for m in cfg.milestone_tokens[run["next_milestone"]:] if run["tokens"] >= m]
    if passed or last:
        save_milestone(out_dir, params, run["tokens"], run["step"])
        run["next_milestone"] += len(passed)


def checkpoint(model, cfg: DistillConfig, epoch: int, tokens: int) -> Path:
    """This epoch's trained tensors (fp16) under <cache>/distill/checkpoints/ (scripts/train/drafter_ceiling.py reads
    them), named by the seed, the exit depth (if not the shipped 4 layers), the epoch and the generated tokens seen."""
    depth = "" if cfg.layers == [0, 1, 2, 3] else f"-L{len(cfg.layers)}"  # the shipped exit keeps the short name
    out = cache_dir() / "distill" / "checkpoints" / f"smollm2-s{cfg.seed}{depth}-e{epoch}-t{tokens}.safetensors"
    out.parent.mkdir(parents=True, exist_ok=True)
    names = trainable(model, cfg.train_layers)
    save_file({k: v.detach().to(torch.float16).contiguous() for k, v in names.items()}, str(out))
    return out


def save(model, vocab: torch.Tensor, cfg: DistillConfig, facts: dict) -> Path:
    """The trained tensors in fp16 and drafter.json (layers, weights file and its sha256, the head's vocabulary,
    training facts)."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    names = trainable(model, cfg.train_layers)
    save_file({k: v.detach().to(torch.float16).contiguous() for k, v in names.items()}, str(out / WEIGHTS_FILE))
    spec = {"layers": cfg.layers, "weights": WEIGHTS_FILE, "weights_sha256": sha256_file(out / WEIGHTS_FILE),
            "head_vocab": vocab.tolist(), "training": {"config": asdict(cfg) | {"out": None, "run_dir": None}, **facts}}
    (out / SPEC_FILE).write_text(json.dumps(spec, indent=1) + "\n")
    return out / SPEC_FILE


def parse_args(argv: list[str] | None = None) -> DistillConfig:
    return config.parse(DistillConfig, argv, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_args(argv)
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    out_dir = run_dir(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)  # an unwritable --run-dir fails here, not after the generations
    print(f"[config] {json.dumps(asdict(cfg))}", flush=True)
    target_dir = pair_dir("smollm2") / "target"
    target = LlamaForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(target_dir)
    t0 = time.perf_counter()
    rows = distill_set(target, tok, cfg, target_identity(target_dir))
    t_data = time.perf_counter() - t0
    vocab = label_vocab(rows, cfg.head_min_ids, cfg.head_top_k)
    print(f"[train] {len(rows)} rows, head vocabulary: {len(vocab)} tokens, run directory {out_dir}", flush=True)
    write_run(out_dir, cfg.layers, vocab.tolist(), run_config(cfg))
    model = early_exit(target, cfg.layers)
    del target
    res = train(model, rows, vocab, cfg, out_dir)
    by_source = {}
    for r in rows:
        by_source[r["source"]] = by_source.get(r["source"], 0) + len(r["ids"]) - r["prompt_len"]
    facts = {"data_s": round(t_data, 1), "train_s": round(time.perf_counter() - t0 - t_data, 1),
             "tokens": sum(len(r["ids"]) for r in rows), "rows": len(rows), "generated_tokens_by_source": by_source,
             "generated_tokens": sum(by_source.values()), "tokens_seen": res["tokens"], "steps": res["total"],
             "epoch_losses": [round(x, 4) for x in res["epoch_losses"]], "threads": cfg.threads}
    if res["step"] < res["total"]:
        print(f"[train] not finished ({res['step']}/{res['total']} steps): {cfg.out} left as it was", flush=True)
    else:
        print(f"wrote {save(model, vocab, cfg, facts)}: {facts}", flush=True)
    return res | {"facts": facts}


if __name__ == "__main__":  # bad input (a value, a missing or unwritable path) is one line and exit 2
    sys.exit(config.run_reporting("python -m scripts.train.smollm2_drafter", main, (ValueError, OSError)))

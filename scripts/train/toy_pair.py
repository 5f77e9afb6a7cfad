"""Train the built-in toy pair (shared BPE tokenizer, Llama target and drafter) reproducibly on CPU.

Usage: ``python -m scripts.train.toy_pair [--out wisv/assets/toy-pair] [--stages tokenizer,drafter,target,card]``

Step counts are fixed (not wall-clock budgets), the seed is fixed, and torch runs single-process,
so a rerun on the same machine gives the same weights.  Weights are stored in fp16.
The ``card`` stage measures the shipped weights and writes MODEL_CARD.md and card.json.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

import config
from wisv.tasks.toydata import STYLE_FOLLOW, load_split

ROOT = Path(__file__).resolve().parents[2]

SPECIALS = {"pad_token": "<|pad|>", "bos_token": "<|bos|>", "eos_token": "<|eos|>"}
STAGES = ("tokenizer", "drafter", "target", "card")  # in the order they run
TRAINING = STAGES[:3]  # the stages that write the pair (and train_config.toml beside it)


@dataclass
class TrainConfig:
    """One training command (saved as <out>/train_config.toml when it trains)."""

    out: str = str(ROOT / "wisv/assets/toy-pair")  # the pair's directory: tokenizer/, drafter/, target/, the card
    stages: list[str] = field(default_factory=lambda: list(STAGES), metadata={"choices": STAGES})  # stages to run
    steps: int | None = None  # override each model's step count (pilot runs only; None: the spec's)
    save_at: list[int] = field(default_factory=list)  # steps to checkpoint as <out>/<name>-step<N> (pilot runs only)
    threads: int = 1  # torch intra-op threads (the shipped weights used 1)


@dataclass
class ModelSpec:
    """Architecture and optimisation settings of one model of the pair."""

    hidden_size: int  # model width d
    num_layers: int  # decoder blocks
    num_heads: int  # attention heads (head_dim = hidden_size / num_heads)
    intermediate_size: int  # MLP width d_ff
    steps: int  # optimizer steps taken (fixed for determinism)
    batch_size: int  # sequences per step
    lr: float  # peak AdamW learning rate
    warmup_steps: int  # linear warm-up steps before cosine decay
    schedule_steps: int | None = None  # length of the cosine schedule (None: steps); > steps stops early
    style_follow: float | None = STYLE_FOLLOW  # training data's per-problem wording style (None: uniform per slot)


TARGET = ModelSpec(192, 6, 6, 512, steps=1800, batch_size=48, lr=2e-3, warmup_steps=60)
# The drafter never sees a consistent per-problem wording style (style_follow=None), so it cannot
# infer it and makes harmless wording mismatches; it stops early on a longer schedule to stay weaker.
DRAFTER = ModelSpec(96, 3, 4, 256, steps=800, batch_size=48, lr=3e-3, warmup_steps=60, schedule_steps=1400,
                    style_follow=None)
VOCAB_SIZE = 700  # byte-level BPE: 256 bytes + merges + specials
SEED = 1234


def train_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """Byte-level BPE with every digit its own token."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=list(SPECIALS.values()),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return with_bos(PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIALS))


def with_bos(tok: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """Make ``tok(text)`` prepend BOS, as Llama-family tokenizers do."""
    bos = SPECIALS["bos_token"]
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, tok.convert_tokens_to_ids(bos))])
    return tok


def encode_problem(tok: PreTrainedTokenizerFast, prompt: str, solution: str) -> tuple[list[int], int]:
    """Token ids of bos+prompt+solution+eos, and the index where the solution starts."""
    p = tok(prompt).input_ids  # BOS + prompt
    s = tok.encode(" " + solution, add_special_tokens=False) + [tok.eos_token_id]
    return p + s, len(p)


def make_model(spec: ModelSpec, tok: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=spec.hidden_size, num_hidden_layers=spec.num_layers,
                      num_attention_heads=spec.num_heads, num_key_value_heads=spec.num_heads,
                      intermediate_size=spec.intermediate_size, max_position_embeddings=512,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    return LlamaForCausalLM(cfg)


def batch_tensors(rows: list[tuple[list[int], int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded input ids [B, S] and labels [B, S] with loss only on the solution."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for i, (r, start) in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        labels[i, start: len(r)] = torch.tensor(r[start:])
    return ids, labels


def lr_at(step: int, spec: ModelSpec) -> float:
    if step < spec.warmup_steps:
        return spec.lr * (step + 1) / spec.warmup_steps
    total = spec.schedule_steps or spec.steps
    frac = min(1.0, (step - spec.warmup_steps) / max(1, total - spec.warmup_steps))
    return spec.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))


def train_model(name: str, spec: ModelSpec, tok: PreTrainedTokenizerFast, data: list, out: Path,
                save_at: tuple[int, ...] = ()) -> dict:
    """Train one model for a fixed number of steps and save it in fp16; return a log."""
    torch.manual_seed(SEED)
    model = make_model(spec, tok)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.05, betas=(0.9, 0.98))
    gen = torch.Generator().manual_seed(SEED)
    log, t0 = [], time.time()
    model.train()
    for step in range(spec.steps):
        idx = torch.randint(len(data), (spec.batch_size,), generator=gen).tolist()
        ids, labels = batch_tensors([data[i] for i in idx], tok.pad_token_id)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, spec)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step + 1 in save_at:  # pilot checkpoints: out/<name>-step<N>
            model.save_pretrained(out / f"{name}-step{step + 1}")
            tok.save_pretrained(out / f"{name}-step{step + 1}")
        if step % 50 == 0 or step == spec.steps - 1:
            log.append({"step": step, "loss": round(loss.item(), 4), "elapsed_s": round(time.time() - t0, 1)})
            print(f"[{name}] step {step}/{spec.steps} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
    model.to(torch.float16).save_pretrained(out / name)
    tok.save_pretrained(out / name)
    info = {"spec": asdict(spec), "train_log": log, "train_time_s": round(time.time() - t0, 1)}
    (out / name / "train_log.json").write_text(json.dumps(info, indent=1))
    return info


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    return config.parse(TrainConfig, argv, prog="python -m scripts.train.toy_pair", description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    stages, out = args.stages, Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if any(s in stages for s in TRAINING):
        (out / "train_config.toml").write_text(config.to_toml(args, config.provenance()))
    train = load_split("train")
    if "tokenizer" in stages:
        tok = train_tokenizer([p.prompt + " " + p.solution for p in train])
        tok.save_pretrained(out / "tokenizer")
        print(f"tokenizer: {len(tok)} tokens")
    tok = with_bos(PreTrainedTokenizerFast.from_pretrained(out / "tokenizer"))
    for name, spec in (("drafter", DRAFTER), ("target", TARGET)):
        if name in stages:
            if args.steps:
                spec = ModelSpec(**{**asdict(spec), "steps": args.steps})
            problems = (train if spec.style_follow == STYLE_FOLLOW
                        else load_split("train", style_follow=spec.style_follow))
            data = [encode_problem(tok, p.prompt, p.solution) for p in problems]
            train_model(name, spec, tok, data, out, tuple(args.save_at))
    if "card" in stages:
        from scripts.cards.toy_card import write_card  # needs the speculative core
        write_card(out)


if __name__ == "__main__":
    main()

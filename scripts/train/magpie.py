"""Prompts of any kind, drawn from the SmolLM2 target itself (Magpie, arXiv 2406.08464): the chat template up to an
open user turn, sampled until the turn ends, is a question or request the model's own chat data made likely.

The broad suite's distill pools hold its seen kinds only, from templates; a drafter (or the feature head) trained on
them learns those kinds' phrasing.  These prompts widen the pool past any template without reading a calib or test
pool: each sample is kept only if it is a whole user turn of 4 to 60 words, new (by ``normalise_prompt``), in no
held-out pool, and shares no run of ``--overlap-words`` words with any suite, long-form or generic held-out prompt
(``keep_prompts``, pure; tests/wisv/tasks/test_pools.py checks the shipped file).

A draw can be steered: ``--system`` replaces the template's system turn, ``--starts`` opens each batch's user turns
with given words ("Who", "How many"), ``--questions-only`` keeps one-question turns, and ``--tails`` appends form
instructions (the suite's "Start with the answer, then ...") to the kept turns, after the filter (each row keeps its
sampled ``turn``).  The generations go to the distillation cache under the output folder's name (``magpie``,
``magpie-questions``).

Sampling is seeded per batch and resumable: each batch's raw samples are appended to ``OUT.raw.jsonl`` as it ends, and
a rerun samples only the batches it lacks.  The kept prompts go to ``--out`` (``wisv/assets/magpie/prompts.jsonl``)
with the config beside it.  ``--generate`` then makes the target's greedy generations of the kept prompts into the
distillation cache (source ``magpie``, scripts/train/distill_cache.py) and prints the cache file for
``train_feature_drafter --pool-files``.

Usage: ``python -m scripts.train.magpie [--samples 1600] [--seed 0] [--generate]``, after ``python -m wisv.pairs
build smollm2``.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import config
from scripts.train.distill_sources import held_out_prompts
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.pools import MAGPIE, normalise_prompt

WHOLE_TEXTS = {"parse": lambda raw: [raw] if isinstance(raw, str) else list(raw), "format": list, "min_len": 1}
#   one value per token, a comma inside it kept (form instructions have commas); a flag given bare is an error, not
#   the default draw


@dataclass
class MagpieConfig:
    """One Magpie draw from the SmolLM2 target, and its optional greedy generations."""

    samples: int = field(default=1600, metadata={"min": 1})  # user turns sampled (before filtering)
    batch: int = field(default=16, metadata={"min": 1})  # user turns sampled per batch
    seed: int = 0  # batch b is sampled under torch seed (seed * 1_000_003 + b)
    temperature: float = field(default=1.0, metadata={"min": 0.05})  # sampling temperature
    top_p: float = field(default=0.95, metadata={"min": 0.05, "max": 1.0})  # nucleus sampling mass
    max_prompt_tokens: int = field(default=64, metadata={"min": 8})  # a turn not ended by then is dropped, tokens
    min_words: int = field(default=4, metadata={"min": 1})  # shortest kept prompt, words
    max_words: int = field(default=60, metadata={"min": 1})  # longest kept prompt, words
    overlap_words: int = field(default=6, metadata={"min": 2})  # a prompt sharing a run of this many words with a
    #   held-out prompt is dropped
    system: str = ""  # a system turn that steers the draw ("": the chat template's own)
    starts: list[str] = field(default_factory=list, metadata=WHOLE_TEXTS)  # opening words of the user turn, batch b
    #   taking starts[b % n] (none: the model opens the turn)
    questions_only: bool = False  # keep only turns that are one question (a single "?", at the end)
    tails: list[str] = field(default_factory=list, metadata=WHOLE_TEXTS)  # form instructions appended to the kept
    #   turns, in turn (the filter reads the turn alone; none: the turn is the prompt)
    out: str = str(MAGPIE)  # kept prompts (JSONL); raw samples go to OUT.raw.jsonl
    generate: bool = False  # also make the target's greedy generations of the kept prompts (distillation cache)
    gen_batch: int = field(default=32, metadata={"min": 1})  # prompts per batched generation (the length and
    #   top-k are the distillation's: DistillConfig.magpie_max_new_tokens, top_k)
    threads: int = field(default=2, metadata={"min": 1})  # torch intra-op threads


def word_runs(text: str, n: int) -> set[tuple[str, ...]]:
    """Every run of n consecutive words of a text, as ``normalise_prompt`` writes them."""
    w = normalise_prompt(text).split()
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def keep_prompts(samples: list[tuple[str, bool]], held: list[str], cfg: MagpieConfig) -> tuple[list[str], dict]:
    """The samples (text, whether the user turn ended) that may be distilled on, in order, and why the rest went."""
    held_norm = {normalise_prompt(p) for p in held}
    held_runs = set().union(*(word_runs(p, cfg.overlap_words) for p in held)) if held else set()
    kept, seen, why = [], set(), {"unfinished": 0, "length": 0, "special": 0, "not_question": 0, "duplicate": 0,
                                  "held_out": 0, "overlap": 0}
    for text, ended in samples:
        text, words = text.strip(), len(text.split())
        norm = normalise_prompt(text)
        reason = ("unfinished" if not ended else "length" if not cfg.min_words <= words <= cfg.max_words
                  else "special" if "<|" in text
                  else "not_question" if cfg.questions_only and not is_question(text)
                  else "duplicate" if norm in seen
                  else "held_out" if norm in held_norm
                  else "overlap" if word_runs(text, cfg.overlap_words) & held_runs else None)
        if reason:
            why[reason] += 1
            continue
        seen.add(norm)
        kept.append(text)
    return kept, why


def is_question(text: str) -> bool:
    """One question: the turn's only "?" ends it."""
    return text.endswith("?") and text.count("?") == 1


def with_tails(turns: list[str], tails: list[str]) -> list[dict]:
    """The prompt rows of kept turns: turn i gets tails[i % len(tails)] appended (none: the turn is the prompt)."""
    rows = []
    for i, turn in enumerate(turns):
        row = {"prompt_id": f"mp-{i:05d}", "prompt": f"{turn} {tails[i % len(tails)]}" if tails else turn}
        rows.append(row | ({"turn": turn} if tails else {}) | {"raw": True})
    return rows


def user_turn_prefix(tok, system: str = "") -> str:
    """The chat template's text up to the start of a user turn's content (its system turn included: ``system``, or
    the template's own)."""
    mark = "\x00MAGPIE\x00"
    turns = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": mark}]
    text = tok.apply_chat_template(turns, tokenize=False)
    return text[:text.index(mark)]


def sample_batch(target, tok, prefix_ids: list[int], cfg: MagpieConfig, b: int) -> list[tuple[str, bool]]:
    """Batch b's user turns: (text, whether the turn ended within max_prompt_tokens); the turn opens with the batch's
    opening words, if any, and they are part of its text."""
    import torch
    end = tok.convert_tokens_to_ids("<|im_end|>")
    torch.manual_seed(cfg.seed * 1_000_003 + b)
    n = min(cfg.batch, cfg.samples - b * cfg.batch)
    start = cfg.starts[b % len(cfg.starts)] if cfg.starts else ""
    ids = torch.tensor([prefix_ids + tok(start, add_special_tokens=False).input_ids] * n)
    with torch.inference_mode():
        out = target.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=cfg.temperature,
                              top_p=cfg.top_p, top_k=0, max_new_tokens=cfg.max_prompt_tokens, eos_token_id=end,
                              pad_token_id=end)
    res = []
    for row in out[:, ids.shape[1]:].tolist():
        ended = end in row
        text = tok.decode(row[:row.index(end)] if ended else row, skip_special_tokens=True)
        res.append((start + text, ended))
    return res


def draw(target, tok, cfg: MagpieConfig, raw_path: Path) -> list[tuple[str, bool]]:
    """Every batch's samples, from the raw file where a batch is there, else sampled and appended."""
    done = {r["batch"]: r["samples"] for r in read_jsonl(raw_path)} if raw_path.is_file() else {}
    prefix_ids = tok(user_turn_prefix(tok, cfg.system), add_special_tokens=False).input_ids
    batches, t0 = -(-cfg.samples // cfg.batch), time.perf_counter()
    for b in range(batches):
        if b in done:
            continue
        done[b] = sample_batch(target, tok, prefix_ids, cfg, b)
        with raw_path.open("a") as f:
            f.write(json.dumps({"batch": b, "seed": cfg.seed, "samples": done[b]}) + "\n")
        print(f"[magpie] batch {b + 1}/{batches} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return [tuple(s) for b in range(batches) for s in done[b]]


def run(cfg: MagpieConfig) -> dict:
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from wisv.pairs import pair_dir
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(f"--out {out}: cannot make its directory ({e.strerror})") from e
    target_dir = pair_dir("smollm2") / "target"
    if not (target_dir / "config.json").is_file():
        raise FileNotFoundError(f"{target_dir}: no SmolLM2 target (python -m wisv.pairs build smollm2)")
    target = LlamaForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(target_dir)
    samples = draw(target, tok, cfg, out.with_suffix(".raw.jsonl"))
    kept, why = keep_prompts(samples, list(held_out_prompts()), cfg)
    rows = with_tails(kept, cfg.tails)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config.write_config_beside(out, cfg)
    print(f"[magpie] kept {len(kept)} of {len(samples)} samples in {out}; dropped {why}", flush=True)
    res = {"kept": len(kept), "samples": len(samples), "dropped": why}
    if cfg.generate:
        res["cache"] = str(generate_cache(target, tok, [r["prompt"] for r in rows], cfg))
        print(f"[magpie] generations: {res['cache']}", flush=True)
    return res


def generate_cache(target, tok, prompts: list[str], cfg: MagpieConfig) -> Path:
    """The target's greedy generations of the prompts, in the distillation cache as the drafter's training makes
    them, as the source named after the output's folder (``magpie``: ``train_smollm2_drafter --magpie-rows`` reads
    the same file)."""
    from scripts.train.distill_sources import Source
    from scripts.train.smollm2_drafter import DistillConfig, generate, generation_cache, target_identity
    from wisv.pairs import pair_dir
    dcfg = DistillConfig(gen_batch=cfg.gen_batch)
    source = Source(Path(cfg.out).parent.name, prompts, dcfg.magpie_max_new_tokens)
    target_id = target_identity(pair_dir("smollm2") / "target")
    generate(target, tok, source, dcfg, target_id)
    return generation_cache(source, dcfg, target_id)


def main(argv: list[str] | None = None) -> dict:
    return run(config.parse(MagpieConfig, argv, description=__doc__.splitlines()[0]))


if __name__ == "__main__":  # bad input (a value, a missing path) is one line and exit 2
    sys.exit(config.run_reporting("python -m scripts.train.magpie", main, (ValueError, OSError)))

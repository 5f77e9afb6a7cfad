"""Per-round acceptance traces of the in-process speculative loop, cached on disk as CSV (one file per key).

A trace is what the latency model needs from a (pair, prompts, K, rule) run: one record per round
(wisv.records.rows.RoundRow) with ``drafted``, ``accepted``, ``mismatches`` (greedy-mismatch count: head candidates
and SH queries), ``committed`` (tokens appended) and ``prefix_len`` (committed length L at the round's start,
prompt included), plus per-prompt ``prompt_len``, ``n_tokens`` and ``correct``; the fields only a live run
measures (bytes, times, CSI) are empty.  Rules: ``greedy`` (greedy SD and
lossless FH/SH), ``sampling`` (reject; seeded per prompt) and ``wisv`` (FH/SH with a decision head, whose
traces depend on the CSI the head sees and are therefore cached per link setting).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import pandas as pd
import torch

from channel.csi import CSI
from wisv.decoding.speculative import MismatchPolicy, SpecOutput, spec_rows, speculative_generate
from wisv.decoding.treespec import tree_generate, tree_rows
from wisv.records.rows import read_records, to_frame
from wisv.tasks.datasets import parse_spec
from wisv.tasks.prompts import prompt_rows
from wisv.tasks.qa import check_answer
from wisv.timing.protodesc import ProtocolDesc

TREE_RULE = "tree"  # greedy acceptance over a best-first tree of K tokens (a protocol that drafts trees)
RULES = ("greedy", "sampling", "wisv", TREE_RULE)  # what a trace replays (trace_rule: a protocol's)


def trace_rule(d: ProtocolDesc, head: bool) -> str:
    """The trace a protocol's rounds replay: a tree's, or its acceptance rule's (a WISV protocol without a ``head``
    accepts greedily; a model generating alone reads the greedy trace's output lengths, the target's)."""
    if d.tree:
        return TREE_RULE
    return "greedy" if d.head and not head else d.rule


@dataclass(frozen=True)
class TraceKey:
    """Everything a trace depends on; its hash names the cache file."""

    pair: str  # id of the model pair (pair_id)
    rule: str  # greedy | sampling | wisv | tree
    k: int  # draft window K
    prompts: int  # first N prompts of the prompt set (prompts_file, else the toy task's built-in test split)
    max_new_tokens: int  # budget per prompt
    seed: int = 0  # sampling: generator seed base (prompt i uses seed + i)
    temperature: float = 1.0  # sampling temperature
    head: str = ""  # wisv: id of the decision head (head_id)
    tau: float = 0.0  # wisv: threshold
    csi: tuple[float, ...] = ()  # wisv: the CSI the head conditions on (rate_up, rate_down, rtt, per_up, per_down)
    chat_template: str = "auto"  # prompt text through the tokenizer's chat template: auto | on | off
    prompts_file: str = ""  # JSONL prompt set (a pair's default: wisv.pairs.default_prompts_file); "": toy split
    dataset: str = ""  # a named set's first turns (wisv.tasks.datasets) instead of prompts_file; "": none

    def filename(self) -> str:
        d = asdict(self)
        if self.chat_template == "auto":
            del d["chat_template"]  # the default: the names of traces cached before the field existed still hold
        if self.prompts_file:  # the set's name and content, not where it lies (worktrees share one cache)
            d["prompts_file"] = prompt_set_id(Path(self.prompts_file))
        else:
            del d["prompts_file"]  # the toy split: the names of traces cached before the field existed still hold
        if self.dataset:  # the set's name and its file's content
            d["dataset"] = f"{self.dataset}@{prompt_set_id(parse_spec(self.dataset).path)}"
        else:
            del d["dataset"]  # no dataset: the names of traces cached before the field existed still hold
        digest = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.rule}-k{self.k}-n{self.prompts}-{digest}.csv"


def file_id(*paths: Path) -> str:
    """Short id of files/directories by resolved path, size and mtime (changes when a model is retrained)."""
    h = hashlib.sha1()
    for p in paths:
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file():
                st = f.stat()
                h.update(f"{f.resolve()}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:12]


def prompt_set_id(path: Path) -> str:
    """Id of a prompt file by name and content (another set, or an edited one, gets another id)."""
    if not path.is_file():
        raise FileNotFoundError(f"prompts file {path}: no such file")
    return f"{path.name}:{hashlib.sha1(path.read_bytes()).hexdigest()[:12]}"


def trace_rows(out: SpecOutput, prompt_id: str, prompt_len: int, correct: bool) -> list[dict]:
    """Rows of one prompt's trace (wisv.records.rows.RoundRow fields)."""
    return [asdict(r) for r in spec_rows(out, prompt_id, prompt_len, bool(correct))]


def generate_trace(pair, key: TraceKey, policy: MismatchPolicy | None = None, csi: CSI | None = None,
                   hidden_layer: int = -1) -> pd.DataFrame:
    """Run speculative_generate (tree: wisv.decoding.treespec.tree_generate) on each prompt with the key's rule and K
    (tree: its token budget); return the trace.

    ``policy``, ``csi`` and ``hidden_layer`` (the layer the head was trained on) matter for ``wisv`` only."""
    if key.rule not in RULES:
        raise ValueError(f"unknown rule {key.rule!r}; known: {RULES}")
    rows = []  # RoundRow
    for i, p in enumerate(trace_prompts(pair.tokenizer, key)):
        ids, pid = p["prompt_ids"], p["prompt_id"]
        correct = partial(_correct, pair.tokenizer, p["answer"])
        if key.rule == TREE_RULE:
            tree = tree_generate(pair.drafter, pair.target, ids, max_new_tokens=key.max_new_tokens, budget=key.k)
            rows += tree_rows(tree, pid, len(ids), correct(tree.tokens))
            continue
        gen = torch.Generator().manual_seed(key.seed + i) if key.rule == "sampling" else None
        out = speculative_generate(pair.drafter, pair.target, ids, max_new_tokens=key.max_new_tokens, draft_len=key.k,
                                   rule=key.rule, policy=policy, tau=key.tau, temperature=key.temperature,
                                   generator=gen, hidden_layer=hidden_layer, csi=csi)
        rows += spec_rows(out, pid, len(ids), correct(out.tokens))
    return to_frame(rows)


def trace_prompts(tokenizer, key: TraceKey) -> list[dict]:
    """The key's prompt rows (prompt_id, prompt_ids, answer): the first ``key.prompts`` of its named dataset (first
    turns: a second turn needs a first answer the traces do not fix), of its prompt file, or of the toy task's test
    split; ``wisv.tasks.qa.check_answer`` checks every kind of answer."""
    return prompt_rows(tokenizer, "test", key.prompts, key.prompts_file or None, need_answers=True,
                       chat_template=key.chat_template, dataset=key.dataset or None, first_turn_only=True)


def cached_trace(cache_dir: Path, key: TraceKey, make: Callable[[], pd.DataFrame]) -> tuple[pd.DataFrame, bool]:
    """(trace, hit): read the key's CSV from ``cache_dir``, or build it with ``make()`` and write it."""
    path = Path(cache_dir) / key.filename()
    if path.is_file():
        return read_records(path), True
    df = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    df.to_csv(tmp, index=False)
    tmp.replace(path)  # atomic: an interrupted run never leaves a half-written trace
    path.with_suffix(".json").write_text(json.dumps(asdict(key), indent=1))
    return df, False


def _correct(tokenizer, answer, tokens: list[int]) -> bool:
    """Whether generated ``tokens`` state ``answer`` (wisv.tasks.qa.check_answer on their text)."""
    return check_answer(tokenizer.decode(tokens), answer)

"""Prompts of a run (built-in test split, a JSONL file or a named dataset, with a two-turn question's second turn
built on the target's first answer) and the target-only greedy reference outputs (computed here, or with ``--edge``
asked of the remote edge)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch
import zmq
from tqdm import tqdm
from transformers import AutoConfig

from protocols.handshake import Vocab
from protocols.wire import Limits
from testbed.common.text import decoder
from testbed.live.edge.admission import OpenLimits, budget_refusal
from testbed.live.ue.client import Client, fetch_references
from testbed.live.ue.drafting import vocab_dir
from wisv.decoding.ngram import NGRAM
from wisv.models.loader import builtin_paths, load_model, load_tokenizer, resolve_dtype, vocab_facts
from wisv.tasks.evaluate import greedy_reference
from wisv.tasks.jsonl import write_jsonl
from wisv.tasks.prompts import answer_text, prompt_rows, second_turn_rows
from wisv.tasks.textquality import token_nll


def _target_dir(cfg) -> Path:
    return Path(cfg.edge.target) if cfg.edge.target else builtin_paths()[1]


def _tokenizer_dir(cfg) -> Path:
    """The target's directory; with a remote edge (no target here) the drafter's, which shares its tokenizer."""
    if cfg.remote_edge is None:
        return _target_dir(cfg)
    if cfg.ue.drafter == NGRAM:  # no drafter directory: where prompt lookup reads its vocabulary
        return vocab_dir(cfg.ue)
    return Path(cfg.ue.drafter) if cfg.ue.drafter else builtin_paths()[0]


def load_prompts(cfg, out_file: Path) -> tuple[pd.DataFrame, object]:
    """Resolve the run's prompts (``--dataset``, ``--prompts-file`` or the toy split), write them as JSONL
    (prompt_id, prompt_ids, answer; a dataset's category, turn and question_id) and return them."""
    tok = load_tokenizer(_tokenizer_dir(cfg), "tokenizer")
    rows = prompt_rows(tok, "test", cfg.prompts, cfg.prompts_file, chat_template=cfg.ue.chat_template,
                       dataset=cfg.dataset, first_turn_only=cfg.first_turn_only)
    check_context(cfg, rows)
    if any("turns" in r for r in rows):
        rows = with_target_second_turns(cfg, rows, tok)
        check_context(cfg, rows)
    write_jsonl(out_file, rows)
    return pd.DataFrame(rows), tok


def check_context(cfg, rows: list[dict]) -> None:
    """Refuse, before any reference or UE, prompts the local target cannot hold with the run's budget (the edge's
    own rule, ``budget_refusal``; a remote edge, or a target without a known context, applies it at OPEN)."""
    context = None if cfg.remote_edge else _context_tokens(_target_dir(cfg))
    if context is None:
        return
    lim = OpenLimits(max_draft_len=0, max_session_tokens=cfg.ue.max_new_tokens, context_tokens=context,
                     max_context_tokens=None)
    longest = max(rows, key=lambda r: len(r["prompt_ids"]))
    why = budget_refusal(lim, cfg.ue.max_new_tokens, len(longest["prompt_ids"]))
    if why:
        n = sum(len(r["prompt_ids"]) + cfg.ue.max_new_tokens > context for r in rows)
        raise ValueError(f"{n} of {len(rows)} prompts do not fit the target; the longest, {longest['prompt_id']}: "
                         f"{why}")


def _context_tokens(target_dir: Path) -> int | None:
    try:
        return getattr(AutoConfig.from_pretrained(target_dir), "max_position_embeddings", None)
    except (OSError, ValueError):  # no readable config.json: the edge finds out at OPEN
        return None


def with_target_second_turns(cfg, rows: list[dict], tok) -> list[dict]:
    """The rows with each two-turn question's second turn, built on the TARGET's greedy first answer (target-only,
    as the reference): every protocol then sees the same second prompt, and for a lossless protocol this is
    Spec-Bench's procedure (the model's own first answer fed back)."""
    firsts = pd.DataFrame([r for r in rows if "turns" in r])
    refs = _references(cfg, firsts, tok)
    return second_turn_rows(tok, rows, {pid: answer_text(tok, refs[pid]) for pid in firsts["prompt_id"]},
                            cfg.ue.chat_template)


def reference_outputs(cfg, prompts: pd.DataFrame, out_file: Path, tok=None) -> dict[str, list[int]]:
    """Target-only greedy outputs (what lossless protocols must reproduce), saved as JSONL; ``tok``: the prompts'
    tokenizer, whose vocabulary a remote edge checks first."""
    refs = _references(cfg, prompts, tok)
    decode = decoder(tok)
    write_jsonl(out_file, ({"prompt_id": k, "tokens": v, **({"text": decode(v)} if decode else {})}
                           for k, v in refs.items()))
    return refs


_DONE: dict[tuple, list[int]] = {}  # (where, prompt ids, max new tokens) -> the target's greedy output, this process


def _references(cfg, prompts: pd.DataFrame, tok) -> dict[str, list[int]]:
    """Target-only greedy outputs of the prompts, each computed once per process (second turns need the first
    turns' before the reference does)."""
    where = (cfg.remote_edge or str(_target_dir(cfg)), cfg.device, cfg.dtype, cfg.ue.max_new_tokens)
    key = {pid: (*where, tuple(ids)) for pid, ids in zip(prompts["prompt_id"], prompts["prompt_ids"])}
    todo = prompts[[k not in _DONE for k in key.values()]]
    if len(todo):
        got = _edge_references(cfg, todo, tok) if cfg.remote_edge else _local_references(cfg, todo)
        _DONE.update({key[pid]: tokens for pid, tokens in got.items()})
    return {pid: _DONE[k] for pid, k in key.items()}


def _local_references(cfg, prompts: pd.DataFrame) -> dict[str, list[int]]:
    torch.set_num_threads(1)
    target = load_model(_target_dir(cfg), "target", cfg.device, resolve_dtype(cfg.dtype, cfg.device))
    refs = {}
    for pid, ids in tqdm(list(zip(prompts["prompt_id"], prompts["prompt_ids"])), desc="target-only reference"):
        refs[pid] = greedy_reference(target, list(ids), cfg.ue.max_new_tokens)
    del target
    return refs


def _edge_references(cfg, prompts: pd.DataFrame, tok) -> dict[str, list[int]]:
    """Asked of the remote edge straight (not through an emulated link), which computes and caches them."""
    ctx = zmq.Context()
    limits = Limits(vocab_size=2**31 - 1)  # no model here: the edge's target bounds the ids it returns
    client = Client(ctx, cfg.remote_edge, "run-ref", limits, cfg.ue.recv_timeout_s, cfg.auth,
                    retry_s=cfg.ue.retry_s)
    try:
        rows = tqdm(prompts.to_dict("records"), desc="target-only reference (edge)")
        vocab = Vocab(*vocab_facts(None, tok)) if tok is not None else None
        return fetch_references(client, rows, cfg.ue.max_new_tokens, "run-ref", vocab)
    finally:
        client.close()
        ctx.term()


class TargetScorer:
    """The target's per-token NLL of an output given its prompt (the summaries' fluency), loaded on first use and
    cached per (prompt, output)."""

    def __init__(self, cfg, prompts: pd.DataFrame):
        self.cfg, self.model, self.cache = cfg, None, {}
        self.prompt_ids = {str(p): list(ids) for p, ids in zip(prompts["prompt_id"], prompts["prompt_ids"])}

    def __call__(self, prompt_id: str, tokens: list[int]) -> list[float]:
        key = (str(prompt_id), tuple(tokens))
        if key not in self.cache:
            if self.model is None:
                torch.set_num_threads(1)
                self.model = load_model(_target_dir(self.cfg), "target", self.cfg.device,
                                        resolve_dtype(self.cfg.dtype, self.cfg.device))
            self.cache[key] = token_nll(self.model, [self.prompt_ids[key[0]]], [list(tokens)])[0] if tokens else []
        return self.cache[key]

"""Per-sequence model state with a persistent KV cache: the UE's drafting side and the edge's verifying side.

Cache invariant: each session holds the committed sequence ``seq``; the model's KV cache covers a
prefix of it and the rest is *pending* (fed at the start of the next forward).  The verifier's
cache covers ``seq[:-1]`` after its prefill and after every commit, so a verification forwards only
``[seq[-1], y_1..y_K]`` (a session made with ``prefill=False`` feeds its prompt with the first draft instead).
``commit`` rolls the cache back to the committed prefix; the prefix is never re-run.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from transformers import DynamicCache, PreTrainedModel

from wisv.decoding.kvcache import crop_to, keep_positions
from wisv.decoding.leanstep import lean_forward, lean_ok
from wisv.decoding.lookuprule import NgramConfig
from wisv.decoding.passrows import pad_count
from wisv.decoding.rejection import draft_features
from wisv.decoding.siblings import sibling_inputs
from wisv.decoding.tree import node_mask, tree_positions, with_root
from wisv.head.features import SiblingRows


@dataclass
class Draft:
    """One drafted block.  Its tensors live on the host, whatever the drafter's device: they go on the wire (numpy),
    feed the host-side predictors, and a proactive block carried over joins the next one."""

    tokens: list[int]  # [K] drafted token ids
    hidden: torch.Tensor | None  # [K, d_d] hidden state that produced each token (float32)
    probs: torch.Tensor | None  # [K, V] drafter distributions (sampling only, float64)
    features: torch.Tensor | None = None  # [K, 4] rejection-predictor features of each step (wisv.decoding.rejection)
    parents: list[int] | None = None  # [K] tree draft's parent indices (-1: last committed token; wisv.decoding.tree)


@dataclass
class Block:
    """The target's single pass over ``[seq[-1]] + draft``."""

    logits: torch.Tensor  # [K+1, V] float32
    hidden: torch.Tensor  # [K+1, d_t] float32
    argmax: torch.Tensor  # [K+1] long


class _CachedModel:
    """A causal LM, its KV cache and the committed sequence."""

    def __init__(self, model: PreTrainedModel, prompt_ids: list[int], hidden_layer: int = -1):
        if not prompt_ids:
            raise ValueError("prompt_ids is empty")
        self.model, self.hidden_layer = model, hidden_layer
        self.cache, self.cached_len = DynamicCache(), 0
        self.seq = [int(t) for t in prompt_ids]

    def forward(self, ids: list[int], positions: torch.Tensor | None = None,
                mask: torch.Tensor | None = None, keep: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed ``ids`` after the cache; return logits [n, V] (the last ``keep`` rows only, if ``keep``) and hidden
        states [n, d] (float32).  ``positions`` and ``mask``: a tree forward's position ids and 4D attention mask
        (see cached_forward)."""
        out = cached_forward(self.model, self.cache, self.cached_len, ids, self.hidden_layer, positions, mask, keep)
        self.cached_len += len(ids)
        return out

    def rollback(self, length: int) -> None:
        """Keep only the first ``length`` cached positions."""
        if length < self.cached_len:
            crop_to(self.cache, length)
            self.cached_len = length

    def free(self) -> None:
        """Drop the KV cache (session end)."""
        self.cache, self.cached_len = DynamicCache(), 0


@runtime_checkable
class Drafting(Protocol):
    """What the UE's side of a round asks of a drafter's session (protocols/ue_side.py, protocols/rounds.py,
    protocols/ue_handover.py): a model's ``DraftSession`` (and its feature head's), and prompt lookup's
    ``NgramDraftSession`` (wisv/decoding/ngram.py), which has no model; a test checks each meets it."""

    seq: list[int]  # the committed sequence, prompt first
    reads_features: int  # target-feature rows it reads per round (0: none)
    hidden_size: int  # width of the hidden states its drafts carry (0: none), declared at OPEN
    prefill_pending: bool  # its next draft begins with reading the prompt
    last_prefill_s: float  # the last draft's read of the prompt, s (0.0: none)
    lookup: NgramConfig | None  # prompt lookup's rule, which the edge can run on the same tokens (None: a model's
    #   drafts, which only the drafter knows)

    def draft(self, k: int, *, sample: bool = False, temperature: float = 1.0, generator: torch.Generator | None = None,
              eos_token_id: int | None = None, stop: Callable[[torch.Tensor], bool] | None = None,
              features: bool = True) -> Draft: ...

    def draft_more(self, m: int, should_stop: Callable[[], bool]) -> Draft: ...

    def commit(self, tokens: list[int], carry: Draft | None = None) -> None: ...

    def agreement(self, tokens: list[int]) -> list[bool]: ...  # commit the target's tokens; at each the drafter
    #   would have proposed a token (a model: every one), whether it was that one

    def free(self) -> None: ...


class DraftSession(_CachedModel):
    """The drafter's view of one sequence (UE side)."""

    reads_features = 0  # target-feature rows it reads per round (take_features; wisv.decoding.featdraft: 1)
    lookup = None  # a model's drafts: no rule the edge could run (Drafting)

    def __init__(self, model: PreTrainedModel, prompt_ids: list[int], hidden_layer: int = -1):
        super().__init__(model, prompt_ids, hidden_layer)
        self.drafted: list[int] = []  # last block; all but its last token are in the cache after seq
        self.carry: Draft | None = None  # proactive tokens kept as the start of the next block (SpecEdge)
        self.last_prefill_s = 0.0  # the last draft's forward that read the prompt (and gave its first token), s; 0.0:
        #   it read none (auto prices a prompt's first block with it: wisv.timing.window.WindowTracker.learn_drafting)

    @property
    def hidden_size(self) -> int:
        """Width of the hidden states its drafts carry (``Draft.hidden``): what OPEN declares as drafter_hidden."""
        return int(self.model.config.hidden_size)

    @property
    def prefill_pending(self) -> bool:
        """The drafter has not read its prompt yet: its next draft begins with the prompt's prefill."""
        return self.cached_len == 0

    def draft(self, k: int, *, sample: bool = False, temperature: float = 1.0,
              generator: torch.Generator | None = None, eos_token_id: int | None = None,
              stop: Callable[[torch.Tensor], bool] | None = None, features: bool = True) -> Draft:
        """Propose up to ``k`` tokens after ``seq`` (stops early after EOS).  ``stop(features [4])`` is asked
        about every token after the first; True drops that token and ends the block (WISP's predictor).
        ``features``: compute each step's rejection-predictor features (``Draft.features``: the wire's block carries
        them); False skips them, and a softmax over the vocabulary per token, where no one reads them (no ``stop``)."""
        features = features or stop is not None
        toks, probs, hids, feats = [], [], [], []
        if self.carry is not None:  # reuse proactive tokens: they open this block
            c, self.carry = self.carry, None
            toks, hids, feats = list(c.tokens[:k]), list(c.hidden[:k]), list(c.features[:k])
        feed = (self.seq + toks)[self.cached_len:]
        self.last_prefill_s, prefill = 0.0, self.prefill_pending
        for _ in range(k - len(toks)):
            t0 = time.perf_counter()
            logits, hidden = self.forward(feed, keep=1)  # only the last position's logits are read
            if prefill:  # the prompt's read, timed apart: no cost per drafted token
                self.last_prefill_s, prefill = time.perf_counter() - t0, False
            last = logits[-1]  # [V]
            feat = draft_features(last[None])[0].cpu() if features else None  # [4]; on the host (see Draft)
            if sample:
                q = torch.softmax(last.double() / temperature, dim=-1)  # [V]
                y = int(torch.multinomial(q, 1, generator=generator))
                probs.append(q.cpu())
            else:
                y = int(last.argmax())
            if stop is not None and toks and stop(feat):
                probs = probs[: len(toks)]
                break
            toks.append(y)
            hids.append(hidden[-1].cpu())
            if feat is not None:
                feats.append(feat)
            feed = [y]
            if eos_token_id is not None and y == eos_token_id:
                break
        self.drafted = list(toks)  # a copy: draft_more extends it, the returned block stays as sent
        return Draft(toks, torch.stack(hids) if hids else None, torch.stack(probs) if probs else None,
                     torch.stack(feats) if feats else None)

    def draft_more(self, m: int, should_stop: Callable[[], bool]) -> Draft:
        """Proactive drafting (SpecEdge): greedily continue the block in flight by up to ``m`` tokens, checking
        ``should_stop()`` (the verdict has arrived) before each one."""
        toks, hids, feats = [], [], []
        while len(toks) < m and self.drafted and not should_stop():
            logits, hidden = self.forward((self.seq + self.drafted)[self.cached_len:], keep=1)
            y = int(logits[-1].argmax())
            toks.append(y)
            hids.append(hidden[-1].cpu())
            feats.append(draft_features(logits[-1][None])[0].cpu())
            self.drafted.append(y)
        return Draft(toks, torch.stack(hids) if hids else None, None, torch.stack(feats) if feats else None)

    def commit(self, tokens: list[int], carry: Draft | None = None) -> None:
        """Append committed tokens; keep the cache only where it agrees with the new sequence.  ``carry``:
        proactive tokens that follow ``tokens`` in the drafted sequence and open the next block."""
        base = len(self.seq)
        fed = self.drafted[: max(0, self.cached_len - base)]  # drafted tokens already in the cache
        after = tokens + (carry.tokens if carry else [])
        keep = min(common_len(fed, after), len(after) - 1)  # the last token stays pending: the next forward feeds it
        self.seq.extend(tokens)
        self.rollback(min(self.cached_len, base + keep))
        self.drafted, self.carry = [], carry if carry and carry.tokens else None


    def agreement(self, tokens: list[int]) -> list[bool]:
        """Commit ``tokens`` (the target's, generated without a draft) and say at each whether the drafter's greedy
        choice was that token: one pass over them, which the next block needs anyway."""
        self.commit(tokens)
        logits, _ = self.forward(self.seq[self.cached_len:-1], keep=len(tokens))  # rows before each token
        return [bool(a) for a in (logits.argmax(dim=-1).cpu() == torch.tensor(tokens))]


class VerifySession(_CachedModel):
    """The target's view of one sequence (edge side)."""

    def __init__(self, model: PreTrainedModel, prompt_ids: list[int], hidden_layer: int = -1, prefill: bool = True,
                 pad_to: Mapping[int, int] | None = None):
        """``prefill``: run the prompt now (an edge does it at OPEN, while the UE drafts its first block); False leaves
        it pending, and the first ``verify`` feeds it in the same pass as the draft (one target call fewer: the
        in-process loop, where nothing overlaps).  ``pad_to``: a plan (wisv.decoding.passrows) that pads a ``verify``
        pass of n rows to ``pad_to[n]`` with filler rows, dropped after (None: no padding)."""
        super().__init__(model, prompt_ids, hidden_layer)
        self.pad_to = pad_to
        if prefill:
            self.prefill()

    def prefill(self) -> None:
        """Bring the cache up to ``seq[:-1]`` (a no-op once it is); no logits are read."""
        if self.cached_len < len(self.seq) - 1:
            self.forward(self.seq[self.cached_len:-1], keep=1)

    def verify(self, draft: list[int]) -> Block:
        """One target pass over the last committed token and the draft (and, before the first, the pending
        prompt: only the last ``K + 1`` rows come back), padded as the session's plan says."""
        n, feed = len(draft) + 1, self.seq[self.cached_len:] + list(draft)
        pad = pad_count(len(feed), self.pad_to)
        logits, hidden = self.forward(feed + [self.seq[-1]] * pad, keep=n + pad)  # any filler token: it comes last
        if pad:
            self.rollback(self.cached_len - pad)
            logits, hidden = logits[:n], hidden[:len(feed)]
        return Block(logits, hidden[-n:], logits.argmax(dim=-1))

    def verify_siblings(self, draft: list[int], positions: list[int], tokens: list[int]) -> SiblingRows:
        """After ``verify(draft)``, before the commit: the sibling branch (wisv/decoding/siblings.py), ``tokens[i]``
        beside ``draft[positions[i]]``, in one pass fed after the chain's cached keys under the tree's mask.  The
        siblings' cache slots follow the chain's: ``commit`` crops them away with the rejected tail."""
        prefix = len(self.seq) - 1  # cache slots before the root
        if self.cached_len != prefix + 1 + len(draft):
            raise ValueError(f"verify_siblings needs the chain's pass first: the cache holds {self.cached_len} "
                             f"positions, not {prefix + 1 + len(draft)}")
        pos, mask = sibling_inputs(len(draft), positions, prefix, self.model.dtype)
        logits, hidden = self.forward(list(tokens), pos, mask)
        return SiblingRows(logits, hidden)

    def verify_tree(self, tokens: list[int], parents: list[int]) -> Block:
        """One target pass over the last committed token and a draft tree (wisv.decoding.tree): a 4D tree attention
        mask and position ids by depth.  Row 0 predicts after the root, row ``1 + i`` after node i."""
        self.prefill()
        rooted = with_root(parents)
        mask = node_mask(rooted, range(len(rooted)), range(len(rooted)), self.cached_len, self.model.dtype)
        pos = tree_positions(rooted, self.cached_len)
        logits, hidden = self.forward([self.seq[-1]] + list(tokens), pos, mask)
        return Block(logits, hidden, logits.argmax(dim=-1))

    def commit_path(self, tokens: list[int], path: list[int], next_token: int) -> list[int]:
        """After ``verify_tree``: commit the tree's accepted ``path`` (node indices, root's child first) and
        ``next_token``; the cache keeps the prefix, the root and the path's positions only (compacted)."""
        root = len(self.seq) - 1  # the root's cache slot; node i sits at root + 1 + i
        keep_positions(self.cache, list(range(root + 1)) + [root + 1 + i for i in path])
        self.cached_len = root + 1 + len(path)
        committed = [int(tokens[i]) for i in path] + [int(next_token)]
        self.seq.extend(committed)
        return committed

    def commit(self, draft: list[int], n_accepted: int, next_token: int) -> list[int]:
        """Commit ``draft[:n_accepted] + [next_token]``; roll the cache back to cover the new ``seq[:-1]``."""
        committed = list(draft[:n_accepted]) + [int(next_token)]
        self.rollback(len(self.seq) + n_accepted)
        self.seq.extend(committed)
        return committed


@torch.no_grad()
def cached_forward(model: PreTrainedModel, cache: DynamicCache, cached_len: int, ids: list[int],
                   hidden_layer: int = -1, positions: torch.Tensor | None = None,
                   mask: torch.Tensor | None = None, keep: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence's forward of ``ids`` after ``cached_len`` cached positions (the cache is extended in place):
    logits [n, V] (``keep`` > 0: only the last ``keep`` positions', [keep, V]: the LM head runs on those alone, as
    transformers' ``logits_to_keep``) and hidden states [n, d], float32.  A tree forward passes its ``positions`` [n]
    (by depth) and an additive 4D ``mask`` [1, 1, n, cached_len + n] (wisv.decoding.tree.node_mask); by default
    positions follow the cache.  Every pass into a plain Llama model that reads the final layer (a drafter's token,
    a target's block or tree) goes through wisv.decoding.leanstep: the same arithmetic without the forward's
    per-call Python."""
    if hidden_layer in (-1, model.config.num_hidden_layers) and lean_ok(model):
        logits, hidden = lean_forward(model, cache, cached_len, ids, keep, positions, mask)
        return logits.float(), hidden.float()
    dev = model.device
    x = torch.tensor([ids], dtype=torch.long, device=dev)  # [1, n]
    slots = torch.arange(cached_len, cached_len + len(ids), device=dev)  # [n] cache slots
    pos = slots if positions is None else positions.to(dev)
    extra = {} if mask is None else {"attention_mask": mask.to(device=dev, dtype=model.dtype)}
    out = model(input_ids=x, past_key_values=cache, use_cache=True, cache_position=slots,
                position_ids=pos.unsqueeze(0), output_hidden_states=True, logits_to_keep=keep, **extra)
    return out.logits[0].float(), out.hidden_states[hidden_layer][0].float()


def common_len(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n

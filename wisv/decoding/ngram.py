"""Model-free drafting by prompt lookup (n-gram matching): the device drafts with no model at all.

The proposal is vLLM's ``ngram`` method (``vllm/v1/spec_decode/ngram_proposer.py``,
``_find_longest_matched_ngram_and_propose_tokens``): the longest n-gram with ``prompt_lookup_min <= n <=
prompt_lookup_max`` that ends the context and occurs earlier in it; of its occurrences the earliest; the draft is the
``num_speculative_tokens`` tokens that followed it (fewer where the context ends first; none without a match).  The
parameter names are vLLM's.  ``NgramDraftSession`` is the DraftSession of such a drafter: the same ``draft`` and
``commit`` as the model's (wisv/decoding/sessions.py), a block of token ids only (no hidden states, probabilities or
features: a DRAFT of ids, and no head that reads the drafter's states can judge it).  ``propose`` is pure.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from wisv.decoding.lookuprule import NgramConfig
from wisv.decoding.sessions import Draft, common_len
from wisv.timing.protodesc import ProtocolDesc
from wisv.timing.window import AcceptanceHistory, expected_committed, update_history

NGRAM = "ngram"  # --drafter ngram: prompt lookup on the device instead of a drafter model directory


def refusal(d: ProtocolDesc, head_reads_drafter: bool, draft_features: bool = False) -> str | None:
    """Why a drafter of token ids only (prompt lookup: no hidden states, probabilities, features or tree) cannot run
    the protocol ``d`` (None: it can), read from its description: it must draft a chain whose DRAFT carries nothing a
    model yields (its ``uplink`` ids, and draft features only when not sent), and a decision head must read no drafter
    hidden states (``head_reads_drafter``: the edge's head does); a chooser (auto) then picks what uploads none."""
    names = {"hidden": "hidden states", "probs": "probabilities", "parents": "tree"}
    need = [names[f] for f in d.uplink if f in names] + (["hidden states"] if d.hidden_query else [])
    why = (("it generates with the drafter model alone" if d.generates == "drafter" else "")
           or ("it drafts a tree" if d.tree else "")
           or ("it samples the drafter's distribution" if d.samples else "")
           or (f"it uploads the drafter's {' and '.join(need)}" if need and not d.chooses else "")
           or ("the edge's decision head reads the drafter's hidden states" if d.head and head_reads_drafter else "")
           or ("--draft-features sends the drafter's confidence" if draft_features and d.speculative else ""))
    if not why:
        return None
    return (f"--drafter ngram drafts token ids only, and --protocol {d.name} cannot use it: {why} (use greedy, ef, "
            "or auto with a head that reads no drafter hidden states)")


def match(context: Sequence[int], min_n: int, max_n: int) -> tuple[int, int]:
    """(n, start): the longest n in [min_n, max_n] whose last-n-token suffix occurs earlier in ``context``, and where
    the tokens after its earliest occurrence start; (0, -1) when none does."""
    ctx = np.asarray(context, dtype=np.int64)
    for n in range(min(max_n, len(ctx) - 1), min_n - 1, -1):
        windows = np.lib.stride_tricks.sliding_window_view(ctx[:-1], n)  # [len - n, n]: occurrences ending before
        hits = np.flatnonzero((windows == ctx[-n:]).all(axis=1))
        if hits.size:
            return n, int(hits[0]) + n
    return 0, -1


def propose(context: Sequence[int], cfg: NgramConfig, k: int | None = None) -> list[int]:
    """The draft after ``context``: up to ``k`` (default ``num_speculative_tokens``) tokens that followed the longest
    earlier match of its suffix (vLLM's rule, see the module doc); [] without a match."""
    k = cfg.num_speculative_tokens if k is None else min(k, cfg.num_speculative_tokens)
    n, start = match(context, cfg.prompt_lookup_min, cfg.prompt_lookup_max)
    if n == 0 or k <= 0:
        return []
    return [int(t) for t in context[start:start + k]]


def named(context: Sequence[int], tokens: Sequence[int], cfg: NgramConfig) -> list[bool | None]:
    """At each of ``tokens`` after ``context``: whether prompt lookup's proposal after the tokens before it opened
    with that token; None where it proposed nothing (pure)."""
    seq, out = [int(t) for t in context], []
    for t in tokens:
        first = propose(seq, cfg, 1)
        out.append(first[0] == int(t) if first else None)
        seq.append(int(t))
    return out


def agree_streak(context: Sequence[int], tokens: Sequence[int], cfg: NgramConfig, streak: int = 0) -> int:
    """The run of consecutive tokens ending the sequence ``context + tokens`` whose token prompt lookup named first
    after the tokens before it (``named``), given ``streak`` such tokens ending ``context``: each of ``tokens`` the
    lookup proposed extends it, one it proposed nothing for or another token for ends it (0) (pure).  The edge reads
    it during a run it generates alone for a UE that drafts by lookup: a streak says the output is copying again."""
    for hit in named(context, tokens, cfg):
        streak = streak + 1 if hit else 0
    return streak


def padded_ms(ms_by_rows: Mapping[int, float], rows: int) -> float:
    """What a pass of ``rows`` rows costs when it may be padded to any measured count at least as large (the cheapest
    of those; wisv.decoding.passrows); a count past the measured ones costs what the largest measured one does, per
    row."""
    larger = [ms_by_rows[m] for m in ms_by_rows if m >= rows]
    if larger:
        return min(larger)
    top = max(ms_by_rows)
    return ms_by_rows[top] * rows / top


def costs_at(tables: Mapping[int, Mapping[int, float]], context: int) -> Mapping[int, float]:
    """Of pass-cost tables measured after several cached prefixes (prefix -> ms by rows), the one measured at the
    largest prefix not past ``context`` (the smallest one when every prefix is): a pass of several rows costs more,
    beside one row, after a long prompt than after a short one."""
    if not tables:
        raise ValueError("no pass-cost table")
    below = [p for p in tables if p <= context]
    return tables[max(below) if below else min(tables)]


def choose_len(ms_by_rows: Mapping[int, float] | None, p_accept: float, n_max: int) -> int:
    """How many of a proposal's ``n_max`` tokens to verify: the j in [0, n_max] with the most expected committed
    tokens (``1 + sum_{i<=j} p^i``, wisv.timing.window) per millisecond of a pass of j + 1 rows (``ms_by_rows``: the
    target's measured pass cost by rows; None: all ``n_max``).  j = 0 is a plain decode step.  Ties go to the smaller
    j."""
    if n_max <= 0 or not ms_by_rows:
        return max(0, n_max)
    rate = {j: expected_committed([p_accept] * j) / padded_ms(ms_by_rows, j + 1) for j in range(n_max + 1)}
    return max(rate, key=lambda j: (rate[j], -j))


class NgramDraftSession:
    """A drafter with no model: prompt lookup over the prompt and the output so far (DraftSession's interface)."""

    reads_features = 0  # target-feature rows it reads per round: none
    hidden_size = 0  # width of the hidden states its drafts carry: none (OPEN declares 0)
    prefill_pending = False  # no model: a lookup reads nothing ahead of a draft
    last_prefill_s = 0.0  # and so spends nothing reading the prompt, s

    def __init__(self, prompt_ids: list[int], cfg: NgramConfig | None = None,
                 ms_by_rows: Mapping[int, Mapping[int, float]] | None = None):
        """``ms_by_rows``: the target's pass cost by rows after each measured prefix (prefix -> rows -> ms;
        scripts/bench/pass_rows.py, ``costs_at``); given, each proposal is cut to the length with the most expected
        tokens per millisecond (``choose_len``) at the acceptance rate seen so far; None: every proposal goes
        whole."""
        if not prompt_ids:
            raise ValueError("prompt_ids is empty")
        self.cfg, self.ms_by_rows = cfg or NgramConfig(), ms_by_rows
        self.lookup: NgramConfig | None = self.cfg  # the rule an edge can run on the same tokens (Drafting)
        self.seq = [int(t) for t in prompt_ids]
        self.drafted: list[int] = []
        self.carry: Draft | None = None  # never set: prompt lookup has no proactive tokens
        self.history = AcceptanceHistory()  # the proposals' acceptance (decayed), for choose_len

    def draft(self, k: int, *, sample: bool = False, temperature: float = 1.0, generator: object = None,
              eos_token_id: int | None = None, stop: Callable | None = None, features: bool = True) -> Draft:
        """Up to ``k`` looked-up tokens after ``seq``, cut after EOS; an empty block when nothing matches (the round
        is then a plain decode step of the target).  Prompt lookup drafts greedily only."""
        if sample:
            raise ValueError("prompt lookup drafts token ids only: it cannot sample (use a greedy rule)")
        toks = propose(self.seq, self.cfg, k)
        costs = costs_at(self.ms_by_rows, len(self.seq)) if self.ms_by_rows else None
        toks = toks[: choose_len(costs, self.history.alpha, len(toks))]
        if eos_token_id is not None and eos_token_id in toks:
            toks = toks[: toks.index(eos_token_id) + 1]
        self.drafted = toks
        return Draft(toks, None, None)

    def draft_more(self, m: int, should_stop: Callable[[], bool]) -> Draft:
        """No proactive drafting: the lookup is free, so the next block is drafted when the verdict comes."""
        return Draft([], None, None)

    def commit(self, tokens: list[int], carry: Draft | None = None) -> None:
        """Append the committed tokens, and learn how much of the block was accepted (the committed tokens open with
        the accepted ones; the correction differs from the draft where it was rejected)."""
        if self.drafted:
            accepted = min(common_len(self.drafted, list(tokens)), len(self.drafted))
            self.history = update_history(self.history, len(self.drafted), accepted)
        self.seq.extend(int(t) for t in tokens)
        self.drafted = []

    def agreement(self, tokens: list[int]) -> list[bool]:
        """Commit ``tokens`` (the target's, generated without a draft: a round ``auto`` handed to the edge) and say
        at each token the lookup had a proposal for whether its first token was that one.  A token after no match is
        left out: the lookup proposes nothing there, and a round with no proposal teaches a verdict nothing either, so
        the acceptance rate stays that of proposals.  The proposals' own history (``choose_len``) learns nothing
        from it."""
        out = [hit for hit in named(self.seq, tokens, self.cfg) if hit is not None]
        self.seq.extend(int(t) for t in tokens)
        self.drafted = []
        return out

    def free(self) -> None:
        """Nothing cached."""

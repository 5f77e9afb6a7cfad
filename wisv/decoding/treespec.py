"""In-process tree speculative decoding (SpecEdge's drafting): draft a tree, verify it in one target pass, commit
the accepted path; optionally expand the best leaf as if during verification (proactive tree expansion)."""
from __future__ import annotations

import time
from dataclasses import dataclass

from transformers import PreTrainedModel

from wisv.decoding.sessions import Draft, DraftSession, VerifySession
from wisv.decoding.speculative import truncate_output
from wisv.decoding.tree import greedy_path
from wisv.decoding.treedraft import Score, aligned, draft_tree, expand_leaf
from wisv.records.rows import RoundRow, to_frame
from wisv.records.summary import summarize_rounds
from wisv.tasks.evaluate import eos_id


@dataclass
class TreeRound:
    """One tree round."""

    size: int  # nodes in the tree sent (carried chain included)
    depth: int  # the tree's depth
    accepted: int  # accepted depth: tree nodes committed on the accepted path
    committed: list[int]  # tokens appended to the output (after EOS/budget truncation)
    calls: int  # drafter forwards spent building the tree
    reused: int = 0  # proactive tokens carried into the next tree
    t_draft_s: float = 0.0  # building the tree, s
    t_verify_s: float = 0.0  # the target's tree pass and the path's commit, s
    t_proactive_s: float = 0.0  # proactive expansion of the best leaf, s (overlaps the link and verification live)


@dataclass
class TreeOutput:
    """New token ids and the per-round records."""

    tokens: list[int]
    rounds: list[TreeRound]

    @property
    def aal(self) -> float:
        """Accepted tree tokens per verification (bonus not counted), by wisv.records.summary (NaN with no round)."""
        return summarize_rounds(to_frame(tree_rows(self, "", 0)))["aal"]


def tree_generate(drafter: PreTrainedModel, target: PreTrainedModel, prompt_ids: list[int], *, max_new_tokens: int,
                  budget: int, width: int = 1, proactive: int = 0, max_depth: int = 64,
                  eos_token_id: int | None = None, score: Score | None = None,
                  children: int | None = None) -> TreeOutput:
    """Greedy tree speculative decoding of ``prompt_ids`` (lossless w.r.t. target greedy decoding); ``proactive``
    expands the best leaf by that many tokens each round before the verdict is read; ``score`` ranks candidates
    (None: drafter log-probabilities; wisv.decoding.treecal.Calibration.score: calibrated), ``children`` caps children
    per node (1: a chain of the best-scored tokens)."""
    if max_new_tokens < 1 or budget < 1:
        raise ValueError("max_new_tokens and budget must be >= 1")
    eos = eos_id(target) if eos_token_id is None else eos_token_id
    d, t = DraftSession(drafter, list(prompt_ids)), VerifySession(target, list(prompt_ids))
    out, rounds = [], []
    while len(out) < max_new_tokens:
        left = max_new_tokens - len(out)
        shape = TreeShape(max(1, min(budget, left - 1)), width, max_depth, score, children)  # as the live UE: >= 1
        rnd = tree_round(d, t, shape, proactive, eos)
        rnd.committed = truncate_output(rnd.committed, left, eos)
        rounds.append(rnd)
        out.extend(rnd.committed)
        if rnd.committed[-1] == eos:
            break
    return TreeOutput(out, rounds)


@dataclass
class TreeShape:
    """How one round's tree is built (wisv.decoding.treedraft.draft_tree's arguments)."""

    budget: int  # draft tokens (nodes) in the tree
    width: int = 1  # candidates added per drafter call
    max_depth: int = 64  # deepest node
    score: Score | None = None  # candidate ranking (None: drafter log-probabilities)
    children: int | None = None  # most children per node (None: no cap; 1: a chain)


def tree_round(d: DraftSession, t: VerifySession, shape: TreeShape, proactive: int, eos: int | None) -> TreeRound:
    """Draft a tree, verify it, commit the accepted path on both sides (reusing aligned proactive tokens)."""
    t0 = time.perf_counter()
    st = draft_tree(d, shape.budget, shape.width, shape.max_depth, eos, shape.score, shape.children)
    tree = st.tree
    t1 = time.perf_counter()
    blk = t.verify_tree(tree.tokens, tree.parents)
    path, nxt = greedy_path(tree.tokens, tree.parents, blk.argmax.tolist())
    committed = t.commit_path(tree.tokens, path, nxt)
    t2 = time.perf_counter()
    expand_leaf(d, st, proactive, lambda: False)
    t3 = time.perf_counter()
    carry = aligned(st, path, nxt)
    d.commit(committed, Draft(carry, None, None) if carry else None)
    return TreeRound(len(tree), tree.depth, len(path), committed, tree.calls, len(carry), t1 - t0, t2 - t1, t3 - t2)


def tree_rows(out: TreeOutput, prompt_id: str, prompt_len: int, correct: bool | None = None) -> list[RoundRow]:
    """The records of one in-process tree run, with each round's prefix length (as wisv.records.rows.spec_rows)."""
    rows, prefix = [], prompt_len
    for i, r in enumerate(out.rounds):
        rows.append(RoundRow(prompt_id=prompt_id, round=i, protocol="tree", drafted=r.size, accepted=r.accepted,
                             mismatches=0, committed=len(r.committed), prefix_len=prefix, prompt_len=prompt_len,
                             n_tokens=len(out.tokens), correct=correct, tree_size=r.size, tree_depth=r.depth,
                             accepted_depth=r.accepted, proactive_reused=r.reused))
        prefix += len(r.committed)
    return rows

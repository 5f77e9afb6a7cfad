"""Upload protocols behind one small interface, resolved by name: greedy, reject, fh, sh, ef, auto, tree.

A protocol says what the UE uploads with a draft block, which positions the edge queries for
hidden states afterwards, and which acceptance rule the edge applies.  ``ef`` runs WISV acceptance on a head that
reads only what the edge computes itself (wisv/head/features.py), so its uplink is greedy's.  ``auto`` is a UE-side
chooser among the WISV protocols that the edge's head can serve (see protocols/auto.py); each DRAFT names the protocol it used.  ``tree``
drafts a token tree instead of a chain (wisv/decoding/tree.py).  Where a round differs by its shape, a protocol names
the class that runs it on both sides (``rounds``: protocols/rounds.py for a chain, protocols/tree.py for the tree).
``PROTOCOLS`` is the one list of protocol names: everyone else asks it.  The module stays light (numpy only,
no torch), so that a CLI can import the names without loading models.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    from protocols.rounds import ChainRounds
    from wisv.decoding.sessions import Draft


class Protocol:
    """Base: token ids only, greedy acceptance, no hidden-state query."""

    name: ClassVar[str] = "greedy"
    rule: ClassVar[str] = "greedy"  # acceptance rule at the edge: greedy | sampling | wisv
    samples: ClassVar[bool] = False  # the drafter samples (and uploads q) instead of taking argmax

    def uplink(self, draft: Draft) -> dict[str, np.ndarray]:
        """Tensors of the DRAFT message."""
        return {"tokens": np.asarray(draft.tokens, dtype=np.int32)}  # [K]

    def query(self, mismatches: list[int]) -> list[int]:
        """Positions whose drafter hidden states the edge requests after verification."""
        return []

    def rounds(self) -> ChainRounds:
        """The protocol's round on both sides, where a chain and a tree differ (imported here, on use: it needs
        torch, and the names above must not)."""
        from protocols.rounds import ChainRounds
        return ChainRounds()


class Greedy(Protocol):
    """Greedy SD: uplink carries token ids only; accept up to the first mismatch."""


class Reject(Protocol):
    """Speculative sampling: uplink carries the drafter's full-vocabulary probabilities (fp16)."""

    name, rule, samples = "reject", "sampling", True

    def uplink(self, draft: Draft) -> dict[str, np.ndarray]:
        probs = draft.probs.float().numpy().astype(np.float16)  # [K, V]
        return super().uplink(draft) | {"probs": probs}


class FullHidden(Protocol):
    """WISV-FH: token ids plus drafter hidden states for all K positions, in one uplink."""

    name, rule = "fh", "wisv"

    def uplink(self, draft: Draft) -> dict[str, np.ndarray]:
        return super().uplink(draft) | {"hidden": draft.hidden.numpy().astype(np.float16)}  # [K, d_d]


class SelectiveHidden(Protocol):
    """WISV-SH: token ids first; the edge then requests hidden states at the mismatch positions only."""

    name, rule = "sh", "wisv"

    def query(self, mismatches: list[int]) -> list[int]:
        return list(mismatches)


class EdgeOnly(Protocol):
    """WISV-EF: token ids only, as greedy; the edge's head reads its own verification pass (no hidden upload)."""

    name, rule = "ef", "wisv"


class Auto(FullHidden):
    """Chooses a WISV protocol before each round from the live CSI and what the edge's head reads (protocols.auto)."""

    name = "auto"


class Tree(Protocol):
    """SpecEdge's tree drafting: a best-first draft tree (token ids + parent indices), greedy acceptance of the
    longest agreeing root path; the VERDICT names that path."""

    name = "tree"

    def uplink(self, draft: Draft) -> dict[str, np.ndarray]:
        return super().uplink(draft) | {"parents": np.asarray(draft.parents, dtype=np.int32)}  # [K]

    def rounds(self) -> ChainRounds:
        """The tree's round: draft, verify and accept a tree (protocols/tree.py)."""
        from protocols.tree import TreeRounds
        return TreeRounds()


PROTOCOLS: dict[str, type[Protocol]] = {p.name: p for p in (Greedy, Reject, FullHidden, SelectiveHidden, EdgeOnly, Auto,
                                                          Tree)}
ALL_PROTOCOLS = tuple(PROTOCOLS)  # every protocol's name, in the order testbed.run's "all" runs them
ROUND_PROTOCOLS = tuple(n for n, p in PROTOCOLS.items() if p is not Auto)  # what a DRAFT may name (auto: fh or sh)
WISV_PROTOCOLS = tuple(n for n in ROUND_PROTOCOLS if PROTOCOLS[n].rule == "wisv")  # the head decides; auto's choices
HIDDEN_PROTOCOLS = ("fh", "sh")  # WISV protocols that upload the drafter's hidden states


def servable(uploads_hidden: bool) -> tuple[str, ...]:
    """The WISV protocols a head can serve: fh and sh for a head that reads the drafter's hidden states, else ef."""
    return HIDDEN_PROTOCOLS if uploads_hidden else ("ef",)


def get_protocol(name: str) -> Protocol:
    """Resolve a protocol by name, with a clear error listing the known ones."""
    try:
        return PROTOCOLS[name]()
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; choose one of {sorted(PROTOCOLS)}") from None

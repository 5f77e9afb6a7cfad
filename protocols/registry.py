"""Upload protocols behind one small interface, resolved by name: greedy, reject, fh, sh, ef, auto, tree; and the two
baselines that do not speculate: server (the edge's target alone, streamed) and device (the UE's drafter alone).

A protocol is one description plus one round class.  The description is pure data (wisv.timing.protodesc: its name,
its acceptance rule, what its DRAFT carries per position, chain or tree, a second round trip, the head inputs it
serves, what it asks of the engine), kept below everyone who reads it.  Here each description becomes a ``Protocol``
class, which reads off it what the UE uploads (``uplink``), the positions the edge queries afterwards (``query``) and
the class that runs its round on both sides (``rounds``: protocols/rounds.py for a chain, protocols/tree.py for a
tree).  Adding a protocol whose round is a chain's or a tree's is therefore one description (and its test).

``ef`` runs WISV acceptance on a head that reads only what the edge computes itself (wisv/head/features.py), so its
uplink is greedy's.  ``auto`` is a UE-side chooser among the WISV protocols that the edge's head can serve (see
protocols/auto.py); each DRAFT names the protocol it used.  ``PROTOCOLS`` is the one list of protocol names and every
other list derives from the descriptions: nobody else compares a name.  The module stays light (numpy only, no
torch), so that a CLI can import the names without loading models.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from wisv.timing.protodesc import DESCRIPTIONS, ProtocolDesc, round_names, servable  # noqa: F401 (servable)

if TYPE_CHECKING:
    from protocols.rounds import ChainRounds
    from wisv.decoding.sessions import Draft


class _Described:
    """A protocol class's attribute read off its description (on the class and on its instances)."""

    def __set_name__(self, owner: type, field: str) -> None:
        self.field = field

    def __get__(self, obj: object, cls: type[Protocol]) -> object:
        return getattr(cls.desc, self.field)


class Protocol:
    """A protocol by its description (one subclass per description, ``protocol_class``): what its DRAFT carries, what
    the edge queries after verification, the class that runs its round."""

    desc: ClassVar[ProtocolDesc]
    name = _Described()  # desc.name
    rule = _Described()  # desc.rule: the acceptance rule at the edge, greedy | sampling | wisv
    samples = _Described()  # desc.samples: the drafter samples (and uploads q) instead of taking argmax

    def uplink(self, draft: Draft) -> dict[str, np.ndarray]:
        """Tensors of the DRAFT message: the token ids and what the description adds (the draft features are the UE
        session's to add)."""
        up = {"tokens": np.asarray(draft.tokens, dtype=np.int32)}  # [K]
        if "probs" in self.desc.uplink:
            up["probs"] = draft.probs.float().numpy().astype(np.float16)  # [K, V]
        if "hidden" in self.desc.uplink:
            up["hidden"] = draft.hidden.numpy().astype(np.float16)  # [K, d_d]
        if "parents" in self.desc.uplink:
            up["parents"] = np.asarray(draft.parents, dtype=np.int32)  # [K]
        return up

    def query(self, mismatches: list[int]) -> list[int]:
        """Positions whose drafter hidden states the edge requests after verification (sh: the mismatches)."""
        return list(mismatches) if self.desc.hidden_query else []

    def rounds(self) -> ChainRounds:
        """The protocol's round on both sides, where a chain and a tree differ (imported here, on use: they need
        torch, and the names above must not)."""
        if self.desc.tree:
            from protocols.tree import TreeRounds
            return TreeRounds()
        from protocols.rounds import ChainRounds
        return ChainRounds()


def protocol_class(d: ProtocolDesc) -> type[Protocol]:
    """The protocol of description ``d``."""
    return type(f"Protocol_{d.name}", (Protocol,), {"desc": d, "__doc__": f"The {d.name!r} protocol."})


PROTOCOLS: dict[str, type[Protocol]] = {n: protocol_class(d) for n, d in DESCRIPTIONS.items()}  # name -> class
ALL_PROTOCOLS = tuple(PROTOCOLS)  # every protocol's name, in the order testbed.run's "all" runs them
ROUND_PROTOCOLS = round_names()  # what a DRAFT may name: the speculative protocols but the choosers
WISV_PROTOCOLS = tuple(n for n in ROUND_PROTOCOLS if PROTOCOLS[n].desc.head)  # the head decides; auto's choices
HIDDEN_PROTOCOLS = servable(True)  # the WISV protocols that upload the drafter's hidden states (fh, sh)


def get_protocol(name: str) -> Protocol:
    """Resolve a protocol by name, with a clear error listing the known ones."""
    try:
        return PROTOCOLS[name]()
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; choose one of {sorted(PROTOCOLS)}") from None


def speedup_baseline(names: list[str]) -> str | None:
    """The first of ``names`` in which the edge's target generates alone (server-only): what a run's speed-ups are
    measured against; None when none of them does."""
    return next((n for n in names if PROTOCOLS[n].desc.generates == "target"), None)


def unserved(names: list[str], head_inputs: tuple[str, ...]) -> list[str]:
    """The protocols of ``names`` whose rounds a head reading ``head_inputs`` cannot decide: it reads a drafter input
    (the drafter's hidden states) that their DRAFT does not carry (pure; by the descriptions)."""
    return [n for n in names if not PROTOCOLS[n].desc.serves(tuple(head_inputs))]

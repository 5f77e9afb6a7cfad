"""The acceptance-policy interface every decider of greedy mismatches implements, and the two fixed policies.

A ``MismatchPolicy`` returns a repair (rejection) probability per greedy mismatch and the verifier rejects iff
``p >= threshold(tau, csi)``.  Its callers (the in-process loop, the edge's session, the edge server, the simulator,
the labeling stages) read only the members declared here, never probe for others.  Implementations: ``RejectAll``
and ``AcceptAll`` (here), the paper's head ``HeadPolicy`` (wisv/head/model.py) and the judges ``JudgePolicy``
(wisv/head/judges.py), saved and loaded through one ``kind`` table (wisv/head/store.py) of ``Kind`` entries (here,
so that a plugin's policy imports only this module: docs/extend.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from channel.csi import CSI
from wisv.head.features import EdgeFeatures

FIXED_TAU = 0.5  # the operating threshold a fixed policy reports (it ignores tau, except that tau = 0 is greedy)


@runtime_checkable
class MismatchPolicy(Protocol):
    """WISV acceptance policy: rejection probability for each greedy-mismatch position, and the threshold in force.

    ``inputs`` names what the policy reads: ``h_draft`` (the drafter's hidden states: they cost uplink, fh/sh),
    ``h_target`` (the target's), ``edge`` and ``h_after`` (the edge's free features, wisv.head.features) and ``csi``
    (its decisions depend on the link).  A policy that does not read ``h_draft`` is served by the ``ef`` protocol,
    which uploads nothing beyond greedy's token ids."""

    inputs: tuple[str, ...]  # named inputs it reads (see above)
    tau: float  # its own operating threshold: reject iff p >= tau (--tau overrides it)
    hidden_layer: int  # the hidden-state layer both sides record for it (-1: final, post-norm)
    d_draft: int | None  # width of the drafter hidden states it reads (None: it reads none)
    d_target: int | None  # width of the target hidden states it reads (None: it reads none)
    flops_dims: tuple[int, int]  # (H, d_c) the latency model charges per queried mismatch (eq. 17); (0, 0): free

    def threshold(self, tau: float, csi: CSI | None) -> float:
        """The threshold in force on this round's link, given the run's ``tau``."""
        ...

    def reject_probs(self, h_draft: torch.Tensor | None, h_target: torch.Tensor | None, positions: list[int],
                     csi: CSI | None = None, edge: EdgeFeatures | None = None) -> torch.Tensor:
        """h_draft: [m, d_d] (None when not uploaded), h_target: [m, d_t], link state, edge features -> [m]
        probabilities in [0, 1]."""
        ...


class FixedPolicy:
    """A policy that reads nothing and answers the same for every mismatch."""

    inputs: tuple[str, ...] = ()
    tau: float = FIXED_TAU
    hidden_layer: int = -1
    d_draft: int | None = None
    d_target: int | None = None
    flops_dims: tuple[int, int] = (0, 0)
    p: float = 1.0  # the repair probability of every mismatch

    def threshold(self, tau: float, csi: CSI | None) -> float:
        return tau

    def reject_probs(self, h_draft: torch.Tensor | None, h_target: torch.Tensor | None, positions: list[int],
                     csi: CSI | None = None, edge: EdgeFeatures | None = None) -> torch.Tensor:
        return torch.full((len(positions),), self.p)


class RejectAll(FixedPolicy):
    """Rejects every mismatch: the greedy-equivalent policy (``--head none``)."""

    p = 1.0


class AcceptAll(FixedPolicy):
    """Accepts every mismatch: commits the full draft every round (the accept-everything limit)."""

    p = 0.0


@dataclass(frozen=True)
class Kind:
    """How one kind of stored policy is built and named on disk (wisv.head.store's ``KINDS``; a plugin's
    ``wisv_testbed.policies`` entry point loads one)."""

    policy: type  # the policy class: from_config(raw, where) -> an untrained policy; .kind, .cfg, .model
    stem: str  # its files: <stem>.json and <stem>.safetensors

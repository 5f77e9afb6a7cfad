"""Decision heads as named-input judges: ours on the edge's free features, and the published judges as peers.

Every judge is a ``MismatchPolicy`` (wisv.head.policy): it returns a repair probability per mismatch and the
verifier rejects iff p >= tau.  Its ``JudgeConfig`` names the inputs it reads, so the edge knows at OPEN whether the
UE must upload the drafter's hidden states:

- ``edge``: the scalar edge features of wisv/head/features.py (free: the verification pass computes them); a judge
  reads their first ``dims`` columns, so one of the nine one-pass columns (every judge shipped before the sibling
  columns) scores as before, and one that reads the ``sib_*`` columns needs the edge's sibling pass;
- ``h_after``: the target's hidden state after reading the draft token (free);
- ``h_target``, ``h_draft``: the target's and the drafter's hidden states at the mismatch (``h_draft`` costs uplink:
  fh or sh).

Kinds (``JudgeConfig.kind``):
- ``linear``: an MLP (``hidden`` 0: logistic regression) over the standardised concatenated inputs.  Ours reads
  ``edge``; the AutoJudge-style peer (arXiv 2504.20039) ``h_draft`` + ``h_target``; the Judge-Decoding-style peer
  (arXiv 2501.19309) ``h_after``.
- ``fly``: FLy-style (arXiv 2511.22972), no training: a mismatch may be kept only if the target agrees with the next
  ``window`` draft tokens (fewer where the block ends, none when it is the last); then p = exp(-entropy), so tau is
  an entropy gate (keep iff entropy > -ln tau).
- ``nll-margin``: p = 1 - exp(-(NLL of the draft token - NLL of the target's)), so tau is a margin in nats.

CSI-awareness by threshold (``tau_mode = "link"``): an accepted mismatch saves the wireless part of a round,
``t_link(csi)``, the latency model's time of one request/reply exchange (wisv.timing.latency: RTT plus the round's
bits, ``link_bits``, at the link's rates), so the harm a link may afford per accepted mismatch grows with it.
The judges stage chooses tau on dev twice, on a poor link with the full harm budget and on a good link with the budget
scaled by t_link(good) / t_link(poor); the threshold in force follows the power law through both points,
``tau(csi) = min(tau_cap, tau * (t_link(csi) / t_ref_s) ** gamma)`` (``tau`` at ``t_ref_s``, the poor link):
strict on a good link, bold on a poor one.

A judge is a directory: ``judge.json`` (its ``JudgeConfig``, whose ``kind`` is the store's) and, for a linear one,
``judge.safetensors``, written and read by wisv/head/store.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from channel.csi import CSI
from wisv.head.features import BASE_SCALARS, EdgeFeatures
from wisv.head.guard import GuardConfig, guard
from wisv.head.model import Scorer
from wisv.timing.latency import t_single_exchange

KINDS = ("linear", "fly", "nll-margin")
INPUTS = ("edge", "h_after", "h_target", "h_draft")  # what a judge may read (csi enters through tau_mode)
LINK_BITS = (960.0, 960.0)  # t_link's round before judges saved their own: 120 bytes each way (ids + headers)


@dataclass(frozen=True)
class JudgeConfig:
    """One judge: what it reads, its shape and its operating point."""

    name: str  # e.g. edge, autojudge, judge-decoding, fly, nll-margin
    kind: str = "linear"  # linear | fly | nll-margin
    inputs: tuple[str, ...] = ("edge",)  # named inputs (INPUTS), concatenated in this order
    dims: tuple[int, ...] = (len(BASE_SCALARS),)  # width of each input (edge: its first dims columns, SCALARS order)
    hidden: int = 0  # MLP hidden width (0: logistic regression)
    window: int = 3  # fly: draft tokens after the mismatch the target must agree with
    tau: float = 0.5  # operating threshold (reject iff p >= tau); with tau_mode link: tau on the reference link
    tau_mode: str = "fixed"  # fixed: tau everywhere | link: tau(csi) = min(tau_cap, tau (t_link(csi) / t_ref_s)^gamma)
    t_ref_s: float = 0.0  # link mode: t_link of the reference (poor) link where tau was chosen, s
    gamma: float = 1.0  # link mode: how steeply tau follows the link's round time (fitted on dev)
    tau_cap: float = 0.95  # link mode: the largest tau on any link
    link_bits: tuple[float, float] = LINK_BITS  # link mode: (up, down) bits of the round t_link charges
    guard_top1_min: float | None = None  # reject whenever the target's top-1 probability is at least this (None: off)
    guard_margin_nats: float | None = field(  # reject whenever NLL(draft) - NLL(target) is at least this,
        default=None)  # nats (None: off)
    guard_protect_tokens: int | None = field(  # reject every mismatch among the output's first this many
        default=None)  # tokens (None: off)
    notes: dict = field(default_factory=dict)  # provenance: training run, dev rule, counts

    @property
    def d_in(self) -> int:
        return sum(self.dims)

    @property
    def guard_config(self) -> GuardConfig | None:
        """The sure-target guard (wisv/head/guard.py), None when the judge has none."""
        if self.guard_top1_min is None and self.guard_margin_nats is None and not self.guard_protect_tokens:
            return None
        return GuardConfig(1.01 if self.guard_top1_min is None else self.guard_top1_min,
                           float("inf") if self.guard_margin_nats is None else self.guard_margin_nats,
                           self.guard_protect_tokens or 0)

    @property
    def uploads_hidden(self) -> bool:
        """Whether the UE must upload the drafter's hidden states (fh/sh) for this judge."""
        return "h_draft" in self.inputs


class LinearJudge(Scorer):
    """Standardised inputs -> (linear | linear-relu-linear) -> logit."""

    def __init__(self, cfg: JudgeConfig):
        super().__init__(cfg.d_in)
        self.cfg = cfg
        layers = [nn.Linear(cfg.d_in, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 1)] if cfg.hidden else \
            [nn.Linear(cfg.d_in, 1)]
        self.net = nn.Sequential(*layers)

    def score(self, x: torch.Tensor) -> torch.Tensor:
        """Standardised x [N, d_in] -> [N, 1]."""
        return self.net(x)


def t_link_s(csi: CSI, link_bits: tuple[float, float] = LINK_BITS) -> float:
    """The wireless part of one round on ``csi``: the latency model's request/reply exchange of ``link_bits``."""
    return t_single_exchange(*link_bits, csi)


def link_tau(cfg: JudgeConfig, tau: float, csi: CSI | None) -> float:
    """The threshold in force on ``csi``: ``tau`` in fixed mode; in link mode ``min(tau_cap, tau (t_link / t_ref_s) **
    gamma)`` (``tau``: the judge's own or an overriding --tau, which so moves every link's threshold alike); with no
    CSI reported the ideal link (t_link 0), the strictest reading: 0, greedy."""
    if cfg.tau_mode != "link" or cfg.t_ref_s <= 0:
        return tau
    t = t_link_s(csi, cfg.link_bits) if csi is not None and not csi.is_ideal else 0.0
    return min(cfg.tau_cap, tau * (t / cfg.t_ref_s) ** cfg.gamma)


def gather_inputs(cfg: JudgeConfig, h_draft: torch.Tensor | None, h_target: torch.Tensor | None,
                  edge: EdgeFeatures | None) -> torch.Tensor:
    """The judge's inputs at m mismatches, concatenated in cfg.inputs order: [m, d_in]."""
    have = {"h_draft": h_draft, "h_target": h_target, "edge": None if edge is None else edge.scalars,
            "h_after": None if edge is None else edge.h_after}
    parts = []
    for name, dim in zip(cfg.inputs, cfg.dims):
        x = have[name]
        if x is None:
            raise ValueError(f"judge {cfg.name!r} reads {name!r}, which this round does not carry"
                             + (" (serve it with fh or sh)" if name == "h_draft" else ""))
        if name == "edge" and x.shape[-1] > dim:  # new columns come at the end: a narrower judge reads the first
            x = x[:, :dim]
        if x.shape[-1] != dim:
            raise ValueError(f"judge {cfg.name!r} expects {name} of width {dim}, got {x.shape[-1]}")
        if name == "edge" and bool(x.isnan().any()):
            raise ValueError(f"judge {cfg.name!r} reads the sibling columns, which this round does not carry "
                             "(turn the edge's sibling pass on)")
        parts.append(x.float().cpu())
    return torch.cat(parts, dim=-1)


def rule_probs(cfg: JudgeConfig, edge: EdgeFeatures) -> torch.Tensor:
    """Repair probabilities of the training-free judges (fly, nll-margin) from edge features: [m]."""
    if cfg.kind == "nll-margin":
        return 1.0 - torch.exp(-edge.column("nll_margin").clamp_min(0))
    need = torch.minimum(edge.column("remaining"), torch.tensor(float(cfg.window)))
    agrees = (edge.column("lookahead") >= need) & (edge.column("remaining") > 0)
    return torch.where(agrees, torch.exp(-edge.column("entropy")), torch.ones(len(edge)))


class JudgePolicy:
    """A judge as the verifier's MismatchPolicy, with its link-dependent threshold; its ``kind`` is its config's."""

    def __init__(self, cfg: JudgeConfig, model: LinearJudge | None = None):
        if cfg.kind not in KINDS:
            raise ValueError(f"judge kind {cfg.kind!r}: expected one of {KINDS}")
        if (cfg.kind == "linear") != (model is not None):
            raise ValueError(f"judge {cfg.name!r}: a linear judge has a model, a rule ({cfg.kind}) none")
        self.cfg, self.model = cfg, None if model is None else model.eval()
        self.kind, self.tau, self.hidden_layer = cfg.kind, cfg.tau, -1  # a judge reads the final layer
        self.inputs = tuple(cfg.inputs) + (("csi",) if cfg.tau_mode == "link" else ())
        width = dict(zip(cfg.inputs, cfg.dims))
        self.d_draft = width.get("h_draft")
        self.d_target = width.get("h_target", width.get("h_after"))
        self.flops_dims = (max(1, cfg.hidden), 0)

    @classmethod
    def from_config(cls, raw: dict, where: str) -> JudgePolicy:
        """An untrained judge of the saved config ``raw``; ValueError naming ``where`` when it is not a judge's."""
        try:
            cfg = JudgeConfig(**{**raw, "inputs": tuple(raw.get("inputs", ())), "dims": tuple(raw.get("dims", ())),
                                 "link_bits": tuple(raw.get("link_bits", LINK_BITS))})
        except TypeError as e:
            raise ValueError(f"{where}: not a valid judge config ({e})") from e
        if any(i not in INPUTS for i in cfg.inputs) or len(cfg.inputs) != len(cfg.dims):
            raise ValueError(f"{where}: inputs {cfg.inputs} must be among {INPUTS}, one width each")
        return cls(cfg, LinearJudge(cfg) if cfg.kind == "linear" else None)

    @torch.no_grad()
    def reject_probs(self, h_draft: torch.Tensor | None, h_target: torch.Tensor | None, positions: list[int],
                     csi: CSI | None = None, edge: EdgeFeatures | None = None) -> torch.Tensor:
        """Repair probability per mismatch: [m]; a sure target's mismatch is 1 under the judge's guard."""
        if (self.cfg.kind != "linear" or self.cfg.guard_config is not None) and edge is None:
            raise ValueError(f"judge {self.cfg.name!r} reads the edge features, which this round does not carry")
        p = rule_probs(self.cfg, edge) if self.cfg.kind != "linear" else \
            self.model(gather_inputs(self.cfg, h_draft, h_target, edge))
        return guard(p, edge, self.cfg.guard_config) if edge is not None else p

    def threshold(self, tau: float, csi: CSI | None) -> float:
        """The tau in force on this round's link."""
        return link_tau(self.cfg, tau, csi)

"""WISV decision head: a CSI-aware MLP that scores greedy mismatches, saved and loaded with its config
(SPEC eqs. 23-27).

``z_j = [h_d_j ; h_t_j ; csi.features()]`` (eq. 23) is standardised with the training set's mean and
std (stored with the weights), then ``p_j = sigmoid(W2 dropout(relu(W1 z_j + b1)) + b2)`` (eqs. 24-25).
``p_j`` is the probability that the mismatch must be *repaired* (rejected); the verifier rejects iff
``p_j >= tau`` (eq. 27), so ``tau = 0`` is plain greedy SD and ``tau > 1`` accepts every draft token.

A head is a directory: ``head.json`` (kind ``head`` and the ``HeadConfig``: input dims, hidden-state layer, the CSI
feature normalisation it was trained with, and the operating ``tau``) and ``head.safetensors`` (weights and the
standardisation buffers), written and read by wisv/head/store.py.  ``Scorer`` (standardised inputs -> a network's
logit) is shared with the linear judges (wisv/head/judges.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from channel import csi as csi_mod
from channel.csi import CSI, FEATURE_DIM, FEATURE_NAMES
from wisv.head.features import EdgeFeatures
from wisv.timing.compute import head_flops


def csi_normalisation() -> dict[str, object]:
    """The CSI feature definition the head is trained on (channel/csi.py constants), saved with it."""
    return {"features": list(FEATURE_NAMES), "rate_lo_mbps": csi_mod.RATE_LO_MBPS,
            "rate_hi_mbps": csi_mod.RATE_HI_MBPS, "rtt_hi_ms": csi_mod.RTT_HI_MS}


@dataclass(frozen=True)
class HeadConfig:
    """Shape and operating point of one decision head."""

    d_draft: int  # drafter hidden size d_d
    d_target: int  # target hidden size d_t
    csi_dim: int = FEATURE_DIM  # length of the CSI feature vector (0: a head without CSI input)
    hidden: int = 256  # MLP hidden width H
    dropout: float = 0.1  # dropout between the two layers (training only)
    hidden_layer: int = -1  # which hidden-state layer feeds the head (-1: final, post-norm)
    tau: float = 0.5  # operating threshold: reject iff p >= tau (evaluate's chosen tau once set)
    csi_norm: dict = field(default_factory=csi_normalisation)  # CSI feature definition it was trained with
    notes: dict = field(default_factory=dict)  # provenance: training run, label policy, ...

    @property
    def d_in(self) -> int:
        """Input width d_d + d_t + d_c."""
        return self.d_draft + self.d_target + self.csi_dim

    def flops_per_query(self) -> float:
        """FLOPs to score one mismatch (eq. 17)."""
        return head_flops(self.d_in, self.hidden)


class Scorer(nn.Module):
    """Standardised inputs -> a network's logit; the subclass gives the network (``score``).

    The standardisation (the training set's mean and std, buffers saved with the weights) and the logit exist once
    here, for the paper's head and the linear judges alike."""

    def __init__(self, d_in: int):
        super().__init__()
        self.register_buffer("z_mean", torch.zeros(d_in))
        self.register_buffer("z_std", torch.ones(d_in))

    def set_standardisation(self, z: torch.Tensor) -> None:
        """Fit the input standardisation on training inputs z [N, d_in]."""
        self.z_mean.copy_(z.mean(0))
        self.z_std.copy_(z.std(0).clamp_min(1e-4))

    def score(self, x: torch.Tensor) -> torch.Tensor:
        """Standardised x [N, d_in] -> [N, 1] (the subclass's network)."""
        raise NotImplementedError

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        """z [N, d_in] -> logits [N]."""
        return self.score((z - self.z_mean) / self.z_std).squeeze(-1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """z [N, d_in] -> repair probabilities [N]."""
        return torch.sigmoid(self.logits(z))


class DecisionHead(Scorer):
    """Linear -> ReLU -> dropout -> linear -> sigmoid over standardised [h_d ; h_t ; c]."""

    def __init__(self, cfg: HeadConfig):
        super().__init__(cfg.d_in)
        self.cfg = cfg
        self.fc1 = nn.Linear(cfg.d_in, cfg.hidden)
        self.drop = nn.Dropout(cfg.dropout)
        self.fc2 = nn.Linear(cfg.hidden, 1)

    def score(self, x: torch.Tensor) -> torch.Tensor:
        """Standardised x [N, d_in] -> [N, 1]."""
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def build_inputs(h_draft: torch.Tensor, h_target: torch.Tensor, csi_feats: torch.Tensor | None) -> torch.Tensor:
    """Eq. 23: [h_d ; h_t ; c] for m positions.  h_draft [m, d_d], h_target [m, d_t], csi_feats [m, d_c] or None."""
    parts = [h_draft.float(), h_target.float()]
    if csi_feats is not None:
        parts.append(csi_feats.float())
    return torch.cat(parts, dim=-1)  # [m, d_in]


class HeadPolicy:
    """The decision head as the verifier's MismatchPolicy (wisv.head.policy); kind ``head`` in wisv.head.store."""

    kind = "head"

    def __init__(self, head: DecisionHead):
        self.head = head.eval()
        self.cfg = head.cfg
        self.inputs = ("h_draft", "h_target") + (("csi",) if self.cfg.csi_dim else ())  # MismatchPolicy.inputs
        self.tau, self.hidden_layer = self.cfg.tau, self.cfg.hidden_layer
        self.d_draft, self.d_target = self.cfg.d_draft, self.cfg.d_target
        self.flops_dims = (self.cfg.hidden, self.cfg.csi_dim)

    @property
    def model(self) -> DecisionHead:
        """The network whose state is saved (wisv.head.store)."""
        return self.head

    @classmethod
    def from_config(cls, raw: dict, where: str) -> HeadPolicy:
        """An untrained policy of the saved config ``raw`` (its ``kind`` dropped); ValueError naming ``where`` when
        the config is not a head's, or the CSI features it was trained on are no longer channel/csi.py's."""
        try:
            cfg = HeadConfig(**{k: v for k, v in raw.items() if k != "kind"})
        except TypeError as e:
            raise ValueError(f"{where}: not a valid head config ({e})") from e
        if cfg.csi_dim and cfg.csi_norm != csi_normalisation():
            raise ValueError(f"{where}: trained on CSI features {cfg.csi_norm}, but channel/csi.py now "
                             f"defines {csi_normalisation()}; retrain the head")
        return cls(DecisionHead(cfg))

    def threshold(self, tau: float, csi: CSI | None) -> float:
        """The head conditions on the link through its input, not its threshold: ``tau`` on every link."""
        return tau

    @torch.no_grad()
    def reject_probs(self, h_draft: torch.Tensor | None, h_target: torch.Tensor | None, positions: list[int],
                     csi: CSI | None = None, edge: EdgeFeatures | None = None) -> torch.Tensor:
        """Repair probability per mismatch.  With no CSI reported the head sees the ideal link (its most
        conservative input)."""
        if h_draft is None:
            raise ValueError("this head reads the drafter's hidden states: serve it with fh or sh, not ef")
        if h_draft.shape[-1] != self.cfg.d_draft or h_target.shape[-1] != self.cfg.d_target:
            raise ValueError(f"head expects hidden sizes d_d={self.cfg.d_draft}, d_t={self.cfg.d_target}; "
                             f"got {h_draft.shape[-1]}, {h_target.shape[-1]}")
        feats = None
        if self.cfg.csi_dim:
            c = torch.from_numpy((csi or CSI.ideal()).features())  # [d_c]
            feats = c.expand(h_draft.shape[0], -1)  # [m, d_c]
        z = build_inputs(h_draft.cpu(), h_target.cpu(), feats)
        return self.head(z)

"""Decision heads as named-input judges: ours on the edge's free features, and the published judges as peers.

Every judge is a ``MismatchPolicy`` (wisv.decoding.speculative): it returns a repair probability per mismatch and the
verifier rejects iff p >= tau.  Its ``JudgeConfig`` names the inputs it reads, so the edge knows at OPEN whether the
UE must upload the drafter's hidden states:

- ``edge``: the scalar edge features of wisv/head/features.py (free: the verification pass computes them);
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
``t_link(csi) = RTT + one round's bytes / rate``, so the harm a link may afford per accepted mismatch grows with it.
The judges stage chooses tau on dev twice, on a poor link with the full harm budget and on a good link with the budget
scaled by t_link(good) / t_link(poor); the threshold in force follows the power law through both points,
``tau(csi) = min(tau_cap, tau * (t_link(csi) / t_ref_s) ** gamma)`` (``tau`` at ``t_ref_s``, the poor link):
strict on a good link, bold on a poor one.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from channel.csi import CSI
from wisv.head.features import SCALARS, EdgeFeatures

CONFIG_FILE, WEIGHTS_FILE = "judge.json", "judge.safetensors"
KINDS = ("linear", "fly", "nll-margin")
INPUTS = ("edge", "h_after", "h_target", "h_draft")  # what a judge may read (csi enters through tau_mode)
ROUND_BYTES = 120  # bytes of one greedy-sized round on the wire, both ways (ids + headers): what t_link charges


@dataclass(frozen=True)
class JudgeConfig:
    """One judge: what it reads, its shape and its operating point."""

    name: str  # e.g. edge, autojudge, judge-decoding, fly, nll-margin
    kind: str = "linear"  # linear | fly | nll-margin
    inputs: tuple[str, ...] = ("edge",)  # named inputs (INPUTS), concatenated in this order
    dims: tuple[int, ...] = (len(SCALARS),)  # width of each input
    hidden: int = 0  # MLP hidden width (0: logistic regression)
    window: int = 3  # fly: draft tokens after the mismatch the target must agree with
    tau: float = 0.5  # operating threshold (reject iff p >= tau); with tau_mode link: tau on the reference link
    tau_mode: str = "fixed"  # fixed: tau everywhere | link: tau(csi) = min(tau_cap, tau (t_link(csi) / t_ref_s)^gamma)
    t_ref_s: float = 0.0  # link mode: t_link of the reference (poor) link where tau was chosen, s
    gamma: float = 1.0  # link mode: how steeply tau follows the link's round time (fitted on dev)
    tau_cap: float = 0.95  # link mode: the largest tau on any link
    notes: dict = field(default_factory=dict)  # provenance: training run, dev rule, counts

    @property
    def d_in(self) -> int:
        return sum(self.dims)

    @property
    def uploads_hidden(self) -> bool:
        """Whether the UE must upload the drafter's hidden states (fh/sh) for this judge."""
        return "h_draft" in self.inputs


class LinearJudge(nn.Module):
    """Standardised inputs -> (linear | linear-relu-linear) -> logit."""

    def __init__(self, cfg: JudgeConfig):
        super().__init__()
        self.cfg = cfg
        layers = [nn.Linear(cfg.d_in, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 1)] if cfg.hidden else \
            [nn.Linear(cfg.d_in, 1)]
        self.net = nn.Sequential(*layers)
        self.register_buffer("z_mean", torch.zeros(cfg.d_in))
        self.register_buffer("z_std", torch.ones(cfg.d_in))

    def set_standardisation(self, z: torch.Tensor) -> None:
        """Fit the input standardisation on training inputs z [N, d_in]."""
        self.z_mean.copy_(z.mean(0))
        self.z_std.copy_(z.std(0).clamp_min(1e-4))

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        """z [N, d_in] -> logits [N]."""
        return self.net((z - self.z_mean) / self.z_std).squeeze(-1)


def t_link_s(csi: CSI) -> float:
    """The wireless part of one round on ``csi``: RTT plus a greedy-sized round's bytes each way."""
    return csi.rtt_ms / 1e3 + csi.uplink_s(ROUND_BYTES) + csi.downlink_s(ROUND_BYTES)


def link_tau(cfg: JudgeConfig, tau: float, csi: CSI | None) -> float:
    """The threshold in force on ``csi``: ``tau`` in fixed mode; in link mode ``min(tau_cap, tau (t_link / t_ref_s) **
    gamma)`` (``tau``: the judge's own or an overriding --tau, which so moves every link's threshold alike); with no
    CSI reported the ideal link (t_link 0), the strictest reading: 0, greedy."""
    if cfg.tau_mode != "link" or cfg.t_ref_s <= 0:
        return tau
    t = t_link_s(csi) if csi is not None and not csi.is_ideal else 0.0
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
        if x.shape[-1] != dim:
            raise ValueError(f"judge {cfg.name!r} expects {name} of width {dim}, got {x.shape[-1]}")
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
    """A judge as the verifier's MismatchPolicy, with its link-dependent threshold."""

    def __init__(self, cfg: JudgeConfig, model: LinearJudge | None = None):
        if cfg.kind not in KINDS:
            raise ValueError(f"judge kind {cfg.kind!r}: expected one of {KINDS}")
        self.cfg, self.model = cfg, None if model is None else model.eval()
        self.inputs = tuple(cfg.inputs) + (("csi",) if cfg.tau_mode == "link" else ())

    @torch.no_grad()
    def reject_probs(self, h_draft: torch.Tensor | None, h_target: torch.Tensor | None, positions: list[int],
                     csi: CSI | None = None, edge: EdgeFeatures | None = None) -> torch.Tensor:
        """Repair probability per mismatch: [m]."""
        if self.cfg.kind != "linear":
            if edge is None:
                raise ValueError(f"judge {self.cfg.name!r} reads the edge features, which this round does not carry")
            return rule_probs(self.cfg, edge)
        return torch.sigmoid(self.model.logits(gather_inputs(self.cfg, h_draft, h_target, edge)))

    def threshold(self, tau: float, csi: CSI | None) -> float:
        """The tau in force on this round's link."""
        return link_tau(self.cfg, tau, csi)


def save_judge(policy: JudgePolicy, path: str | Path) -> Path:
    """Write judge.json (and judge.safetensors for a trained judge) into directory ``path``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / CONFIG_FILE).write_text(json.dumps(asdict(policy.cfg), indent=1))
    if policy.model is not None:
        save_file({k: v.contiguous() for k, v in policy.model.state_dict().items()}, str(path / WEIGHTS_FILE))
    return path


def is_judge_dir(path: str | Path) -> bool:
    """Whether ``path`` holds a judge.json."""
    return (Path(path) / CONFIG_FILE).is_file()


def load_judge(path: str | Path, tau: float | None = None) -> tuple[JudgePolicy, float]:
    """(policy, tau) of a judge directory; ``tau`` overrides its own.  A clear ValueError on bad files."""
    path = Path(path)
    try:
        raw = json.loads((path / CONFIG_FILE).read_text())
        cfg = JudgeConfig(**{**raw, "inputs": tuple(raw.get("inputs", ())), "dims": tuple(raw.get("dims", ()))})
    except (OSError, TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path / CONFIG_FILE}: not a valid judge config ({e})") from e
    if any(i not in INPUTS for i in cfg.inputs) or len(cfg.inputs) != len(cfg.dims):
        raise ValueError(f"{path / CONFIG_FILE}: inputs {cfg.inputs} must be among {INPUTS}, one width each")
    model = None
    if cfg.kind == "linear":
        model = LinearJudge(cfg)
        try:
            model.load_state_dict(load_file(str(path / WEIGHTS_FILE)))
        except Exception as e:  # safetensors raises several types for a missing or mismatched file
            raise ValueError(f"{path / WEIGHTS_FILE}: weights do not match {CONFIG_FILE} ({e})") from e
    return JudgePolicy(cfg, model), cfg.tau if tau is None else tau

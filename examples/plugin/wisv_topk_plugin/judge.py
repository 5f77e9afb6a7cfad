"""The ``topk`` judge: keep a greedy mismatch when the draft token is among the target's ``k`` most likely tokens.

At a mismatch the edge's verification pass already knows the draft token's rank among the target's logits (the edge
features' ``log_rank`` column, log(1 + rank), rank 0 being the target's own token; wisv/head/features.py).  The
judge's repair probability is 1 when that rank is at least ``k`` and 0 otherwise, so at its tau (0.5) it rejects iff
rank >= k; ``k`` = 1 is greedy, and tau 0 is greedy too.  It needs no training and no upload: the ``topk`` (or
``ef``) protocol serves it.

Imports only modules below wisv.head.store (wisv.head.policy, wisv.head.features, channel.csi): it is imported at
the end of wisv.head.store's import.

    python -m wisv_topk_plugin.judge DIR --k 3     # write a judge directory of kind topk (labeling peers reads it)
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from channel.csi import CSI
from wisv.head.features import EdgeFeatures
from wisv.head.policy import Kind


@dataclass(frozen=True)
class TopKConfig:
    """The judge's settings (its judge.json)."""

    name: str = "topk"  # the judge's name
    kind: str = "topk"  # the store's kind (the entry point's name)
    k: int = 2  # keep a mismatch whose draft token is among the target's k most likely tokens (1: greedy)
    tau: float = 0.5  # operating threshold: reject iff p >= tau (p is 0 or 1)


class TopKPolicy:
    """The top-k rule as a MismatchPolicy (wisv.head.policy): it reads the edge features only."""

    inputs: tuple[str, ...] = ("edge",)
    hidden_layer: int = -1
    d_draft: int | None = None
    d_target: int | None = None
    flops_dims: tuple[int, int] = (1, 0)  # no network runs: one unit, as the built-in rule judges (fly, nll-margin)
    model = None  # nothing to train or save but its config

    def __init__(self, cfg: TopKConfig = TopKConfig()):
        if cfg.k < 1:
            raise ValueError(f"topk judge {cfg.name!r}: k must be >= 1, got {cfg.k}")
        self.cfg, self.kind, self.tau = cfg, cfg.kind, cfg.tau

    @classmethod
    def from_config(cls, raw: dict, where: str) -> TopKPolicy:
        """The judge of a saved config (the store's ``Kind.policy.from_config``); ValueError naming ``where``."""
        try:
            return cls(TopKConfig(**raw))
        except TypeError as e:
            raise ValueError(f"{where}: not a valid topk config ({e})") from e

    def threshold(self, tau: float, csi: CSI | None) -> float:
        return tau

    def reject_probs(self, h_draft: torch.Tensor | None, h_target: torch.Tensor | None, positions: list[int],
                     csi: CSI | None = None, edge: EdgeFeatures | None = None) -> torch.Tensor:
        """1 where the draft token's rank among the target's logits is k or more, else 0: [m]."""
        if edge is None:
            raise ValueError(f"topk judge {self.cfg.name!r} reads the edge features, which this round does not carry")
        rank = torch.expm1(edge.column("log_rank")).round()  # [m] tokens the target finds more likely than the draft
        return (rank >= self.cfg.k).float()


KIND = Kind(TopKPolicy, "judge")  # the wisv_testbed.policies entry point: stored as judge.json, kind topk


def save(out: str | Path, k: int) -> Path:
    """Write a judge directory of kind topk (``judge.json``) to ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "judge.json").write_text(json.dumps(asdict(TopKConfig(name=out.name, k=k)), indent=1))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m wisv_topk_plugin.judge", description="write a topk judge directory")
    ap.add_argument("out", help="the judge directory to write")
    ap.add_argument("--k", type=int, default=TopKConfig.k, help="keep a mismatch in the target's top-k")
    args = ap.parse_args()
    print(save(args.out, args.k))

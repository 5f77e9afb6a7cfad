"""CLI of the labeling pipeline: ``python -m labeling STAGE``, one subcommand per stage.

STAGE is one of ``{collect,label,relabel,train,evaluate,export,curve,offline,judges,peers,card,anatomy,all}``.
Each stage reads the previous stages' files from the run directory and writes its own, so any stage can
be re-run alone.  ``all`` runs the five training and evaluation stages in order; ``export`` then copies
the head, at evaluate's chosen tau and with its card, to a directory the edge loads (``--head PATH``).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import config
from labeling import anatomy, collect, curve, evaluate, export, judgecard, judges, label, offline, peers, relabel, train
from labeling.config import (
    VARIANTS,
    AnatomyConfig,
    CollectConfig,
    EvalConfig,
    JudgesConfig,
    LabelConfig,
    RelabelConfig,
    TrainConfig,
)
from wisv.tasks.prompts import CHAT_TEMPLATE_MODES


@dataclass
class AllConfig:
    """``all``: the five training and evaluation stages in one run directory, with their defaults."""

    run_dir: str = "runs/labeling"  # the pipeline's run directory (every stage reads and writes here)
    prompts: int | None = None  # calibration prompts of collect (None: its default)
    eval_prompts: int | None = None  # test prompts of evaluate (None: its default)
    chat_template: str = field(default="auto", metadata={
        "choices": CHAT_TEMPLATE_MODES})  # prompt text through the tokenizer's chat template (auto: if it has one)


STAGES = {"collect": (CollectConfig, collect.run), "label": (LabelConfig, label.run),
          "relabel": (RelabelConfig, relabel.run), "train": (TrainConfig, train.run),
          "evaluate": (EvalConfig, evaluate.run), "export": (export.ExportConfig, export.run),
          "curve": (curve.CurveConfig, curve.run), "offline": (offline.OfflineConfig, offline.run),
          "judges": (JudgesConfig, judges.run), "peers": (peers.PeersConfig, peers.run),
          "card": (judgecard.CardConfig, judgecard.run), "anatomy": (AnatomyConfig, anatomy.run),
          "all": (AllConfig, lambda cfg: _run_all(cfg))}  # _run_all is defined below
HELP = {"all": "collect, label, relabel, train (csi and nocsi), evaluate",
        "curve": "learning curve: held-out AUC on the harmful label vs labelled mismatches",
        "offline": "what the trained heads accept of held-out labelled mismatches, per channel and tau",
        "judges": "our edge judge and the peer judges (AutoJudge-, Judge-Decoding-, FLy-style, NLL margin), tau on dev",
        "peers": "every judge side by side in-process on held-out prompts and links, against greedy SD",
        "anatomy": "where the labelled answer flips fall: dev or not, answer form, first sentence or after, guarded",
        "card": "HEAD_CARD.md of the shipped judges from the judges, peers, live and Table I files"}


def main(argv: list[str] | None = None) -> int:
    return config.run_subcommand("python -m labeling", __doc__.splitlines()[0], STAGES, argv,
                                 help={name: HELP.get(name, f"{name} stage") for name in STAGES})


def _run_all(cfg: AllConfig) -> None:
    rd = cfg.run_dir
    ct = cfg.chat_template
    collect.run(CollectConfig(run_dir=rd, chat_template=ct, **({"prompts": cfg.prompts} if cfg.prompts else {})))
    label.run(LabelConfig(run_dir=rd))
    relabel.run(RelabelConfig(run_dir=rd))
    for variant in VARIANTS:
        train.run(TrainConfig(run_dir=rd, variant=variant))
    evaluate.run(EvalConfig(run_dir=rd, chat_template=ct,
                            **({"prompts": cfg.eval_prompts} if cfg.eval_prompts else {})))


if __name__ == "__main__":
    sys.exit(main())

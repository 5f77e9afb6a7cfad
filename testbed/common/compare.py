"""Methods side by side on the same prompts: paired accuracy against the first method, and summaries by kind group.

Two methods run on the same prompts are compared prompt by prompt (wisv/records/paired.py): lost and gained prompts
(McNemar's discordant pairs), the accuracy delta with its bootstrap 95% interval, and McNemar's exact p.  Where the
prompts carry a ``kind`` (the task suite, wisv/tasks/suite.py), every figure is also given per group of kinds, by the
kind's role and family ("seen question", "unseen question", "unseen free", ...): kinds that no distillation or
calibration prompt used are reported apart from the kinds that some did.  Where they carry a ``category`` (a named
dataset, ``--dataset``), every figure is also given per Spec-Bench task and per turn.  Derived from the per-round
records and the per-prompt outputs only (pandas).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from testbed.common.files import write_csv_atomic
from testbed.common.summary import summarize
from wisv.records.paired import paired_accuracy, paired_frame, paired_speedup
from wisv.tasks.datasets import task_of
from wisv.tasks.suite import family, kind_split

ALL = "all"  # the group of every prompt
GROUP_COLUMNS = ["protocol", "group", "prompts", "accuracy", "aal", "rounds_per_prompt", "latency_s",
                 "matches_target", "drift_rouge_l", "fluency_ppl_ratio", "fluency_ext_ppl_ratio"]
PAIRED_COLUMNS = ["protocol", "against", "group", "n", "lost", "gained", "delta", "ci_low", "ci_high", "mcnemar_p"]



def prompt_groups(prompts: pd.DataFrame) -> dict[str, set[str]] | None:
    """Group name -> its prompt ids: the suite's kind groups (``kind_groups``) and a named dataset's task and turn
    groups (``dataset_groups``); groups may overlap.  None when the prompts carry neither a kind nor a category."""
    groups = {**kind_groups(prompts), **dataset_groups(prompts)}
    return groups or None


def dataset_groups(prompts: pd.DataFrame) -> dict[str, set[str]]:
    """A named dataset's prompts (``--dataset``, wisv.tasks.datasets) by Spec-Bench task ("Translation",
    "Multi-turn Conversation", ...; a category outside Spec-Bench by its name) and, where some question has a second
    turn, by turn ("turn 1", "turn 2")."""
    if "category" not in prompts or prompts["category"].isna().all():
        return {}
    groups: dict[str, set[str]] = {}
    for pid, cat in zip(prompts["prompt_id"], prompts["category"]):
        if isinstance(cat, str):
            groups.setdefault(task_of(cat), set()).add(pid)
    turns = prompts["turn"] if "turn" in prompts else pd.Series(dtype=float)
    if (turns > 1).any():
        for pid, turn in zip(prompts["prompt_id"], turns):
            groups.setdefault(f"turn {int(turn)}", set()).add(pid)
    return dict(sorted(groups.items()))


def kind_groups(prompts: pd.DataFrame) -> dict[str, set[str]]:
    """"<role> <family>" (e.g. "unseen question"; "other" for a kind outside the suite) for every prompt with a
    kind, and also "<role> answer-last" for the questions asked answer last (the ``form`` column)."""
    if "kind" not in prompts or prompts["kind"].isna().all():
        return {}
    split = kind_split()
    forms = prompts["form"] if "form" in prompts else pd.Series([None] * len(prompts), index=prompts.index)
    groups: dict[str, set[str]] = {}
    for pid, kind, form in zip(prompts["prompt_id"], prompts["kind"], forms):
        known = isinstance(kind, str) and kind in split
        groups.setdefault(f"{split[kind]} {family(kind)}" if known else "other", set()).add(pid)
        if known and form == "last":
            groups.setdefault(f"{split[kind]} answer-last", set()).add(pid)
    return dict(sorted(groups.items()))


def _subset(df: pd.DataFrame, ids: set[str]) -> pd.DataFrame:
    return df[df["prompt_id"].isin(ids)] if len(df) else df


def group_summaries(proto: str, rounds: pd.DataFrame, outputs: pd.DataFrame, prompts: pd.DataFrame, decode,
                    refs, groups: dict[str, set[str]], **scorers) -> list[dict]:
    """One protocol's summary per group of kinds (``scorers``: summarize's nll and ext)."""
    rows = []
    for g, ids in groups.items():
        s = summarize(proto, _subset(rounds, ids), _subset(outputs, ids), _subset(prompts, ids), decode, refs,
                      **scorers)
        rows.append({**s, "group": g})
    return rows


def paired_rows(correct: dict[str, pd.DataFrame], groups: dict[str, set[str]] | None) -> list[dict]:
    """Every method against the first, prompt by prompt, over all prompts and per group."""
    names = [n for n, c in correct.items() if c is not None]
    if len(names) < 2:
        return []
    base, rows = names[0], []
    for name in names[1:]:
        b, n = correct[base], correct[name]
        for g, ids in {ALL: set(b["prompt_id"]), **(groups or {})}.items():
            pb, pn = paired_frame(_subset(b, ids), _subset(n, ids))
            if len(pb):
                rows.append({"protocol": name, "against": base, "group": g,
                             **paired_accuracy(pb, pn).as_dict()})
    return rows


def speedups(outputs: dict[str, pd.DataFrame], baseline: str | None) -> dict[str, dict]:
    """Each method's speed-up over ``baseline`` (server-only), prompt by prompt on the prompts both finished, with
    its paired bootstrap 95% interval (wisv/records/paired.py); none when the baseline did not run."""
    if baseline is None or baseline not in outputs:
        return {}
    ok = {n: o[o["error"].isna()] if "error" in o else o for n, o in outputs.items()}
    return {n: paired_speedup(ok[baseline], o) for n, o in ok.items()}


def paired_text(rows: list[dict]) -> str:
    """The printed paired table: lost, gained, the delta and its interval."""
    if not rows:
        return ""
    df = pd.DataFrame(rows)[PAIRED_COLUMNS]
    df["delta"] = df.apply(lambda r: f"{r.delta:+.1%} [{r.ci_low:+.1%}, {r.ci_high:+.1%}]", axis=1)
    df["mcnemar_p"] = df["mcnemar_p"].map(lambda p: f"{p:.3g}")
    return "paired accuracy, prompt by prompt (delta: bootstrap 95% interval):\n" + \
        df.drop(columns=["ci_low", "ci_high"]).to_string(index=False)


def group_text(rows: list[dict]) -> str:
    """The printed per-group table."""
    if not rows:
        return ""
    df = pd.DataFrame(rows)
    df = df[[c for c in GROUP_COLUMNS if c in df]]
    return "by group of prompts (a kind's role, unseen: no distillation or calibration prompt of that kind; a " \
        "dataset's Spec-Bench task and turn):\n" + df.to_string(index=False, float_format=lambda v: f"{v:.3f}")


def write_comparisons(out: Path, by_group: list[dict], paired: list[dict]) -> None:
    """summary_by_group.csv and paired.csv in ``out`` (each only when it has rows)."""
    if by_group:
        write_csv_atomic(out / "summary_by_group.csv", pd.DataFrame(by_group))
    if paired:
        write_csv_atomic(out / "paired.csv", pd.DataFrame(paired)[PAIRED_COLUMNS])


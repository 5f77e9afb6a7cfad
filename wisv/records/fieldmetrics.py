"""The field's speculative-decoding metrics, with the field's definitions, over the per-round records and the
per-prompt outputs (docs/datasets.md): Spec-Bench's speed-up and mean accepted tokens, vLLM's per-position acceptance
rate, and the per-task table laid out as Spec-Bench's leaderboard.  Pure (pandas).

Sources:
- Spec-Bench (github hemingkx/Spec-Bench, ``evaluation/speed.py``): a question's speed is the sum of its turns' new
  tokens over the sum of their wall times; a method's speed-up is the mean speed over the task's questions divided by
  the baseline's mean speed over the same questions; "#Mean accepted tokens" is the mean of the per-step accept
  lengths, which count the target's own (bonus) token.
- vLLM (``vllm/v1/spec_decode/metrics.py``: ``SpecDecodingStats.observe_draft``, ``SpecDecodingLogging.log``): a draft
  that accepted n tokens adds one to ``num_accepted_tokens_per_pos[i]`` for every i < n; the per-position acceptance
  rate is ``num_accepted_tokens_per_pos[i] / num_drafts``, over all drafts.
"""
from __future__ import annotations

import math

import pandas as pd

from wisv.records.summary import spec_steps, step_draft

OVERALL = "Overall"  # Spec-Bench's last column: every question of the run
MEAN_ACCEPTED = "#Mean Accepted Tokens"  # Spec-Bench's column of mean accepted tokens a step, over every question
POSITION_COLUMNS = ["position", "accepted", "drafts", "rate", "reached", "rate_reached"]


def prompt_speeds(outputs: pd.DataFrame) -> pd.DataFrame:
    """[prompt_id, n_tokens, latency_s] of the finished prompts of a run's outputs (``tokens``, ``t_e2e_s``)."""
    ok = outputs[outputs["error"].isna()] if "error" in outputs else outputs
    return pd.DataFrame({"prompt_id": ok["prompt_id"].astype(str), "n_tokens": ok["tokens"].map(len),
                         "latency_s": ok["t_e2e_s"].astype(float)})


def question_speeds(per_prompt: pd.DataFrame, prompts: pd.DataFrame | None = None) -> pd.Series:
    """Tokens/s per question (index: question_id): its turns' tokens over their summed latency.  ``per_prompt``:
    prompt_id, n_tokens, latency_s (s); ``prompts``: prompt_id and question_id (None or no question_id: each prompt
    is its own question)."""
    df = per_prompt.assign(prompt_id=per_prompt["prompt_id"].astype(str))
    if prompts is not None and "question_id" in prompts:
        q = prompts[["prompt_id", "question_id"]].astype(str)
        df = df.merge(q, on="prompt_id", how="left")
        df["question_id"] = df["question_id"].fillna(df["prompt_id"])
    else:
        df = df.assign(question_id=df["prompt_id"])
    sums = df.groupby("question_id")[["n_tokens", "latency_s"]].sum()
    return (sums["n_tokens"] / sums["latency_s"]).rename("tok_s")


def speedup(method: pd.Series, baseline: pd.Series) -> float:
    """Spec-Bench's speed-up: the mean of the method's question speeds over the mean of the baseline's, on the
    questions both finished (NaN when they share none)."""
    common = method.index.intersection(baseline.index)
    if not len(common):
        return math.nan
    return float(method[common].mean() / baseline[common].mean())


def accept_lengths(rounds: pd.DataFrame) -> pd.Series:
    """Spec-Bench's per-step accept lengths: each speculative step's accepted draft tokens plus the target's own
    (bonus) token; a step is a round that drafted (vLLM counts no step without draft tokens; the edge's extension
    after a draft is part of the step, ``wisv.records.summary.spec_steps``)."""
    if not len(rounds) or not {"drafted", "accepted"} <= set(rounds):
        return pd.Series(dtype=float)
    return spec_steps(rounds)["accepted"].astype(int) + 1


def mean_accepted_tokens(rounds: pd.DataFrame) -> float:
    """Spec-Bench's "#Mean accepted tokens" (bonus counted); it equals vLLM's ``mean_acceptance_length``
    (wisv.records.summary.spec_decode_metrics) on the same rounds.  NaN without a step."""
    lengths = accept_lengths(rounds)
    return float(lengths.mean()) if len(lengths) else math.nan


def per_position_acceptance(rounds: pd.DataFrame) -> pd.DataFrame:
    """vLLM's per-position acceptance rate, one row per draft position (0-based, as vLLM labels it): ``accepted`` is
    the drafts whose first position+1 tokens were all accepted, ``drafts`` every draft, ``rate`` = accepted / drafts
    (vLLM's); ``reached`` is the drafts that had a token at the position (a chain's ``drafted``, a tree's depth), and
    ``rate_reached`` = accepted / reached, the rate among them (equal to ``rate`` when every draft had K tokens)."""
    lengths = accept_lengths(rounds) - 1  # [steps] accepted draft tokens
    if not len(lengths):
        return pd.DataFrame(columns=POSITION_COLUMNS)
    _, depth = step_draft(rounds.loc[lengths.index])  # [steps] the longest path each could accept
    rows = []
    for i in range(int(depth.max())):
        acc, reached = int((lengths > i).sum()), int((depth > i).sum())
        rows.append({"position": i, "accepted": acc, "drafts": len(lengths), "rate": acc / len(lengths),
                     "reached": reached, "rate_reached": acc / reached if reached else math.nan})
    return pd.DataFrame(rows, columns=POSITION_COLUMNS)


def task_table(runs: dict[str, tuple[pd.DataFrame, pd.DataFrame]], prompts: pd.DataFrame, baseline: str,
               task_order: tuple[str, ...] = ()) -> pd.DataFrame:
    """Spec-Bench's leaderboard layout: one row per method, its speed-up over ``baseline`` per task (those of
    ``task_order`` with prompts in the run, in that order, then any other), its mean accepted tokens over every step,
    and the overall speed-up.  ``runs``: method -> (per-prompt frame as ``prompt_speeds`` gives it, its round
    records); ``prompts``: prompt_id, task (Spec-Bench's: ``wisv.tasks.datasets.task_of`` of the category, and
    ``SPEC_BENCH_TASKS`` its order) and, for two-turn questions, question_id."""
    tasks = prompts.assign(prompt_id=prompts["prompt_id"].astype(str))
    present = set(tasks["task"])
    order = [t for t in task_order if t in present] + sorted(present - set(task_order))
    base = runs[baseline][0]
    rows = []
    for method, (per_prompt, rounds) in runs.items():
        row: dict[str, object] = {"method": method}
        for task in [*order, OVERALL]:
            ids = set(tasks["prompt_id"]) if task == OVERALL else set(tasks.loc[tasks["task"] == task, "prompt_id"])
            pick = lambda df, ids=ids: df[df["prompt_id"].astype(str).isin(ids)]  # noqa: E731
            row[task] = speedup(question_speeds(pick(per_prompt), tasks), question_speeds(pick(base), tasks))
        row[MEAN_ACCEPTED] = mean_accepted_tokens(rounds)
        rows.append(row)
    return pd.DataFrame(rows, columns=["method", *order, MEAN_ACCEPTED, OVERALL]).set_index("method")


def task_markdown(table: pd.DataFrame) -> str:
    """The table as Spec-Bench's Markdown (speed-ups as ``1.66x``, mean accepted tokens to two places, ``-`` where
    undefined)."""
    head = ["Method", *table.columns]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * len(head)) + " |"]
    for method, row in table.iterrows():
        cells = [_cell(v, "{:.2f}" if c == MEAN_ACCEPTED else "{:.2f}x") for c, v in row.items()]
        lines.append("| " + " | ".join([str(method), *cells]) + " |")
    return "\n".join(lines)


def _cell(value, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value)

"""A real testbed.run writes vLLM's per-request spec-decode names beside ours, and they hold vLLM's identities.

Every protocol of ``--protocol all`` on the toy pair (its head: fh/sh/auto keep mismatches; tree uploads trees), a
budget that cuts some last rounds: summary.json, summary.csv and each prompt's outputs.jsonl row are checked against
the rounds.csv they came from, and against our aal and rounds (docs/results.md#vllm-and-sglang-names)."""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from testbed.common.link import LinkSpec
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue.ueconfig import UEConfig
from wisv.records.rows import read_records
from wisv.records.summary import SPEC_DECODE_NAMES

OURS = ["aal", "rounds_per_prompt", "generated_tokens", "prompts"]


pytestmark = pytest.mark.slow  # one testbed.run of eight protocols: about a minute


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("spec-names") / "run"
    ue = UEConfig(draft_len=4, tree_budget=6, max_new_tokens=29, probe_bytes=0)
    run(RunConfig(protocol="all", prompts=2, out=str(out), ue=ue, link=LinkSpec(rtt_ms=2.0)))
    return out


def check_identities(m: dict, rounds: pd.DataFrame, n_tokens: int) -> None:
    """vLLM's identities for one prompt's or one run's names, against the rounds they came from."""
    hist, steps, acc = m["acceptance_histogram"], m["num_spec_steps"], m["num_accepted_draft_tokens"]
    alone = rounds[rounds["drafted"] == 0]  # rounds auto handed to the edge (edge_alone): no spec step
    assert alone["edge_alone"].astype(bool).all()
    last = rounds.groupby("prompt_id")["round"].transform("max") == rounds["round"]
    last, rounds = last[rounds["drafted"] > 0], rounds[rounds["drafted"] > 0]
    assert steps == len(rounds) > 0  # every speculative round of ours is a spec step
    assert acc == rounds["accepted"].sum() and m["num_draft_tokens"] == rounds["drafted"].sum()
    longest = rounds["tree_depth"].fillna(rounds["drafted"]).max()
    assert m["num_spec_tokens"] == longest and len(hist) == m["num_spec_tokens"] + 1
    assert hist == [Counter(rounds["accepted"])[j] for j in range(len(hist))]
    assert sum(hist) == steps and sum(j * h for j, h in enumerate(hist)) == acc
    assert m["mean_acceptance_length"] == pytest.approx(1 + acc / steps)
    assert m["mean_acceptance_length"] == pytest.approx(1 + rounds["accepted"].mean())  # 1 + our aal
    assert m["draft_acceptance_rate"] == pytest.approx(acc / m["num_draft_tokens"])
    # the +1 is vLLM's convention, not a token count: a prompt's last round may commit less than accepted + 1
    cut = rounds["accepted"] + 1 - rounds["committed"]  # [rounds] tokens cut at EOS or the budget
    assert (cut[~last] == 0).all() and (cut >= 0).all()
    assert n_tokens - alone["committed"].sum() == acc + steps - cut.sum() <= acc + steps


def test_summary_json_and_csv_carry_both_names(toy_run: Path) -> None:
    csv = pd.read_csv(toy_run / "summary.csv").set_index("protocol")
    assert list(csv.index) == ["greedy", "reject", "fh", "sh", "auto", "tree", "server", "device"]
    for proto in ("server", "device"):  # they draft nothing: no spec step, no acceptance
        s = json.loads((toy_run / proto / "summary.json").read_text())
        assert s["num_spec_steps"] == s["num_draft_tokens"] == 0 and math.isnan(s["mean_acceptance_length"])
    csv = csv.drop(index=["server", "device"])
    for proto in csv.index:
        s = json.loads((toy_run / proto / "summary.json").read_text())
        assert set(OURS) | set(SPEC_DECODE_NAMES) <= set(s) and s["errors"] == 0
        rounds = read_records(toy_run / proto / "rounds.csv")
        check_identities(s, rounds, s["generated_tokens"])
        alone = int(rounds["edge_alone"].eq(True).sum())  # auto's rounds handed to the edge: no spec step
        assert s["num_spec_steps"] == pytest.approx(s["rounds_per_prompt"] * s["prompts"] - alone)
        spec = rounds[~rounds["edge_alone"].eq(True)]  # 1 + aal when every round drafted (docs/results.md)
        assert s["mean_acceptance_length"] == pytest.approx(1 + spec["accepted"].mean())
        if not alone:
            assert s["mean_acceptance_length"] == pytest.approx(1 + s["aal"])
        row = csv.loc[proto]  # summary.csv: the same values, the histogram as JSON text
        assert json.loads(row["acceptance_histogram"]) == s["acceptance_histogram"]
        assert [row[k] for k in SPEC_DECODE_NAMES if k != "acceptance_histogram"] == pytest.approx(
            [s[k] for k in SPEC_DECODE_NAMES if k != "acceptance_histogram"])
    tree = json.loads((toy_run / "tree" / "summary.json").read_text())
    trees = read_records(toy_run / "tree" / "rounds.csv")
    assert tree["num_draft_tokens"] == trees["tree_size"].sum()  # trees: the nodes uploaded are the draft tokens
    assert tree["num_spec_tokens"] == trees["tree_depth"].max() <= 6  # the deepest path bounds what a step accepts
    assert csv.loc["fh", "matches_target"] < 1, "the head kept no mismatch: WISV's accepted is not exercised"
    done = [json.loads((toy_run / p / "summary.json").read_text()) for p in csv.index]
    assert any(s["generated_tokens"] < s["num_accepted_draft_tokens"] + s["num_spec_steps"] for s in done), \
        "no last round was cut at the budget or EOS: the run does not exercise the +1 caveat"


def test_each_prompt_carries_the_names(toy_run: Path) -> None:
    for proto in ("greedy", "fh", "tree"):
        s = json.loads((toy_run / proto / "summary.json").read_text())
        rounds = read_records(toy_run / proto / "rounds.csv")
        outputs = pd.read_json(toy_run / proto / "outputs.jsonl", lines=True, dtype={"prompt_id": str})
        assert len(outputs) == 2
        for o in outputs.to_dict("records"):
            mine = rounds[rounds["prompt_id"] == o["prompt_id"]]
            check_identities(o, mine, len(o["tokens"]))
            assert o["num_spec_steps"] == o["rounds"]
        # a run's names are the sums over its prompts (the histogram padded to the longest)
        for k in ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens"):
            assert outputs[k].sum() == s[k]
        assert outputs["num_spec_tokens"].max() == s["num_spec_tokens"]
        width = s["num_spec_tokens"] + 1
        padded = [h + [0] * (width - len(h)) for h in outputs["acceptance_histogram"]]
        assert [sum(col) for col in zip(*padded)] == s["acceptance_histogram"]

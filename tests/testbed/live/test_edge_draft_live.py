"""Server-only with the edge's own drafts end to end (``testbed.run --protocol server --edge-draft suffix``): the
output is the target's greedy output, each chunk's row counts the edge's drafted and accepted tokens, and the summary's
spec-decode names and Spec-Bench's mean accepted tokens hold their identities over those rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue.ueconfig import UEConfig
from wisv.records.fieldmetrics import mean_accepted_tokens
from wisv.records.rows import read_records
from wisv.tasks.jsonl import read_jsonl

pytestmark = pytest.mark.slow  # one testbed.run of server-only: about half a minute


def test_server_with_edge_drafts_is_the_targets_output_and_counts_the_drafts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(RunConfig(protocol="server", prompts=2, out=str(out), ue=UEConfig(max_new_tokens=40, probe_bytes=0),
                  link=LinkSpec(rtt_ms=2.0), edge=ServeConfig(edge_draft="suffix", batch_verify=True)))
    refs = {str(r["prompt_id"]): r["tokens"] for r in read_jsonl(out / "reference.jsonl")}
    got = {str(o["prompt_id"]): o["tokens"] for o in read_jsonl(out / "server" / "outputs.jsonl")}
    assert got == refs and json.loads((out / "config.json").read_text())["edge_draft"] == "suffix"
    s = json.loads((out / "server" / "summary.json").read_text())
    rounds = read_records(out / "server" / "rounds.csv")
    steps = rounds[rounds["drafted"] > 0]
    assert (rounds["accepted"] <= rounds["drafted"]).all() and steps["accepted"].sum() > 0
    last = rounds.groupby("prompt_id")["round"].transform("max") == rounds["round"]
    assert (rounds["committed"][~last] == rounds["accepted"][~last] + 1).all()  # a pass a chunk: accepted + 1
    assert rounds["committed"].sum() == s["generated_tokens"] == sum(map(len, refs.values()))
    assert (s["num_spec_steps"], s["num_draft_tokens"], s["num_accepted_draft_tokens"]) == (
        len(steps), steps["drafted"].sum(), steps["accepted"].sum())
    assert s["mean_acceptance_length"] == pytest.approx(1 + steps["accepted"].mean()) == mean_accepted_tokens(rounds)
    assert s["aal"] == pytest.approx(rounds["accepted"].mean())  # AAL: over every round, those without a draft too

"""`auto` hands rounds to the edge end to end: testbed.run's edge and UE processes over the emulated loopback link,
the built-in toy pair.  On a long round trip the edge's chunks amortise it better than speculation: some rounds are
the edge's alone (GENERATE with a token budget; its CHUNKs, in parts when the UE's reply timeout is short), and with
no decision head (its speculative rounds then
accept as greedy does) the output stays the target's greedy output, on the plain edge and on the batching edge."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue.ueconfig import UEConfig
from wisv.records.rows import read_records
from wisv.tasks.jsonl import read_jsonl

pytestmark = pytest.mark.slow  # one testbed.run of auto per edge: about half a minute each


@pytest.mark.parametrize(("batch_verify", "recv_timeout_s"), [(False, 10.0), (True, 0.6)])
def test_auto_hands_rounds_to_the_edge_on_a_long_round_trip_losslessly(tmp_path: Path, batch_verify: bool,
                                                                      recv_timeout_s: float) -> None:
    """With a 0.6 s reply timeout a run goes in parts of what the edge decodes in 0.15 s: the parts after a run's
    first come with no request (no exchange) and no link time of their own."""
    out = tmp_path / "run"
    ue = UEConfig(max_new_tokens=48, probe_bytes=0, recv_timeout_s=recv_timeout_s)
    run(RunConfig(protocol="auto", prompts=2, out=str(out), ue=ue,
                  link=LinkSpec(rtt_ms=200.0, rate_up_mbps=3.0, rate_down_mbps=3.0),
                  edge=ServeConfig(head="none", batch_verify=batch_verify)))  # no head: its rounds greedy's
    refs = {str(r["prompt_id"]): r["tokens"] for r in read_jsonl(out / "reference.jsonl")}
    outs = {str(o["prompt_id"]): o["tokens"] for o in read_jsonl(out / "auto" / "outputs.jsonl")}
    assert outs == refs and len(refs) == 2
    s = json.loads((out / "auto" / "summary.json").read_text())
    assert s["errors"] == 0 and s["matches_target"] == 1.0
    rounds = read_records(out / "auto" / "rounds.csv")
    edge = rounds[rounds["edge_alone"].astype(bool)]
    assert len(edge) > 0 and not rounds.iloc[0]["edge_alone"]  # speculation first (nothing measured), then the edge
    assert (edge["drafted"] == 0).all() and edge["committed"].gt(0).all() and edge["t_verify_s"].gt(0).all()
    for pid, g in rounds.groupby("prompt_id"):
        assert list(g["round"]) == list(range(len(g))) and g["committed"].sum() == len(refs[pid])
    parts = edge[edge["exchanges"] == 0]  # a run's later parts
    assert (len(parts) > 0) == (recv_timeout_s < 1) and parts["t_comm_s"].isna().all()

"""The producers of round records agree: the UE's rounds.csv, the load generator's requests and the simulator's
traces all carry wisv.records.rows' fields, in its order, and what each one measures is consistent."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from protocols.schema import Verdict
from testbed.live.orchestrate.procs import Child
from testbed.live.ue.ue import run as run_ue
from testbed.live.ue.ueconfig import UEConfig
from testbed.load.gen import Device, Trace, request_record
from testbed.sim.traces import TraceKey, generate_trace
from wisv.models.loader import load_pair
from wisv.records.rows import RECORD_FIELDS, from_frame, read_records, to_frame
from wisv.records.summary import summarize_rounds


@pytest.mark.slow
def test_the_ue_writes_the_record(pair_dirs, tmp_path):
    args = ["testbed.serve", "--bind", "tcp://127.0.0.1:0", "--target", str(pair_dirs.target), "--head", "none"]
    edge = Child("edge", args, tmp_path / "edge.log")
    try:
        endpoint = edge.wait_for("READY", 120)
        prompts = tmp_path / "prompts.jsonl"
        prompts.write_text("".join(json.dumps({"prompt_id": f"0{i}", "prompt_ids": [1, 51, 28 + i, 223]}) + "\n"
                                   for i in range(2)))
        run_ue(UEConfig(connect=endpoint, prompts_file=str(prompts), out=str(tmp_path / "ue"),
                        drafter=str(pair_dirs.drafter), protocol="sh", draft_len=4, max_new_tokens=12, probe_bytes=0))
    finally:
        edge.stop()
    rounds = read_records(tmp_path / "ue" / "rounds.csv")
    assert list(rounds.columns) == list(RECORD_FIELDS)
    rows = from_frame(rounds)
    assert {r.prompt_id for r in rows} == {"00", "01"} and all(r.ue_id == "ue0" and r.protocol == "sh" for r in rows)
    assert all(0 <= r.accepted <= r.drafted and r.wdt_tokens == r.drafted - r.accepted for r in rows)
    assert all(r.prompt_len == 4 and r.queried == r.mismatches and r.slo_tok_s is None for r in rows)
    outputs = pd.read_json(tmp_path / "ue" / "outputs.jsonl", lines=True, dtype={"prompt_id": str})
    n_out = outputs.set_index("prompt_id")["tokens"].map(len)
    for pid, g in rounds.groupby("prompt_id"):  # the committed tokens add up to the output, round by round
        before = g["committed"].cumsum() - g["committed"]
        assert g["committed"].sum() == n_out[pid] and (g["prefix_len"] == 4 + before).all()
    assert summarize_rounds(rounds)["aal"] == pytest.approx(sum(r.accepted for r in rows) / len(rows))


def test_the_load_generator_writes_the_record():
    dev = Device("ue3", 4.0, [Trace("p", [1], [[5, 6, 7, 8]], [2])])
    v = Verdict(round=0, n_accepted=2, next_token=9, mismatches=0, queried=0, t_verify_s=0.05, t_head_s=0.0,
                t_edge_s=0.3, done=False)
    r = request_record(dev, v, 0.4, 0.1)
    assert list(r) == list(RECORD_FIELDS) and list(to_frame([r]).columns) == list(RECORD_FIELDS)
    [row] = from_frame(to_frame([r]))
    assert (row.ue_id, row.drafted, row.accepted, row.protocol, row.mismatches) == ("ue3", 4, 2, "greedy", None)


def test_the_simulator_traces_are_records(pair_dirs):
    pair = load_pair(pair_dirs.drafter, pair_dirs.target)
    trace = generate_trace(pair, TraceKey("tiny", "greedy", k=3, prompts=2, max_new_tokens=8))
    assert list(trace.columns) == list(RECORD_FIELDS)
    rows = from_frame(trace)
    assert {r.round for r in rows} >= {0} and all(r.t_comm_s is None and r.uplink_bytes is None for r in rows)
    for _, g in trace.groupby("prompt_id"):
        assert g["committed"].sum() == g["n_tokens"].iloc[0]

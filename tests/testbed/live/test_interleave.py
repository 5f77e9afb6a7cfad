"""testbed.run --interleave: each UE runs a prompt under every protocol before the next prompt, into the same
per-protocol directories as a run one protocol after the other, with the same outputs (the lanes' pure parts:
testbed.live.ue.lanes)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue import ue
from testbed.live.ue.lanes import lane_configs, session_id
from testbed.live.ue.ueconfig import UEConfig
from wisv.records.rows import read_records
from wisv.tasks.jsonl import read_jsonl

PROTOS = ["server", "greedy", "auto"]


def test_lane_configs_one_per_protocol_into_its_directory():
    alone = UEConfig(protocol="fh", out="o")
    assert lane_configs(alone) == [alone]
    lanes = lane_configs(UEConfig(interleave=["server", "sh"], out="runs/x/{protocol}/ue1", ue_id="ue1"))
    assert [(c.protocol, c.out, c.interleave) for c in lanes] == [("server", "runs/x/server/ue1", []),
                                                                  ("sh", "runs/x/sh/ue1", [])]
    assert session_id(lanes[1], 4, interleaved=True) == "ue1-sh-4" and session_id(alone, 4, False) == "ue0-4"


def test_lane_configs_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="--out must hold {protocol}"):
        lane_configs(UEConfig(interleave=["server", "sh"], out="o"))
    with pytest.raises(ValueError, match="named twice"):
        lane_configs(UEConfig(interleave=["sh", "sh"], out="{protocol}"))


def test_ue_refuses_an_interleave_without_a_placeholder_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        ue.main(["--interleave", "server", "greedy", "--out", str(tmp_path / "o"), "--connect", "tcp://127.0.0.1:9"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "--out must hold {protocol}" in err[0]


@pytest.mark.slow  # two testbed.runs of three protocols on the toy pair: about half a minute
def test_interleaved_run_takes_the_prompts_in_turn_with_the_same_outputs(tmp_path: Path) -> None:
    base = RunConfig(protocol=",".join(PROTOS), prompts=3, ue=UEConfig(max_new_tokens=16, probe_bytes=0),
                     link=LinkSpec(rtt_ms=2.0), edge=ServeConfig(head="none"), reference=False)
    run(dataclasses.replace(base, out=str(tmp_path / "turns")))
    summaries = run(dataclasses.replace(base, out=str(tmp_path / "interleaved"), interleave=True))
    assert [s["protocol"] for s in summaries] == PROTOS and all(s["errors"] == 0 for s in summaries)
    for p in PROTOS:
        tokens = [[o["tokens"] for o in read_jsonl(tmp_path / d / p / "outputs.jsonl")]
                  for d in ("turns", "interleaved")]
        assert tokens[0] == tokens[1] and len(tokens[0]) == 3  # head none: every protocol the target's greedy output
    spans = []  # (first, last) link time of each (prompt, protocol), in the order the UE ran them
    for p in PROTOS:
        rounds = read_records(tmp_path / "interleaved" / p / "rounds.csv")
        spans += [(g["t_link_s"].min(), g["t_link_s"].max(), pid, p) for pid, g in rounds.groupby("prompt_id")]
    spans.sort()
    assert [(pid, p) for _, _, pid, p in spans] == [(pid, p) for pid in sorted({s[2] for s in spans}) for p in PROTOS]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # a prompt's protocols one after the other, no overlap
    assert "speedup_vs_server" in summaries[1]

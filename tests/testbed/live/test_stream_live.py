"""Server-only and on-device end to end: testbed.run's edge and UE processes over the emulated loopback link, the
built-in toy pair.  Server-only's output is the target's greedy output, streamed in chunks through the batching edge;
on-device's is the drafter's, with nothing on the link; every protocol reports the latencies in vLLM's names and its
speed-up over server-only."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue.ueconfig import UEConfig
from wisv.records.paired import SPEEDUP_COLUMNS
from wisv.records.rows import read_records
from wisv.records.summary import LATENCY_NAMES
from wisv.tasks.jsonl import read_jsonl

pytestmark = pytest.mark.slow  # one testbed.run of three protocols: about half a minute
EVERY = 3  # tokens per chunk


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stream") / "run"
    ue = UEConfig(max_new_tokens=20, probe_bytes=0, stream_every_tokens=EVERY)
    run(RunConfig(protocol="server,device,greedy", prompts=2, out=str(out), ue=ue, link=LinkSpec(rtt_ms=2.0),
                  edge=ServeConfig(batch_verify=True)))
    return out


def _outputs(run_dir: Path, proto: str) -> dict[str, list[int]]:
    return {str(o["prompt_id"]): o["tokens"] for o in read_jsonl(run_dir / proto / "outputs.jsonl")}


def test_server_only_streams_the_targets_greedy_output_in_chunks(toy_run: Path) -> None:
    refs = {str(r["prompt_id"]): r["tokens"] for r in read_jsonl(toy_run / "reference.jsonl")}
    assert _outputs(toy_run, "server") == refs and len(refs) == 2
    s = json.loads((toy_run / "server" / "summary.json").read_text())
    assert (s["errors"], s["matches_target"], s["uplink_bytes"] > 0, s["downlink_bytes"] > 0) == (0, 1.0, True, True)
    rounds = read_records(toy_run / "server" / "rounds.csv")
    for pid, g in rounds.groupby("prompt_id"):
        assert list(g["round"]) == list(range(len(g))) and g["committed"].sum() == len(refs[pid])
        assert (g["committed"].iloc[:-1] == EVERY).all() and g["t_arrival_s"].is_monotonic_increasing
        assert list(g["exchanges"]) == [1] + [0] * (len(g) - 1)  # one GENERATE; the chunks come without asking
        assert (g["uplink_bytes"].iloc[1:] == 0).all() and (g["downlink_bytes"] > 0).all()
        assert (g["drafted"] == 0).all() and g["t_verify_s"].gt(0).all()


def test_on_device_is_the_drafters_output_with_nothing_on_the_link(toy_run: Path) -> None:
    s = json.loads((toy_run / "device" / "summary.json").read_text())
    assert s["errors"] == 0 and s["accuracy"] is not None and 0 <= s["matches_target"] <= 1
    assert s["uplink_bytes"] == s["downlink_bytes"] == 0
    rounds = read_records(toy_run / "device" / "rounds.csv")
    assert (rounds["exchanges"] == 0).all() and rounds["t_draft_s"].gt(0).all() and rounds["t_verify_s"].isna().all()
    assert (rounds.groupby("prompt_id")["committed"].sum() == [len(t) for t in _outputs(toy_run, "device").values()]
            ).all()


def test_every_protocol_reports_the_latencies_and_its_speedup_over_server_only(toy_run: Path) -> None:
    csv = pd.read_csv(toy_run / "summary.csv").set_index("protocol")
    assert list(csv.index) == ["server", "device", "greedy"]
    assert csv[list(LATENCY_NAMES + SPEEDUP_COLUMNS)].notna().all().all()
    assert (csv["mean_ttft_ms"] <= csv["mean_e2el_ms"]).all() and (csv["p99_itl_ms"] >= csv["median_itl_ms"]).all()
    assert csv.loc["server", "speedup_vs_server"] == pytest.approx(1.0)
    for proto in csv.index:
        s = json.loads((toy_run / proto / "summary.json").read_text())
        assert s["speedup_ci_low"] <= s["speedup_vs_server"] <= s["speedup_ci_high"]
        assert not math.isnan(s["mean_itl_ms"])

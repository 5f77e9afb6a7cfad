"""testbed.simulate: traces, the latency model over traces, a tiny end-to-end run, calibration timing and validation."""
import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from channel.csi import CSI
from channel.csitrace import CSITrace, save_trace
from testbed.sim.calibrate import CalibrateConfig, exchange_overhead, time_rounds, time_streams
from testbed.sim.cli import SimConfig, parse_args, run
from testbed.sim.model import alone_latencies, constant, prompt_latencies, summarize
from testbed.sim.resolve import PairCache, links_of, resolve_head
from testbed.sim.traces import TraceKey, cached_trace, trace_rows
from testbed.sim.validate import load_run, prompt_residuals, wire_deployment, with_prefix
from wisv.decoding.speculative import RoundRecord, SpecOutput
from wisv.models.loader import load_pair
from wisv.timing.calibrate import Calibration, save_calibration
from wisv.timing.compute import ModelDims, draft_flops, verify_flops
from wisv.timing.hardware import HardwareProfile
from wisv.timing.latency import PayloadBits
from wisv.timing.protodesc import describe
from wisv.timing.roundtime import Deployment

DIMS = ModelDims(n_layers=2, d_model=4, d_ff=8, vocab=10, n_heads=2, n_kv_heads=1)
# per call 1 ms; FLOPs cost ~nothing (1e21 FLOP/s)
FAST = HardwareProfile("local", peak_tflops=1e9, eta=1.0, source="test", pass_overhead_s=1e-3)
PB0 = PayloadBits(b_tok=0, b_h=0, b_idx=0, d_d=4, vocab=10)  # nothing to serialize


def _rec(i: int, drafted: int, accepted: int, mism: list[int], committed: int) -> RoundRecord:
    return RoundRecord(i, drafted, accepted, mism, 0, [0] * drafted, [0] * (drafted + 1), [0] * committed)


def test_trace_rows_track_the_prefix():
    out = SpecOutput([0] * 7, [_rec(0, 4, 2, [2, 3], 3), _rec(1, 4, 3, [], 4)])
    rows = trace_rows(out, "p0", prompt_len=10, correct=True)
    assert [(r["prefix_len"], r["mismatches"], r["committed"]) for r in rows] == [(10, 2, 3), (13, 0, 4)]
    assert all(r["n_tokens"] == 7 and r["correct"] for r in rows)


def _trace() -> pd.DataFrame:
    rows = [("a", 0, 4, 2, 1, 3, 10), ("a", 1, 4, 4, 0, 5, 13), ("b", 0, 2, 0, 1, 1, 8)]
    df = pd.DataFrame(rows, columns=["prompt_id", "round", "drafted", "accepted", "mismatches", "committed",
                                     "prefix_len"])
    df["n_tokens"] = df["prompt_id"].map({"a": 8, "b": 1})
    df["correct"] = df["prompt_id"].map({"a": True, "b": False})
    return df


def test_prompt_latencies_by_hand():
    """greedy round = K calls + 1 call + RTT 10 ms; sh adds one RTT in rounds with a mismatch."""
    dep = Deployment(DIMS, DIMS, FAST, FAST, PB0)
    link = constant(CSI.symmetric(math.inf, 10.0))
    g = prompt_latencies(_trace(), "greedy", link, dep).set_index("prompt_id")
    assert g.loc["a", "latency_s"] == pytest.approx(2 * 0.015, rel=1e-6)  # 2 rounds x (4 + 1 + 10) ms
    assert g.loc["b", "latency_s"] == pytest.approx((2 + 1 + 10) * 1e-3, rel=1e-6)
    sh = prompt_latencies(_trace(), "sh", link, dep).set_index("prompt_id")["latency_s"]
    assert sh["a"] - g.loc["a", "latency_s"] == pytest.approx(0.010, rel=1e-6)  # round 0 queried one position
    s = summarize(_trace(), g.reset_index())
    assert s["aal"] == pytest.approx(6 / 3) and s["rounds_per_prompt"] == 1.5 and s["accuracy"] == 0.5
    assert s["latency_s"] == pytest.approx((0.030 + 0.013) / 2, rel=1e-6)
    assert s["throughput_tok_s"] == pytest.approx(9 / 0.043, rel=1e-6)


def test_alone_latencies_by_hand():
    """Server-only over the greedy trace's output lengths: OPEN (RTT + prefill call) + GENERATE's RTT/2 + one call per
    token + the last chunk's RTT/2; on-device: a prefill call and one call per token, no link."""
    dep = Deployment(DIMS, DIMS, FAST, FAST, PB0)
    link = constant(CSI.symmetric(math.inf, 10.0))
    srv = alone_latencies(_trace(), describe("server"), link, dep).set_index("prompt_id")
    assert srv.loc["a", "latency_s"] == pytest.approx(0.010 + 0.001 + 0.005 + 8e-3 + 0.005, rel=1e-6)
    assert srv.loc["b", "latency_s"] == pytest.approx(0.010 + 0.001 + 0.005 + 1e-3 + 0.005, rel=1e-6)
    dev = alone_latencies(_trace(), describe("device"), link, dep).set_index("prompt_id")
    assert dev.loc["a", "latency_s"] == pytest.approx(0.001 + 8e-3, rel=1e-6)
    assert dev["correct"].isna().all()  # the drafter's own output is not traced


def test_alone_latencies_stream_in_chunks():
    """A stream of chunks of 8 tokens (testbed.run --stream-every-tokens 8) pays the edge's host time per chunk once
    for prompt a's 8 tokens, not 8 times; on a link with no rate the rest is the same."""
    dep = Deployment(DIMS, DIMS, FAST, FAST, PB0, chunk_overhead_s=2e-3)
    link = constant(CSI.symmetric(math.inf, 10.0))
    each = alone_latencies(_trace(), describe("server"), link, dep).set_index("prompt_id")
    eight = alone_latencies(_trace(), describe("server"), link, dep, chunk_tokens=8).set_index("prompt_id")
    assert each.loc["a", "latency_s"] - eight.loc["a", "latency_s"] == pytest.approx(7 * 2e-3, rel=1e-6)
    assert each.loc["b", "latency_s"] == pytest.approx(eight.loc["b", "latency_s"], rel=1e-9)  # one token either way


def test_trace_cache_builds_once(tmp_path):
    key = TraceKey("pair", "greedy", 4, 2, 16)
    calls = []
    make = lambda: calls.append(1) or _trace()  # noqa: E731
    first, hit1 = cached_trace(tmp_path, key, make)
    second, hit2 = cached_trace(tmp_path, key, make)
    assert (hit1, hit2, len(calls)) == (False, True, 1)
    pd.testing.assert_frame_equal(first, second, check_dtype=False)
    assert TraceKey("pair", "wisv", 4, 2, 16, csi=(1.0,)).filename() != TraceKey("pair", "wisv", 4, 2, 16,
                                                                                   csi=(2.0,)).filename()


def test_links_grid_and_trace(tmp_path):
    cfg = SimConfig(rates_mbps=[20.0, 500.0], rtts_ms=[5.0], per=0.1)
    links = links_of(cfg)
    assert [(x.rate_mbps, x.rtt_ms, x.per) for x in links] == [(20.0, 5.0, 0.1), (500.0, 5.0, 0.1)]
    assert links[0].csi_at(123.0) == CSI.symmetric(20.0, 5.0, 0.1)
    save_trace(CSITrace((0.0, 1.0), (CSI.symmetric(10.0, 20.0), CSI.symmetric(30.0, 40.0))), tmp_path / "t.csv")
    (link,) = links_of(SimConfig(csi_trace=str(tmp_path / "t.csv")))
    assert (link.rate_mbps, link.rtt_ms) == (20.0, 30.0)  # row means
    assert link.csi_at(1.5).rtt_ms == 40.0 and link.csi_at(2.5).rtt_ms == 20.0  # loops with period 2 s


def test_head_resolution(tmp_path, pair_dirs):
    pair = PairCache(str(pair_dirs.drafter), str(pair_dirs.target))
    assert resolve_head("none", None, pair).policy is None
    assert "built-in pair" in resolve_head("default", None, pair).desc  # the default head is not for this pair
    with pytest.raises(ValueError, match="not a decision-head directory"):
        resolve_head(str(tmp_path), None, pair)


def test_parse_args_lists():
    cfg = parse_args(["--draft-lens", "2,4", "--rates-mbps", "20", "--methods", "greedy,fh", "--arch-drafter",
                      "llama-3.2-1b", "--arch-target", "llama-3.1-8b"])
    assert (cfg.draft_lens, cfg.rates_mbps, cfg.methods, cfg.arch_target) == ([2, 4], [20.0], ["greedy", "fh"],
                                                                              "llama-3.1-8b")


@pytest.mark.slow
def test_tiny_end_to_end(tmp_path, pair_dirs):
    """2 prompts of the tiny pair, 2 windows, 8 methods, 4 links; a re-run reads the cache and gives the same table."""
    cfg = SimConfig(out=str(tmp_path / "out"), draft_lens=[2, 4], prompts=2, max_new_tokens=12, head="none",
                    cache_dir=str(tmp_path / "cache"), drafter=str(pair_dirs.drafter), target=str(pair_dirs.target),
                    arch_drafter="llama-3.2-1b", arch_target="llama-3.1-8b")
    table = run(cfg)
    assert len(table) == 2 * 8 * 4
    assert set(table["method"]) == {"greedy", "reject", "FH (lossless)", "SH (lossless)", "EF (lossless)", "tree",
                                    "server", "device"}
    assert len(list((tmp_path / "cache").glob("*.csv"))) == 6  # greedy + sampling + tree traces per K
    out = tmp_path / "out"
    assert (out / "fig4.png").stat().st_size > 0
    resolved = json.loads((out / "config.json").read_text())["resolved"]
    assert resolved["dims"] == "llama-3.2-1b -> llama-3.1-8b"
    assert "acceptance traces" in table["acceptance_from"][0] and "llama-3.2-1b" in table["timing_from"][0]
    again = run(cfg)
    pd.testing.assert_frame_equal(table, again)
    lat = table.set_index(["method", "draft_len", "rate_mbps", "rtt_ms"])["latency_s"]
    assert lat["reject", 4, 20.0, 50.0] > 3 * lat["reject", 4, 500.0, 50.0]  # K*V probabilities on the uplink
    assert lat["greedy", 4, 20.0, 50.0] < 1.05 * lat["greedy", 4, 500.0, 50.0]  # token ids only
    assert (lat["SH (lossless)", 4, 20.0, 50.0] >= lat["FH (lossless)", 4, 20.0, 50.0]).all()
    assert lat["server", 4, 20.0, 50.0] > lat["server", 4, 20.0, 5.0]  # OPEN, GENERATE and the stream pay the RTT
    assert lat["device", 4, 20.0, 50.0] == lat["device", 4, 500.0, 5.0]  # no link
    aal = table.set_index(["method", "draft_len", "rate_mbps", "rtt_ms"])["aal"]
    assert aal["tree", 4, 20.0, 50.0] >= aal["greedy", 4, 20.0, 50.0] - 0.5  # a best-first tree vs a chain of 4


def test_time_rounds_records_calls(pair_dirs):
    torch.set_num_threads(1)
    pair = load_pair(pair_dirs.drafter, pair_dirs.target)
    t = time_rounds(pair, CalibrateConfig(draft_lens=[1, 3], prompts=1, rounds_per_k=2, idle_gap_ms=0.0))
    assert [(x.role, x.k, x.passes) for x in t] == [("draft", 1, 1), ("verify", 1, 1)] * 2 + [
        ("draft", 3, 3), ("verify", 3, 1)] * 2
    d, tg = ModelDims.from_hf_config(pair.drafter.config), ModelDims.from_hf_config(pair.target.config)
    assert t[0].flops == draft_flops(d, t[0].l, 1) and t[1].flops == verify_flops(tg, t[1].l, 1)
    assert all(x.seconds > 0 for x in t)


def test_time_streams_times_the_targets_decode_passes(pair_dirs):
    """Streams of 1 and 3 tokens, twice each, one after the other on the prompt's growing sequence."""
    torch.set_num_threads(1)
    pair = load_pair(pair_dirs.drafter, pair_dirs.target)
    t = time_streams(pair, CalibrateConfig(stream_lens=[1, 3], streams_per_len=2, prompts=1, idle_gap_ms=0.0))
    assert [(x.role, x.passes, x.k) for x in t] == [("decode", 1, 1)] * 2 + [("decode", 3, 3)] * 2
    assert [b.l - a.l for a, b in zip(t, t[1:])] == [1, 1, 3]  # each stream commits its tokens
    tg = ModelDims.from_hf_config(pair.target.config)
    assert t[2].flops == sum(verify_flops(tg, t[2].l + j, 1) for j in range(3))
    assert all(x.seconds > 0 for x in t)


def test_time_rounds_times_the_given_prompt_file(pair_dirs, tmp_path):
    pair = load_pair(pair_dirs.drafter, pair_dirs.target)
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt_ids": [5, 6, 7, 8, 9, 10, 11]}\n')
    t = time_rounds(pair, CalibrateConfig(draft_lens=[2], prompts=1, rounds_per_k=1, idle_gap_ms=0.0,
                                          prompts_file=str(f)))
    assert 7 < t[0].l <= 7 + 3  # the file's 7-token prompt plus what the untimed first round committed (1 to 3)


def _run_dir(tmp_path, t_e2e_s: float = 0.060):
    """A testbed.run directory: one greedy prompt of 5 tokens, 2 rounds of K = 4 on an unlimited, 10 ms link."""
    run = tmp_path / "run"
    (run / "greedy").mkdir(parents=True)
    link = {"rate_up_mbps": None, "rate_down_mbps": None, "rtt_ms": 10.0, "jitter_ms": 0.0, "per": 0.0,
            "csi_trace": None, "seed": 0}
    (run / "config.json").write_text(json.dumps({"link": link, "drafter": None, "target": None}))
    (run / "prompts.jsonl").write_text(json.dumps({"prompt_id": "p0", "prompt_ids": [1, 2, 3, 4, 5]}) + "\n")
    base = {"prompt_id": "p0", "protocol": "greedy", "draft_len": 4, "queried": 0, "exchanges": 1,
            "uplink_bytes": 100, "downlink_bytes": 50, "t_draft_s": 0.004, "t_comm_s": 0.011, "t_verify_s": 0.001,
            "t_head_s": 0.0, "t_round_s": 0.017, "rtt_ms": 10.0, "rate_up_mbps": math.inf,
            "rate_down_mbps": math.inf, "per": 0.0, "per_down": 0.0}
    rounds = [base | {"round": 0, "accepted": 2, "mismatches": 1}, base | {"round": 1, "accepted": 4, "mismatches": 0}]
    pd.DataFrame(rounds).to_csv(run / "greedy" / "rounds.csv", index=False)
    (run / "greedy" / "outputs.jsonl").write_text(json.dumps({"prompt_id": "p0", "tokens": [7] * 8, "t_e2e_s": t_e2e_s})
                                                  + "\n")
    return run


def _stream(run: Path, protocol: str, passes: str, chunks: list[tuple[float, float]], downlink_bytes: int) -> None:
    """A generate-alone protocol's run of one prompt in 1-token chunks: (its passes' seconds in column ``passes``,
    arrival at the UE) each; the prompt's end-to-end time the last arrival."""
    (run / protocol).mkdir()
    base = {"prompt_id": "p0", "protocol": protocol, "draft_len": 0, "queried": 0, "exchanges": 0, "accepted": 0,
            "mismatches": 0, "committed": 1, "uplink_bytes": 0, "downlink_bytes": downlink_bytes, "t_draft_s": None,
            "t_verify_s": None, "t_comm_s": None, "t_head_s": 0.0, "rtt_ms": 10.0, "rate_up_mbps": math.inf,
            "rate_down_mbps": math.inf, "per": 0.0, "per_down": 0.0}
    rounds = [base | {"round": i, passes: t, "t_round_s": t, "t_arrival_s": a} for i, (t, a) in enumerate(chunks)]
    pd.DataFrame(rounds).to_csv(run / protocol / "rounds.csv", index=False)
    (run / protocol / "outputs.jsonl").write_text(json.dumps({"prompt_id": "p0", "tokens": [7] * len(chunks),
                                                             "t_e2e_s": chunks[-1][1]}) + "\n")


def test_chunk_residuals_are_the_gaps_between_chunks_beyond_their_passes(tmp_path):
    """A server-only stream of three 1-token chunks: gaps of 5 and 6 ms, passes of 4 and 5 ms -> 1 ms each."""
    from testbed.sim.calibrate import chunk_overhead
    from testbed.sim.validate import chunk_residuals
    run = _run_dir(tmp_path)
    _stream(run, "server", "t_verify_s", [(0.003, 0.100), (0.004, 0.105), (0.005, 0.111)], downlink_bytes=40)
    loaded = load_run(run)
    assert chunk_residuals("server", loaded) == pytest.approx([0.001, 0.001])
    from testbed.sim.validate import compute_ratio, with_prefix
    from wisv.timing.alone import decode_steps_s
    dep = Deployment(DIMS, DIMS, FAST, FAST, PB0)
    recs = with_prefix(loaded.rounds["server"], loaded.prompt_len).to_dict("records")
    profiled = sum(decode_steps_s(DIMS, 4, 3, FAST, dep))  # 3 tokens after the 5-token prompt
    assert compute_ratio("server", recs, dep) == pytest.approx(0.012 / profiled)  # its passes: 3 + 4 + 5 ms
    ms, notes = chunk_overhead(run)
    assert ms == pytest.approx(0.001) and (notes["chunks"], notes["protocols"]) == (2, ["server"])
    assert chunk_overhead(run, "ue")[0] == 0.0  # nothing generated on the device: not measured
    (run / "server" / "rounds.csv").unlink()
    (run / "server" / "outputs.jsonl").unlink()
    (run / "server").rmdir()
    assert chunk_overhead(run)[0] == 0.0  # greedy alone streams nothing: not measured


def test_a_device_streams_residuals_are_the_gaps_beyond_its_drafter_passes(tmp_path):
    """On-device, three 1-token chunks: gaps of 1.2 and 1.3 ms, drafter passes of 1.0 and 1.1 ms -> 0.2 ms each; the
    link's bytes and the target's time do not enter (there are none)."""
    from testbed.sim.calibrate import chunk_overhead
    from testbed.sim.validate import chunk_residuals
    run = _run_dir(tmp_path)
    _stream(run, "device", "t_draft_s", [(0.003, 0.0030), (0.0010, 0.0042), (0.0011, 0.0055)], downlink_bytes=0)
    assert chunk_residuals("device", load_run(run)) == pytest.approx([0.0002, 0.0002])
    ms, notes = chunk_overhead(run, "ue")
    assert ms == pytest.approx(0.0002) and (notes["chunks"], notes["protocols"]) == (2, ["device"])
    assert chunk_overhead(run)[0] == 0.0  # no server-only stream: the edge's is not measured


def test_with_prefix_and_residuals(tmp_path):
    run = load_run(_run_dir(tmp_path))
    r = with_prefix(run.rounds["greedy"], run.prompt_len)
    assert r["prefix_len"].tolist() == [5, 8]  # 5 prompt tokens, then 2 accepted + 1
    dep = Deployment(DIMS, DIMS, FAST, FAST, PB0)
    res = prompt_residuals("greedy", run, dep)
    # 60 ms - measured compute 10 ms - 2 RTTs 20 ms - OPEN (RTT 10 ms + prefill call 1 ms) = 19 ms over 3 exchanges
    assert res["residual_s"].iloc[0] == pytest.approx(0.019, abs=1e-6) and res["exchanges"].iloc[0] == 3


def test_validate_synthetic_run(tmp_path, capsys):
    """predicted = OPEN (10 + 2 + 1 ms) + 2 x (4 draft calls + 1 verify call + 10 ms RTT + 2 ms) = 47 ms."""
    run = _run_dir(tmp_path, t_e2e_s=0.050)
    save_calibration(Calibration(FAST, exchange_overhead_s=0.002), tmp_path / "local.json")
    out = tmp_path / "val"
    val = _validate(["--validate", str(run), "--out", str(out), "--local-profile", str(tmp_path / "local.json")])
    assert list(val.columns[:4]) == ["prompt_id", "protocol", "predicted_s", "measured_s"] and len(val) == 1
    assert val["predicted_s"].iloc[0] == pytest.approx(0.047, abs=1e-5)
    stats = json.loads((out / "validation.json").read_text())["stats"]["greedy"]
    assert stats["mean_abs_rel_err"] == pytest.approx(0.003 / 0.050, abs=1e-3)
    assert stats["median_compute_ratio"] == pytest.approx(val["compute_ratio"].iloc[0]) and 0 < stats[
        "median_compute_ratio"] < math.inf  # measured drafting and verification over the profile's
    measured = float(pd.read_csv(run / "greedy" / "rounds.csv")[["t_draft_s", "t_verify_s"]].sum().sum())
    given = val["given_compute_s"].iloc[0]  # the profile's compute replaced by the run's own
    assert given == pytest.approx(0.047 - measured / val["compute_ratio"].iloc[0] + measured)
    assert stats["mean_abs_rel_err_given_compute"] == pytest.approx(abs(given - 0.050) / 0.050)
    assert (out / "validation.png").is_file() and (out / "validation.csv").is_file()
    assert "mean_abs_rel_err" in capsys.readouterr().out


def test_validate_leaves_a_chooser_out_and_says_so(tmp_path, capsys):
    """A cell of the crossover map holds auto beside greedy: auto's rounds (the edge's alone have no mismatches)
    are not priced, greedy's are as without it, and a run of auto alone is refused in one line."""
    run = _run_dir(tmp_path, t_e2e_s=0.050)
    (run / "auto").mkdir()
    edge = {"prompt_id": "p0", "protocol": "auto", "round": 0, "draft_len": 0, "accepted": 0, "mismatches": None,
            "queried": None, "committed": 7, "exchanges": 1, "uplink_bytes": 40, "downlink_bytes": 60,
            "t_draft_s": 0.0, "t_verify_s": 0.020, "t_comm_s": 0.010, "t_head_s": None, "t_round_s": 0.031,
            "edge_alone": True, "rtt_ms": 10.0, "rate_up_mbps": math.inf, "rate_down_mbps": math.inf, "per": 0.0,
            "per_down": 0.0}
    pd.DataFrame([edge]).to_csv(run / "auto" / "rounds.csv", index=False)
    (run / "auto" / "outputs.jsonl").write_text(json.dumps({"prompt_id": "p0", "tokens": [7] * 7, "t_e2e_s": 0.045})
                                                + "\n")
    save_calibration(Calibration(FAST, exchange_overhead_s=0.002), tmp_path / "local.json")
    out = tmp_path / "val"
    val = _validate(["--validate", str(run), "--out", str(out), "--local-profile", str(tmp_path / "local.json")])
    assert val["protocol"].tolist() == ["greedy"] and val["predicted_s"].iloc[0] == pytest.approx(0.047, abs=1e-5)
    assert json.loads((out / "validation.json").read_text())["not_predicted"] == ["auto"]
    assert "not predicted: auto" in capsys.readouterr().out
    from testbed.sim.validate import predictable
    with pytest.raises(ValueError, match="only choosers"):
        predictable(["auto"])


def test_exchange_overhead_from_a_run(tmp_path):
    run = _run_dir(tmp_path)
    cal = Calibration(FAST)
    ex, notes = exchange_overhead(run, cal, (DIMS, DIMS), DIMS.vocab)
    # wire payload bits make the serialization 0 on the unlimited link: same 19 ms / 3 exchanges as above
    assert ex == pytest.approx(0.019 / 3, abs=1e-6) and notes["prompts"] == 1


def test_validate_without_local_profile_says_how_to_make_one(tmp_path):
    run = _run_dir(tmp_path)
    with pytest.raises(ValueError, match="testbed.simulate calibrate"):
        _validate(["--validate", str(run), "--out", str(tmp_path / "v"), "--local-profile",
                          str(tmp_path / "missing.json")])


def _validate(argv: list[str]) -> pd.DataFrame:
    return run(parse_args(argv))


def test_missing_default_head_falls_back_with_a_notice(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("testbed.sim.resolve.default_head_dir", lambda _target: tmp_path / "no-head")
    head = resolve_head("default", None, PairCache(None, None))
    assert head.policy is None and "no decision head" in capsys.readouterr().out


def test_default_head_of_a_named_pair(tmp_path, monkeypatch, capsys):
    """--pair smollm2: the default head is the one shipped for that pair (here missing: a notice, no head); with its
    judges shipped, the edge judge."""
    from wisv import pairs
    monkeypatch.setenv(pairs.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setitem(pairs.HEAD_DIRS, "smollm2", tmp_path / "smollm2-head")
    monkeypatch.setitem(pairs.JUDGE_DIRS, "smollm2", tmp_path / "smollm2-judges")  # no judges shipped either
    root = tmp_path / "cache" / "pairs" / "smollm2"
    head = resolve_head("default", None, PairCache(str(root / "drafter"), str(root / "target")))
    assert head.policy is None and str(tmp_path / "smollm2-head") in capsys.readouterr().out
    monkeypatch.setitem(pairs.JUDGE_DIRS, "smollm2", pairs.ASSETS_DIR / "smollm2-judges")
    head = resolve_head("default", None, PairCache(str(root / "drafter"), str(root / "target")))
    assert "h_draft" not in head.policy.inputs and "smollm2-judges" in head.desc


def test_wisv_traces_are_cached_per_link(tmp_path, pair_dirs):
    """A (random) head for the tiny pair: fh/sh become WISV-FH/SH, with one trace per link setting."""
    from wisv.head.model import DecisionHead, HeadConfig
    from wisv.head.store import save_head
    torch.manual_seed(0)
    save_head(DecisionHead(HeadConfig(d_draft=32, d_target=32, tau=0.5)), tmp_path / "head")
    cfg = SimConfig(out=str(tmp_path / "out"), methods=["fh", "sh"], draft_lens=[3], prompts=2, max_new_tokens=10,
                    rates_mbps=[2.0, 200.0], rtts_ms=[20.0], head=str(tmp_path / "head"),
                    cache_dir=str(tmp_path / "cache"), drafter=str(pair_dirs.drafter), target=str(pair_dirs.target))
    table = run(cfg)
    assert set(table["method"]) == {"WISV-FH", "WISV-SH"} and set(table["acceptance"]) == {"wisv"}
    assert len(list((tmp_path / "cache").glob("wisv-*.csv"))) == 2  # fh and sh share a link's trace


def test_validation_prices_a_stream_in_the_chunks_it_recorded():
    """A server-only prompt recorded as one chunk of 8 tokens (--stream-every-tokens 8) is priced as one chunk: the
    edge's host time per chunk once, not once per token."""
    from testbed.sim.validate import predict_prompt
    dep = Deployment(DIMS, DIMS, FAST, FAST, PB0, chunk_overhead_s=2e-3)
    csi = CSI.symmetric(math.inf, 10.0)
    one = [{"committed": 8}]
    each = [{"committed": 1}] * 8
    t_one, _ = predict_prompt("server", one, 4, csi, dep)
    t_each, _ = predict_prompt("server", each, 4, csi, dep)
    assert t_each - t_one == pytest.approx(7 * 2e-3, rel=1e-6)


def test_the_runs_own_speed_comes_from_its_dev_prompts_and_is_scored_on_the_others():
    """Four prompts in run order p0..p3: the dev ones (p0, p2) ran at 1.2x and 1.4x their profiled compute, so the
    run's speed is 1.3; p1 and p3 are predicted with their profiled compute scaled by it, and only their errors
    count.  A held-out prompt's own measured compute never enters its prediction."""
    from testbed.sim.validate import error_stats, with_run_speed
    df = pd.DataFrame({"prompt_id": ["p3", "p2", "p1", "p0"], "protocol": "server",
                       "predicted_s": [1.0, 1.0, 1.0, 1.0], "measured_s": [1.3, 1.4, 1.25, 1.2],
                       "profiled_compute_s": [0.5, 0.5, 0.5, 0.5], "compute_ratio": [1.6, 1.4, 1.5, 1.2]})
    out = with_run_speed(df, ["p0", "p1", "p2", "p3"])
    assert out["dev"].tolist() == [False, True, False, True] and out["run_speed"].iloc[0] == pytest.approx(1.3)
    assert out["run_speed_s"].tolist() == pytest.approx([1.15] * 4)  # 1.0 + 0.5 x 0.3
    again = with_run_speed(df.assign(compute_ratio=[9.0, 1.4, 9.0, 1.2]), ["p0", "p1", "p2", "p3"])
    assert again["run_speed_s"].tolist() == pytest.approx(out["run_speed_s"].tolist())  # held-out ratios unused
    stats = error_stats(out)
    assert stats["held_out_prompts"] == 2 and stats["run_speed"] == pytest.approx(1.3)
    assert stats["mean_abs_rel_err_run_speed"] == pytest.approx((0.15 / 1.3 + 0.10 / 1.25) / 2)  # p3, p1
    assert stats["mean_abs_rel_err_held_out"] == pytest.approx((0.3 / 1.3 + 0.25 / 1.25) / 2)
    assert stats["prompts"] == 4  # the profile's own figures still cover every prompt


def test_a_streams_start_residual_is_its_first_arrival_beyond_the_warm_model(tmp_path):
    """Server-only, first chunk at 100 ms after the OPEN: the residual is 100 ms less the model's first chunk (its
    OPEN, GENERATE, one pass, the chunk's downlink), whatever start overhead the deployment already carries; the
    calibration's median of them, 0 without a server-only stream."""
    from testbed.sim.calibrate import start_overhead
    from testbed.sim.validate import start_residuals
    from wisv.timing.alone import alone_s
    run_dir = _run_dir(tmp_path)
    _stream(run_dir, "server", "t_verify_s", [(0.003, 0.100), (0.004, 0.105), (0.005, 0.111)], downlink_bytes=40)
    run = load_run(run_dir)
    dep = Deployment(DIMS, DIMS, FAST, FAST, PB0)
    csi = CSI(math.inf, math.inf, 10.0, 0.0, 0.0)
    want = 0.100 - alone_s(describe("server"), 5, 1, lambda _t: csi, dep)
    assert start_residuals("server", run, dep) == pytest.approx([want])
    assert start_residuals("server", run, replace(dep, stream_start_overhead_s=0.05)) == pytest.approx([want])
    cal = Calibration(FAST)
    ms, notes = start_overhead(run_dir, cal, (DIMS, DIMS), DIMS.vocab)
    assert notes["prompts"] == 1 and ms == pytest.approx(max(0.0, start_residuals(
        "server", run, wire_deployment(DIMS, DIMS, FAST, FAST, vocab=DIMS.vocab))[0]))
    for f in ("rounds.csv", "outputs.jsonl"):
        (run_dir / "server" / f).unlink()
    assert start_overhead(run_dir, cal, (DIMS, DIMS), DIMS.vocab)[0] == 0.0  # greedy streams nothing

"""Load generator: request records by hand, capacity from a sweep table, and a small live run against a real edge."""
import json
from dataclasses import replace

import pandas as pd
import pytest

from protocols.schema import Verdict
from testbed.common.link import LinkSpec
from testbed.load.cli import LoadConfig, capacity, run
from testbed.load.gen import Device, Trace, request_record


def test_request_record_budget_and_violation():
    dev = Device("ue0", 4.0, [Trace("p", [1], [[5, 6, 7, 8]], [2])])
    v = Verdict(round=0, n_accepted=2, next_token=9, mismatches=0, queried=0, t_verify_s=0.05, t_head_s=0.0,
                t_edge_s=0.30, done=False)
    r = request_record(dev, v, t_round_s=0.40, tau_d_s=0.1)
    # 4 tokens at 4 tok/s = 1 s; minus 0.4 s drafting and 0.1 s network -> budget 0.5 s; edge took 0.3 s
    assert r["budget_s"] == pytest.approx(0.5) and not r["violated"]
    assert r["t_queue_s"] == pytest.approx(0.25) and r["wdt_tokens"] == 2 and r["committed"] == 3
    assert request_record(dev, replace(v, t_edge_s=0.36), 0.40, 0.1)["violated"] is False  # 0.36 <= 0.46
    assert request_record(dev, replace(v, t_edge_s=0.36), 0.70, 0.1)["violated"] is True  # budget 0.26 s
    assert r["t_sent_s"] == 0.0 and request_record(dev, v, 0.40, 0.1, t_sent_s=1.25)["t_sent_s"] == 1.25


def test_capacity_is_the_largest_n_within_epsilon():
    sweep = pd.DataFrame({"ues": [1, 2, 4, 8], "viol_2": [0.0, 0.0, 0.05, 0.3], "viol_8": [0.0, 0.2, 0.0, 0.5]})
    assert capacity(sweep, [2.0, 8.0], 0.1) == {"2": 4, "8": 1}  # class 8 fails at N=2: its pass at 4 is noise
    assert capacity(sweep, [2.0, 8.0], 0.0) == {"2": 2, "8": 1}
    assert capacity(sweep, [4.0], 0.1) == {"4": 0}  # a class never swept
    feasible = sweep.assign(viol_feasible_8=[0.0, 0.05, 0.0, 0.2])
    assert capacity(feasible, [8.0], 0.1, prefix="viol_feasible_") == {"8": 4}


def test_summary_separates_infeasible_requests():
    from testbed.load.cli import summarize, sweep_row
    df = pd.DataFrame({"slo_tok_s": [50.0, 50.0, 50.0, 50.0, 20.0], "violated": [True, True, False, False, False],
                       "budget_s": [-0.001, 0.02, 0.02, 0.03, 0.2], "committed": [3, 9, 9, 9, 9],
                       "wdt_tokens": [0, 1, 0, 2, 0], "t_queue_s": [0.0] * 5, "t_verify_s": [0.01] * 5})
    s = summarize(df, 2, 1.0, [])
    assert s["violation_rate"]["50.0"] == 0.5  # every request
    assert s["violation_rate_feasible"]["50.0"] == pytest.approx(1 / 3)  # the first had a negative budget
    assert s["infeasible_rate"] == {"50.0": 0.25, "20.0": 0.0}
    row = sweep_row(s)
    assert (row["viol_50"], row["infeasible_50"], row["ues"]) == (0.5, 0.25, 2)


@pytest.mark.slow
def test_live_sweep_against_a_batched_edge(pair_dirs, tmp_path):
    cfg = LoadConfig(sweep="1,3", slo_mix="2,50", prompts_per_ue=1, draft_len=4, max_new_tokens=16, tau_d_ms=2.0,
                     scheduler="fcfs", timeout_s=120, compare_max_batch=1, out=str(tmp_path),
                     target=str(pair_dirs.target), drafter=str(pair_dirs.drafter), link=LinkSpec(None, None, 0.0))
    sweep = run(cfg)
    assert sweep["ues"].tolist() == [1, 3] and (sweep["errors"] == 0).all()
    reqs = pd.read_csv(tmp_path / "n3" / "requests.csv")
    assert set(reqs["ue_id"]) == {"ue0", "ue1", "ue2"} and set(reqs["slo_tok_s"]) == {2.0, 50.0}
    assert (reqs["t_queue_s"] >= 0).all() and (reqs["t_verify_s"] > 0).all()
    assert reqs["batch"].between(1, 3).all()  # the edge reports each request's batch size
    sent = reqs.groupby("ue_id")["t_sent_s"]  # each UE's DRAFTs in order, within the run
    assert (reqs["t_sent_s"] >= 0).all() and sent.apply(lambda t: t.is_monotonic_increasing).all()
    cap = json.loads((tmp_path / "capacity.json").read_text())
    assert set(cap["capacity"]) == {"2", "50"} == set(cap["capacity_feasible"])
    (tmp_path / "sweep.csv").unlink()
    from testbed.load.cli import main
    main(["--resummarize", str(tmp_path)])  # rebuilt from the per-request records alone
    assert pd.read_csv(tmp_path / "sweep.csv")[["ues", "viol_50"]].equals(sweep[["ues", "viol_50"]])
    both = pd.read_csv(tmp_path / "batching.csv")
    assert sorted(set(both["max_batch"])) == [1, 16] and len(both) == 4
    for png in ("violations_vs_n.png", "queue_vs_verify.png"):
        assert (tmp_path / png).stat().st_size > 0


def test_network_time_estimate_is_smoothed():
    from testbed.load.gen import NET_SMOOTHING, smooth
    assert smooth(0.02, 0.02) == pytest.approx(0.02)
    assert smooth(0.0, 0.01) == pytest.approx(NET_SMOOTHING * 0.01)
    assert Device("ue0", 4.0, []).t_net_s == 0.0


def test_scheduler_options_are_checked_up_front():
    from testbed.load.cli import parse_args
    assert parse_args(["--lost-order", "edf"]).lost_order == "edf"
    with pytest.raises(SystemExit):
        parse_args(["--lost-order", "sometimes"])
    with pytest.raises(ValueError, match="scheduler"):
        LoadConfig(scheduler="random")
    assert parse_args([]).slack_ms is None and parse_args(["--slack-ms", "5"]).slack_ms == 5.0  # None: the guard
    with pytest.raises(SystemExit):
        parse_args(["--slack-ms", "-1"])


def test_repeats_run_every_n_then_again_and_average():
    from pathlib import Path

    from testbed.load.cli import mean_sweep, plan_runs, run_dir
    assert plan_runs([8, 16], 2) == [(0, 8), (0, 16), (1, 8), (1, 16)]
    assert run_dir(Path("o"), 8, 1, 2) == Path("o/n8-r1") and run_dir(Path("o"), 8, 0, 1) == Path("o/n8")
    rows = pd.DataFrame({"ues": [8, 16, 8, 16], "repeat": [0, 0, 1, 1], "viol_50": [0.1, 0.3, 0.0, 0.2],
                         "errors": [0, 1, 0, 2]})
    mean = mean_sweep(rows)
    assert mean["ues"].tolist() == [8, 16] and mean["viol_50"].tolist() == pytest.approx([0.05, 0.25])
    assert mean["errors"].tolist() == [0, 3] and mean["repeats"].tolist() == [2, 2]
    assert mean_sweep(rows.drop(columns="repeat")).equals(rows.drop(columns="repeat"))  # one run: as is
    with pytest.raises(ValueError, match="repeats"):
        LoadConfig(repeats=0)


def test_resummarize_a_repeated_sweep_from_its_records(tmp_path):
    from dataclasses import asdict

    from testbed.load.cli import main
    cfg = LoadConfig(sweep="2,4", slo_mix="50", repeats=2, out=str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps(asdict(cfg) | {"slack_ms": -1.0}))  # an older run's "the guard"
    for rep, viol in ((0, [True, False]), (1, [True, True])):
        for n in (2, 4):
            d = tmp_path / f"n{n}-r{rep}"
            d.mkdir()
            pd.DataFrame({"slo_tok_s": [50.0, 50.0], "violated": viol, "budget_s": [0.01, 0.02], "committed": [5, 5],
                          "wdt_tokens": [1, 1], "t_queue_s": [0.0, 0.0], "t_verify_s": [0.01, 0.01],
                          "t_round_s": [0.05, 0.05]}).to_csv(d / "requests.csv", index=False)
            (d / "summary.json").write_text(json.dumps({"wall_s": 1.0, "errors": []}))
    main(["--resummarize", str(tmp_path)])
    sweep = pd.read_csv(tmp_path / "sweep.csv")
    assert sweep["viol_50"].tolist() == [0.75, 0.75] and sweep["repeats"].tolist() == [2, 2]
    assert len(pd.read_csv(tmp_path / "sweep_repeats.csv")) == 4
    assert json.loads((tmp_path / "capacity.json").read_text())["capacity"] == {"50": 0}


def test_active_goodput_stops_when_the_first_ue_is_done():
    from testbed.load.cli import active_goodput

    # ue0 is done at 1.0 s (last verdict: sent 0.8 + 0.2 round); ue1 runs on alone until 3.0 s
    df = pd.DataFrame({"ue_id": ["ue0", "ue0", "ue1", "ue1", "ue1"], "t_sent_s": [0.1, 0.8, 0.2, 0.9, 2.9],
                       "t_round_s": [0.2, 0.2, 0.3, 0.2, 0.1], "committed": [5, 5, 4, 6, 10]})
    assert active_goodput(df) == pytest.approx((5 + 5 + 4) / 1.0)  # ue1's verdicts at 1.1 and 3.0 are after
    assert active_goodput(df.drop(columns="t_sent_s")) != active_goodput(df.drop(columns="t_sent_s"))  # NaN


@pytest.mark.slow
def test_slo_edge_with_the_wdt_predictor_and_draft_features(pair_dirs, tmp_path):
    from wisv.serving.wdt import FEATURES, NO_FEATURES, WDTPredictor
    wdt = WDTPredictor([0.5] + [0.0] * (len(FEATURES) - 1), [0.5] + [0.0] * (len(NO_FEATURES) - 1)).save(
        tmp_path / "wdt.json")
    cache = tmp_path / "traces.json"
    runs = []
    for out in ("a", "b"):  # the second run replays the first's recorded drafts from the cache
        cfg = LoadConfig(sweep="2", slo_mix="2,50", prompts_per_ue=1, draft_len=4, max_new_tokens=16, tau_d_ms=2.0,
                         scheduler="slo", draft_features=True, wdt_predictor=str(wdt), trace_cache=str(cache),
                         timeout_s=120, out=str(tmp_path / out), target=str(pair_dirs.target),
                         drafter=str(pair_dirs.drafter), link=LinkSpec(None, None, 0.0))
        sweep = run(cfg)
        assert (sweep["errors"] == 0).all()
        runs.append(pd.read_csv(tmp_path / out / "n2" / "requests.csv"))
    assert cache.is_file() and len(runs[0]) == len(runs[1]) > 0
    assert json.loads(cache.read_text())["traces"][0]["features"][0][0][0] <= 1.0  # max probability of token 0

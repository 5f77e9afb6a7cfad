"""Scheduler comparison on the tightest class: loaded points, the halving check and the capacity ratio."""
import json

import pandas as pd
import pytest

from testbed.load.compare import compare, main, tightest_class

BASE = pd.DataFrame({"ues": [8, 16, 24, 32], "viol_20": [0, 0, 0.01, 0.05], "viol_50": [0.05, 0.08, 0.25, 0.4]})
CAND = pd.DataFrame({"ues": [8, 16, 24, 32], "viol_20": [0, 0, 0.02, 0.1], "viol_50": [0.04, 0.05, 0.1, 0.25]})


def test_tightest_class_is_the_fastest_target():
    assert tightest_class(BASE) == "viol_50"
    feas = BASE.assign(viol_feasible_50=0.1, viol_feasible_20=0.0)
    assert tightest_class(feas) == "viol_50" and tightest_class(feas, "viol_feasible_") == "viol_feasible_50"
    with pytest.raises(ValueError):
        tightest_class(pd.DataFrame({"ues": [1]}))


def test_compare_checks_every_loaded_point_and_capacity():
    res = compare(BASE, CAND, {"20": 32, "50": 16}, {"20": 32, "50": 24})
    assert res["class_tok_s"] == 50.0 and [p["ues"] for p in res["points"]] == [24, 32]
    assert [p["pass"] for p in res["points"]] == [True, False]  # 0.10 <= 0.125; 0.25 > 0.20
    assert not res["cut_pass"] and res["capacity_ratio"] == 1.5 and res["capacity_pass"]
    assert res["goodput"] == []  # no goodput column: nothing to report
    gp = compare(BASE.assign(goodput_tok_s=[100, 200, 300, 400]), CAND.assign(goodput_tok_s=[100, 220, 240, 200]),
                 {"50": 16}, {"50": 24})
    assert [(g["ues"], g["ratio"]) for g in gp["goodput"]] == [(8, 1.0), (16, 1.1), (24, 0.8), (32, 0.5)]
    assert gp["goodput_active"] == []  # runs without the column
    act = compare(BASE.assign(goodput_active_tok_s=[100, 200, float("nan"), 400]),
                  CAND.assign(goodput_active_tok_s=[50, 200, 240, 400]), {"50": 16}, {"50": 24})
    assert [(g["ues"], g["ratio"]) for g in act["goodput_active"]] == [(8, 0.5), (16, 1.0), (32, 1.0)]  # NaN dropped
    lenient = compare(BASE, CAND, {"50": 16}, {"50": 16}, cut=0.7)
    assert lenient["cut_pass"] and not lenient["capacity_pass"]
    calm = compare(BASE, CAND, {"50": 16}, {"50": 16}, over=0.5)
    assert calm["points"] == [] and not calm["cut_pass"]  # no loaded point: the claim is not shown
    fb, fc = BASE.assign(viol_feasible_50=[0, 0, 0.22, 0.3]), CAND.assign(viol_feasible_50=[0, 0, 0.05, 0.1])
    feas = compare(fb, fc, {"50": 16}, {"50": 32}, prefix="viol_feasible_")
    assert feas["cut_pass"] and feas["capacity_ratio"] == 2.0 and feas["rates"] == "viol_feasible_"


def test_cli_writes_compare_json(tmp_path, capsys):
    for name, sweep, cap, sched in (("b", BASE, 16, "fcfs"), ("c", CAND, 24, "slo")):
        d = tmp_path / name
        d.mkdir()
        sweep.to_csv(d / "sweep.csv", index=False)
        (d / "capacity.json").write_text(json.dumps({"epsilon": 0.1, "capacity": {"20": 32, "50": cap}}))
        (d / "config.json").write_text(json.dumps({"scheduler": sched}))
    res = main([str(tmp_path / "b"), str(tmp_path / "c")])
    assert json.loads((tmp_path / "c" / "compare.json").read_text())["capacity_cand"] == 24 == res["capacity_cand"]
    assert "N=32: 40.0% -> 25.0%" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not a finished"):
        main([str(tmp_path / "b"), str(tmp_path / "missing")])
    with pytest.raises(SystemExit, match="resummarize"):  # a run from before the feasible split
        main([str(tmp_path / "b"), str(tmp_path / "c"), "--feasible"])


def test_cli_pools_several_runs_per_side(tmp_path, capsys):
    def run(name, sweep, sched, repeats=None):
        d = tmp_path / name
        d.mkdir()
        sweep.to_csv(d / "sweep.csv", index=False)
        if repeats is not None:
            repeats.to_csv(d / "sweep_repeats.csv", index=False)
        (d / "capacity.json").write_text(json.dumps({"epsilon": 0.1, "capacity": {"20": 0, "50": 0}}))
        (d / "config.json").write_text(json.dumps({"scheduler": sched, "epsilon": 0.1}))
        return str(d)
    # the base's second run has two repeats (its sweep.csv is their mean and is not read)
    reps = pd.concat([BASE.assign(viol_50=[0.05, 0.12, 0.3, 0.5], repeat=0), BASE.assign(repeat=1)])
    b1, b2 = run("b1", BASE, "fcfs"), run("b2", BASE.assign(viol_50=-1.0), "fcfs", reps)
    c1, c2 = run("c1", CAND, "slo"), run("c2", CAND, "slo")
    res = main([f"{b1},{b2}", f"{c1},{c2}"])
    # base per N over its three repeats: 0.05, (0.08 + 0.12 + 0.08) / 3, (0.25 + 0.3 + 0.25) / 3, ...
    assert [p["ues"] for p in res["points"]] == [24, 32] and res["points"][0]["base"] == pytest.approx(0.8 / 3)
    assert res["capacity_base"] == 16 and res["capacity_cand"] == 24  # recomputed from the pooled means, not read
    assert res["baseline_config"]["pooled_repeats"] == 3 and res["candidate"] == f"{c1},{c2}"
    assert (tmp_path / "c1" / "compare.json").exists()

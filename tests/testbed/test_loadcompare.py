"""Scheduler comparison on the tightest class: loaded points, the halving check and the capacity ratio."""
import json

import pandas as pd
import pytest

from testbed.loadcompare import compare, main, tightest_class

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

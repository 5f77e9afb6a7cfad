"""A run's records -> a CSI trace: per-window means, link vs estimate, real links, and one-line errors."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from channel.csi import CSI
from channel.fromrun import read_run, run_to_trace
from channel.trace import main


def rounds(t, rtt, up, est_rtt, est_up, per=None):
    return pd.DataFrame({"t_link_s": t, "rtt_ms": rtt, "rate_up_mbps": up, "rate_down_mbps": up, "per": per,
                         "per_down": per, "est_rtt_ms": est_rtt, "est_rate_up_mbps": est_up,
                         "est_rate_down_mbps": est_up})


def test_windows_are_means_of_their_rounds():
    df = rounds([0.2, 0.7, 2.5], [10, 20, 60], [100, 100, 3], [12, 22, 64], [80, 90, 2.5])
    link = run_to_trace({"link_emulated": True}, df, "link", 1.0)
    assert link.t_s == (0.0, 2.0) and link.csis == (CSI(100, 100, 15), CSI(3, 3, 60))
    est = run_to_trace({"link_emulated": True}, df, "estimate", 1.0)
    assert est.csis == (CSI(85, 85, 17), CSI(2.5, 2.5, 64))


def test_real_link_starts_at_the_first_round_and_keeps_its_loss():
    df = rounds([1e9 + 5, 1e9 + 6.5], [None, None], [None, None], [30, 40], [10, 20], per=[0.01, 0.03])
    est = run_to_trace({"link_emulated": False}, df, "estimate", 1.0)
    assert est.t_s == (0.0, 1.0) and est.csis[1] == CSI(20, 20, 40, 0.03, 0.03)
    with pytest.raises(ValueError, match="run: --source link: the run was on a real link"):
        run_to_trace({"link_emulated": False}, df, "link", 1.0)


def test_unlimited_link_rate():
    df = rounds([0.0], [0.0], [None], [1.0], [500.0])
    assert math.isinf(run_to_trace({"link_emulated": True}, df, "link", 1.0).csis[0].rate_up_mbps)


def test_cli_from_run(tmp_path, capsys):
    (tmp_path / "fh").mkdir()
    rounds([0.5, 11.0], [5, 60], [200, 3], [6, 61], [150, 2.8]).to_csv(tmp_path / "fh" / "rounds.csv", index=False)
    (tmp_path / "config.json").write_text(json.dumps({"link_emulated": True}))
    out = tmp_path / "t.csv"
    assert main(["from-run", str(tmp_path), "--source", "link", "--out", str(out)]) == 0
    assert pd.read_csv(out)["rtt_ms"].tolist() == [5.0, 60.0]
    cfg, df = read_run(tmp_path)
    assert len(df) == 2 and cfg["link_emulated"]


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["from-run", str(tmp_path), "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{tmp_path}: no rounds" in err
    (tmp_path / "greedy").mkdir()
    pd.DataFrame({"prompt_id": ["a"], "round": [0]}).to_csv(tmp_path / "greedy" / "rounds.csv", index=False)
    assert main(["from-run", str(tmp_path), "--out", str(tmp_path / "x.csv")]) == 2
    assert "rounds.csv: line 1: no t_link_s column" in capsys.readouterr().err


def test_cli_source_link_on_a_real_link(tmp_path, capsys):
    rounds([1e9], [None], [None], [30], [10]).to_csv(tmp_path / "rounds.csv", index=False)  # a testbed.ue directory
    (tmp_path / "config.toml").write_text('link_json = "none"\n')
    assert main(["from-run", str(tmp_path), "--source", "link", "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the run was on a real link, which has no configured CSI" in err
    assert main(["from-run", str(tmp_path), "--out", str(tmp_path / "x.csv")]) == 0

"""scripts/bench/window_predict.py on hand-built rounds: the window's terms predict rounds that hold a fixed cost
the old terms leave out; bad input is one line and exit 2."""
import json

import pandas as pd
import pytest

from channel.csi import CSI
from protocols.accounting import wire_payload_bits
from scripts.bench.window_predict import main
from wisv.timing.roundtime import comm_s


def test_the_window_predicts_what_the_old_terms_miss(tmp_path, capsys):
    pb, rows = wire_payload_bits(64, 1), []
    for i in range(60):
        k, rtt = (6, 10)[i % 2], (6.0, 70.0)[(i // 10) % 2]
        link = comm_s("greedy", k, 0, CSI(120.0, 120.0, rtt), pb)
        t_draft, t_edge = 0.002 + 0.0012 * k, 0.007
        rows.append({"prompt_id": "p", "round": i, "drafted": k, "accepted": k - 2, "t_draft_s": t_draft,
                     "t_edge_s": t_edge, "t_round_s": t_draft + t_edge + link + 0.003, "rtt_ms": rtt,
                     "rate_up_mbps": 120.0, "rate_down_mbps": 120.0})
    (tmp_path / "run" / "greedy").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(tmp_path / "run" / "greedy" / "rounds.csv", index=False)
    assert main([str(tmp_path / "run"), "--out", str(tmp_path / "p.json")]) == 0
    got = json.loads((tmp_path / "p.json").read_text())["runs"][str(tmp_path / "run")]
    for state in got.values():
        assert abs(state["new_vs_measured"]) < 0.03 and state["old_vs_measured"] < -0.02  # the 3 ms + the 2 ms


def test_a_run_without_rounds_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path), "--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rounds.csv" in err and not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("bad", [["--protocol"]])
def test_argparse_errors_exit_2(bad):
    with pytest.raises(SystemExit) as e:
        main(bad)
    assert e.value.code == 2

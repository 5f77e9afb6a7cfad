"""scripts/bench/chooser_table.py: a chooser against the better baseline in finished runs, on hand-made run files."""
import json

import pandas as pd
import pytest

from scripts.bench.chooser_table import main, run_row


def fake_run(d, times: dict[str, list[float]], rtt_ms: float = 20.0):
    """A testbed.run directory as far as the table reads it: summary.csv, each protocol's outputs.jsonl, the link."""
    d.mkdir(parents=True)
    rows = [{"protocol": p, "latency_s": sum(t) / len(t)} for p, t in times.items()]
    pd.DataFrame(rows).to_csv(d / "summary.csv", index=False)
    for p, t in times.items():
        (d / p).mkdir()
        lines = [json.dumps({"prompt_id": f"q{i}", "t_e2e_s": x}) for i, x in enumerate(t)]
        (d / p / "outputs.jsonl").write_text("\n".join(lines) + "\n")
    (d / "config.toml").write_text(f"[link]\nrate_up_mbps = 100.0\nrtt_ms = {rtt_ms}\n")
    (d / "complete").touch()
    return d


def test_the_chooser_is_set_against_the_faster_baseline_prompt_by_prompt(tmp_path):
    d = fake_run(tmp_path / "r20", {"server": [2.0, 3.0, 4.0, 5.0], "greedy": [3.0, 4.0, 5.0, 6.0],
                                     "auto": [2.2, 3.3, 4.4, 5.5]})
    row = run_row(d)
    assert row["rtt_ms"] == 20.0 and row["prompts"] == 4 and row["auto_best_baseline"] == "server"
    assert row["auto_vs_best"] == pytest.approx(1.1) and row["auto_vs_server"] == pytest.approx(1.1)
    assert row["auto_vs_greedy"] == pytest.approx(15.4 / 18)
    assert row["auto_vs_server_ci_low"] == pytest.approx(1.1) == row["auto_vs_server_ci_high"]  # the same ratio each


def test_a_run_that_did_not_finish_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["--runs", str(tmp_path / "nothing"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no summary.csv" in err[0] and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out")]) == 2


def test_the_table_is_written_with_its_config(tmp_path):
    a = fake_run(tmp_path / "a", {"server": [1.0, 2.0], "greedy": [0.5, 1.0], "auto": [0.6, 1.1]}, 5.0)
    b = fake_run(tmp_path / "b", {"server": [1.0, 2.0], "greedy": [2.0, 4.0], "auto": [1.0, 2.0]}, 50.0)
    assert main(["--runs", str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    t = pd.read_csv(tmp_path / "out" / "table.csv")
    assert list(t["auto_best_baseline"]) == ["greedy", "server"] and (tmp_path / "out" / "config.toml").is_file()


def test_a_run_missing_a_protocols_outputs_or_a_readable_summary_is_refused(tmp_path):
    d = fake_run(tmp_path / "r", {"server": [1.0], "auto": [1.0]})
    (d / "auto" / "outputs.jsonl").unlink()
    with pytest.raises(ValueError, match="no auto/outputs.jsonl"):
        run_row(d)
    (d / "summary.csv").write_text("x\n")
    with pytest.raises(ValueError, match="no protocol and latency_s"):
        run_row(d)


def renamed(d, prefix: str):
    """The run's prompts given other ids (another slice's)."""
    for f in d.glob("*/outputs.jsonl"):
        f.write_text(f.read_text().replace('"q', f'"{prefix}'))
    return d


def test_pooled_runs_are_one_row_paired_over_all_their_prompts(tmp_path, capsys):
    """Two slices: server faster on one, greedy on the other; pooled, the better baseline is the faster in total,
    and each ratio is over the eight prompts together."""
    a = fake_run(tmp_path / "a", {"server": [2.0, 2.0, 2.0, 2.0], "greedy": [3.0, 3.0, 3.0, 3.0],
                                  "auto": [1.8, 1.8, 1.8, 1.8]})
    b = renamed(fake_run(tmp_path / "b", {"server": [3.0, 3.0, 3.0, 3.0], "greedy": [2.5, 2.5, 2.5, 2.5],
                                          "auto": [2.4, 2.4, 2.4, 2.4]}), "p")
    assert main(["--runs", str(a), str(b), "--pool", "--out", str(tmp_path / "out")]) == 0
    row = pd.read_csv(tmp_path / "out" / "table.csv").iloc[0]
    assert row["prompts"] == 8 and row["auto_best_baseline"] == "server" and row["latency_s_server"] == 2.5
    assert row["auto_vs_server"] == pytest.approx(16.8 / 20) and row["auto_vs_greedy"] == pytest.approx(16.8 / 22)
    with pytest.raises(ValueError, match="prompt q0 is in two runs"):  # one line, exit 2, from the command line
        main(["--runs", str(a), str(a), "--pool", "--out", str(tmp_path / "o2")])
    c = renamed(fake_run(tmp_path / "c", {"server": [1.0], "auto": [1.0]}), "c")
    with pytest.raises(ValueError, match="other protocols or another link"):
        main(["--runs", str(a), str(c), "--pool", "--out", str(tmp_path / "o3")])
    d = renamed(fake_run(tmp_path / "d", {"server": [1.0], "greedy": [1.0], "auto": [1.0]}, rtt_ms=50.0), "d")
    with pytest.raises(ValueError, match="other protocols or another link"):
        main(["--runs", str(a), str(d), "--pool", "--out", str(tmp_path / "o4")])

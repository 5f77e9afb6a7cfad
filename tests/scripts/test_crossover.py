"""The crossover map's pure parts: the winners of a cell read from the descriptions, and bad input refused."""
from __future__ import annotations

from scripts.bench.crossover import CrossoverConfig, cell_argv, main, offset_rows, simulate_argv, winners


def test_winners_lossless_leaves_out_on_device():
    lat = {"server": 0.50, "device": 0.10, "greedy": 0.30, "tree": 0.35}
    assert winners(lat) == ("greedy", "device")


def test_server_wins_when_speculation_is_slower():
    assert winners({"server": 0.2, "greedy": 0.3, "device": 0.4}) == ("server", "server")


def test_unknown_protocol_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["--protocols", "bogus", "--out", str(out)]) == 2
    assert "unknown protocol 'bogus'" in capsys.readouterr().err
    assert not out.exists()


def _times(**cols):
    import pandas as pd
    return pd.DataFrame(cols, index=[f"p{i}" for i in range(len(next(iter(cols.values()))))])


def test_paired_ratio_is_total_over_total():
    from scripts.bench.crossover import paired_ratio
    t = _times(server=[1.0, 2.0, 3.0, 4.0], auto=[1.1, 2.2, 3.3, 4.4])
    r, lo, hi = paired_ratio(t, "auto", "server")
    assert abs(r - 1.1) < 1e-9 and abs(lo - 1.1) < 1e-9 and abs(hi - 1.1) < 1e-9


def test_tie_only_when_the_interval_holds_one():
    from scripts.bench.crossover import tie
    noisy = _times(server=[1.0, 1.0, 1.0, 1.0, 1.0, 1.0], greedy=[0.8, 1.2, 0.9, 1.1, 0.85, 1.15])
    assert tie(noisy, "server", "greedy")
    apart = _times(server=[1.0, 1.0, 1.0, 1.0], greedy=[0.7, 0.72, 0.69, 0.71])
    assert not tie(apart, "server", "greedy")
    assert not tie(noisy, "server", "server")  # the same protocol agrees, it does not tie
    assert not tie(noisy, "server", "tree")  # a protocol the cell did not run


def test_auto_against_the_better_baseline_leaves_out_on_device_and_choosers():
    from scripts.bench.crossover import auto_vs_best
    t = _times(server=[1.0, 1.0], device=[0.1, 0.1], greedy=[0.8, 0.8], auto=[0.84, 0.84])
    out = auto_vs_best(t, ["server", "device", "greedy", "auto"])
    assert out["auto_best_baseline"] == "greedy"
    assert abs(out["auto_vs_best"] - 1.05) < 1e-9
    assert auto_vs_best(t, ["server", "greedy"]) == {}  # no chooser ran


def test_agreement_and_chooser_counts():
    import pandas as pd

    from scripts.bench.crossover import agreement, chooser_counts
    cells = pd.DataFrame({"measured_lossless": ["server", "greedy", "tree"], "predicted_lossless": ["server", "server",
                          "server"], "lossless_tie": [False, True, False], "measured_overall": ["device"] * 3,
                          "predicted_overall": ["device"] * 3, "overall_tie": [False] * 3,
                          "auto_vs_best": [1.0, 0.9, 1.2]})
    a = agreement(cells)
    assert a["agreement"] == {"lossless": 1, "overall": 3}
    assert a["agreement_or_tie"] == {"lossless": 2, "overall": 3}
    c = chooser_counts(cells, ["server", "auto"])["auto"]
    assert (c["within_goal"], c["at_most_gain"], c["max_ratio"]) == (2, 1, 1.2)


def test_a_missing_profile_is_one_line_exit_2_before_any_cell(tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["--local-profile", str(tmp_path / "none.json"), "--out", str(out)]) == 2
    assert "--local-profile: no such file" in capsys.readouterr().err
    assert not out.exists()


def test_the_prediction_is_a_simulate_command_testbed_simulate_parses(tmp_path):
    """Only the flags testbed.simulate takes: --pair, not the cells' --interleave (a run's flag)."""
    from testbed.sim.cli import parse_args
    cfg = CrossoverConfig(pair="smollm2", protocols=["server", "greedy", "auto"], interleave=True)
    argv = simulate_argv(cfg, str(tmp_path / "p.json"), tmp_path / "sim")
    assert argv[1:3] == ["-m", "testbed.simulate"] and "--interleave" not in argv
    sim = parse_args(argv[3:])
    assert (sim.methods, sim.pair, sim.local_profile) == (["server", "greedy"], "smollm2", str(tmp_path / "p.json"))


def test_a_cell_runs_the_tree_the_simulator_prices(tmp_path):
    """The run's tree drafts K nodes, as the simulator's tree traces do (not the run's default budget of 16)."""
    from pathlib import Path

    from testbed.live.orchestrate.run import parse_args
    cfg = CrossoverConfig(protocols=["server", "greedy", "auto", "tree"], draft_len=8)
    argv = cell_argv(cfg, 20.0, 50.0, Path("o/cell"))
    rc = parse_args(argv[3:])
    assert (rc.ue.draft_len, rc.ue.tree_budget, rc.interleave, rc.edge.head) == (8, 8, True, "none")
    assert (rc.link.rate_up_mbps, rc.link.rtt_ms, rc.protocols()) == (20.0, 50.0, ["server", "greedy", "auto", "tree"])


def test_an_offset_map_reads_the_prompts_after_the_first(tmp_path):
    """--prompt-offset 10: the cells and the prediction read OUT/prompts.jsonl, prompts 10-12 of the toy split, as
    testbed.run would build them from the split itself."""
    from testbed.live.orchestrate.run import parse_args as run_args
    from testbed.sim.cli import parse_args as sim_args
    from wisv.models.loader import builtin_paths, load_tokenizer
    from wisv.tasks.jsonl import write_jsonl
    from wisv.tasks.prompts import prompt_rows
    cfg = CrossoverConfig(out=str(tmp_path), prompts=3, prompt_offset=10, stream_every_tokens=64, run_part_tokens=1,
                          protocols=["server", "greedy", "auto"])
    rows = offset_rows(None, 10, 3)
    write_jsonl(tmp_path / "prompts.jsonl", rows)
    rc = run_args(cell_argv(cfg, 20.0, 5.0, tmp_path / "cell")[3:])
    sim = sim_args(simulate_argv(cfg, str(tmp_path / "p.json"), tmp_path / "sim")[3:])
    assert rc.prompts_file == sim.prompts_file == str(tmp_path / "prompts.jsonl")
    assert rc.ue.stream_every_tokens == sim.stream_every_tokens == 64
    assert rc.ue.run_part_tokens == 1
    tok = load_tokenizer(builtin_paths()[1], "tokenizer")
    split = prompt_rows(tok, "test", 13)[10:]
    got = prompt_rows(tok, "test", 3, rc.prompts_file)
    assert [(r["prompt_id"], r["prompt_ids"], r["answer"]) for r in got] == [
        (r["prompt_id"], r["prompt_ids"], r["answer"]) for r in split]


def test_an_offset_past_the_set_is_one_line_exit_2_before_anything(tmp_path, capsys):
    import pytest
    out = tmp_path / "x"
    with pytest.raises(ValueError, match="holds"):
        main(["--prompt-offset", "100000", "--prompts", "3", "--out", str(out)])
    assert not out.exists()


def test_a_prompts_file_is_read_from_its_offset(tmp_path):
    """--prompts-file FILE --prompt-offset 1 --prompts 2: FILE's 2nd and 3rd rows, as they are; a missing file or
    one too short is refused before anything is written."""
    import json

    import pytest
    src = tmp_path / "set.jsonl"
    src.write_text("".join(json.dumps({"prompt_id": f"q{i}", "prompt": f"Q{i}?", "answers": ["a"], "raw": True})
                           + "\n" for i in range(3)))
    assert [r["prompt_id"] for r in offset_rows("smollm2", 1, 2, str(src))] == ["q1", "q2"]
    cfg = CrossoverConfig(out=str(tmp_path / "o"), prompts_file=str(src))
    assert str(cell_argv(cfg, 1.0, 5.0, tmp_path / "c")).count(str(tmp_path / "o" / "prompts.jsonl")) == 1
    with pytest.raises(ValueError, match="no such file"):
        main(["--prompts-file", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "x")])
    with pytest.raises(ValueError, match="holds 3 prompts"):
        main(["--prompts-file", str(src), "--prompt-offset", "2", "--prompts", "2", "--out", str(tmp_path / "x")])
    assert not (tmp_path / "x").exists()

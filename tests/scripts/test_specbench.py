"""scripts.bench.specbench: the cells it plans, the complete ones it skips after a kill, the table it aggregates from
hand-built cells, and one tiny live run on the toy pair."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from scripts.bench import specbench as sb


def test_plan_runs_server_first_in_each_category() -> None:
    cfg = sb.BenchConfig(categories=["rag", "qa"], methods=["ngram", "greedy"])
    assert sb.plan(cfg) == [sb.Cell("server", "rag"), sb.Cell("ngram", "rag"), sb.Cell("greedy", "rag"),
                            sb.Cell("server", "qa"), sb.Cell("ngram", "qa"), sb.Cell("greedy", "qa")]


def test_todo_skips_complete_cells(tmp_path: Path) -> None:
    cells = sb.plan(sb.BenchConfig(categories=["rag"], methods=["server", "ngram"]))
    cells[0].dir(tmp_path).mkdir(parents=True)
    (cells[0].dir(tmp_path) / "complete").write_text("{}")
    cells[1].dir(tmp_path).mkdir(parents=True)  # interrupted: no marker
    assert sb.todo(cells, tmp_path) == [cells[1]]


def test_cell_argv_names_dataset_method_and_link(tmp_path: Path) -> None:
    cfg = sb.BenchConfig(pair="smollm2", prompts_per_category=3)
    argv = sb.cell_argv(sb.Cell("ngram", "mt-bench"), cfg, tmp_path)
    assert argv[argv.index("--drafter") + 1] == "ngram" and argv[argv.index("--prompts") + 1] == "3"
    assert argv[argv.index("--dataset") + 1].startswith("spec-bench:writing,roleplay")
    assert argv[argv.index("--rate-mbps") + 1] == "200.0" and argv[argv.index("--rtt-ms") + 1] == "5.0"


def _cell(ids: list[str], cat: str, secs: list[float], tokens: list[list[int]], accepted: list[int]):
    outs = pd.DataFrame({"prompt_id": ids, "tokens": tokens, "t_e2e_s": secs, "error": [None] * len(ids)})
    rounds = pd.DataFrame({"drafted": [4] * len(accepted), "accepted": accepted,
                           "uplink_bytes": [100] * len(accepted), "downlink_bytes": [50] * len(accepted)})
    prompts = pd.DataFrame({"prompt_id": ids, "category": [cat] * len(ids)})
    return outs, rounds, prompts


def test_aggregate_speedups_acceptance_and_agreement() -> None:
    a, b = [1, 2, 3, 4], [1, 2, 3, 5]
    data = {sb.Cell("server", "rag"): _cell(["r0", "r1"], "rag", [2.0, 2.0], [a, a], []),
            sb.Cell("ngram", "rag"): _cell(["r0", "r1"], "rag", [1.0, 0.5], [a, b], [1, 3]),
            sb.Cell("server", "qa"): _cell(["q0"], "qa", [4.0], [a], []),
            sb.Cell("ngram", "qa"): _cell(["q0"], "qa", [2.0], [a], [0])}
    table, rows, pos = sb.aggregate(data)
    rag, qa = "Retrieval-aug. Generation", "Question Answering"
    assert list(table.columns[:2]) == [qa, rag]  # Spec-Bench's task order
    assert table.loc["ngram", rag] == pytest.approx((4 + 8) / 2 / 2.0)  # mean tok/s 6 over server's 2
    assert table.loc["ngram", qa] == pytest.approx(2.0)
    assert table.loc["ngram", "#Mean Accepted Tokens"] == pytest.approx((2 + 4 + 1) / 3)
    assert table.loc["server", rag] == pytest.approx(1.0)
    row = rows.set_index(["method", "category"]).loc[("ngram", "rag")]
    assert row["matches_server"] == 0.5 and row["uplink_bytes_per_token"] == pytest.approx(200 / 8)
    ngram = pos[(pos["method"] == "ngram") & (pos["task"] == "all")].set_index("position")
    qa_only = pos[(pos["method"] == "ngram") & (pos["task"] == qa)].set_index("position")
    assert qa_only.loc[0, "rate"] == 0.0 and len(qa_only) == 4  # q0's one step accepted nothing
    assert ngram.loc[0, "rate"] == pytest.approx(2 / 3) and ngram.loc[2, "rate"] == pytest.approx(1 / 3)
    assert "| ngram | 2.00x | 3.00x | 2.33 |" in sb.task_markdown(table)


@pytest.mark.slow
def test_tiny_live_bench_resumes(tmp_path: Path) -> None:
    argv = ["--categories", "qa", "--prompts-per-category", "1", "--max-new-tokens", "8",
            "--methods", "server", "ngram", "--out", str(tmp_path)]
    sb.main(argv)
    tables = pd.read_csv(tmp_path / "table.csv", index_col="method")
    assert tables["link"].nunique() == 3  # the live link, the poor one and the LTE trace, simulated
    table = tables[tables["link"].str.endswith("(live)")]
    assert set(table.index) == {"server", "ngram"} and table.loc["server", "Overall"] == pytest.approx(1.0)
    assert tables.loc["server", "Overall"].tolist() == pytest.approx([1.0] * 3)
    cells = pd.read_csv(tmp_path / "cells.csv").set_index("method")
    assert (cells.loc["ngram", "matches_server"] == 1.0).all()  # lossless
    assert (tmp_path / "table.md").read_text().count("| ngram |") == 3 and (tmp_path / "specbench.png").is_file()
    stamp = (tmp_path / "cells" / "ngram" / "qa" / "complete").stat().st_mtime
    sb.main(argv)  # complete cells are not run again
    assert (tmp_path / "cells" / "ngram" / "qa" / "complete").stat().st_mtime == stamp


def test_simulated_links_retime_the_link_part_and_leave_on_device_alone() -> None:
    from channel.csi import CSI
    from scripts.bench.speclinks import SimLink, retimed, sim_links
    ids = ["a", "b"]
    outs = pd.DataFrame({"prompt_id": ids, "tokens": [[1, 2], [3]], "t_e2e_s": [1.0, 2.0], "error": [None, None]})
    prompts = pd.DataFrame({"prompt_id": ids, "prompt_ids": [[0] * 10, [0] * 20]})
    rounds = pd.DataFrame({"prompt_id": ["a", "a", "b"], "round": [0, 1, 0], "protocol": ["greedy"] * 3,
                           "uplink_bytes": [100] * 3, "downlink_bytes": [50] * 3, "exchanges": [1] * 3,
                           "t_arrival_s": [0.5, 1.0, 2.0], "rtt_ms": [5.0] * 3, "rate_up_mbps": [200.0] * 3,
                           "rate_down_mbps": [200.0] * 3, "per": [0.0] * 3, "per_down": [0.0] * 3})
    live = CSI(200.0, 200.0, 5.0)
    slow = retimed(outs, rounds, prompts, live, SimLink("45 ms", lambda _t: CSI(200.0, 200.0, 45.0)))
    assert slow["t_e2e_s"].tolist() == pytest.approx([1.0 + 3 * 0.04, 2.0 + 2 * 0.04])  # the OPEN and each round
    same = retimed(outs, rounds, prompts, live, SimLink("same", lambda _t: live))
    assert same["t_e2e_s"].tolist() == pytest.approx([1.0, 2.0])
    dev = retimed(outs, rounds.assign(protocol="device"), prompts, live, sim_links()["poor"])
    assert dev["t_e2e_s"].tolist() == [1.0, 2.0]  # nothing of on-device crosses the link
    assert sim_links()["lte"].csi_at(1e6).rtt_ms == 50.0  # the trace loops


def test_an_unknown_simulated_link_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        sb.main(["--sim-links", "mars", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "--sim-links" in err and not (tmp_path / "o").exists()

"""scripts.bench.capacity_live: server throughput over the makespan, UEs at SLO, ratios over server-only."""
from __future__ import annotations

import pandas as pd
import pytest

from scripts.bench import capacity_live as cl


def _outs(ue_tokens_secs: list[tuple[str, int, float]]) -> pd.DataFrame:
    return pd.DataFrame({"ue_id": [u for u, _, _ in ue_tokens_secs], "tokens": [[1] * k for _, k, _ in ue_tokens_secs],
                         "t_e2e_s": [s for _, _, s in ue_tokens_secs], "error": [None] * len(ue_tokens_secs)})


def test_row_uses_the_longest_ue_as_makespan_and_counts_ues_at_slo() -> None:
    outs = _outs([("ue0", 50, 0.5), ("ue0", 50, 0.5), ("ue1", 100, 2.0)])
    row = cl.capacity_row(2, "greedy", outs, pd.Series({"mean_itl_ms": 5.0, "p99_itl_ms": 9.0, "aal": 3.0}), 80.0)
    assert row["makespan_s"] == 2.0 and row["server_tok_s"] == pytest.approx(200 / 2.0)
    assert row["ue_tok_s_min"] == pytest.approx(50.0) and row["ue_tok_s_mean"] == pytest.approx(75.0)
    assert row["ues_at_slo"] == 1 and row["p99_itl_ms"] == 9.0


def test_failed_prompts_count_nothing_and_ratios_are_per_n() -> None:
    outs = _outs([("ue0", 10, 1.0), ("ue0", 99, 9.0)]).assign(error=[None, "timeout"])
    assert cl.ue_speeds(outs).loc["ue0", "tokens"] == 10
    t = pd.DataFrame([{"ues": 1, "protocol": "server", "server_tok_s": 10.0},
                      {"ues": 1, "protocol": "greedy", "server_tok_s": 5.0},
                      {"ues": 2, "protocol": "server", "server_tok_s": 20.0},
                      {"ues": 2, "protocol": "greedy", "server_tok_s": 30.0}])
    assert cl.with_ratios(t)["throughput_vs_server"].tolist() == pytest.approx([1.0, 0.5, 1.0, 1.5])


def test_argv_batches_n_sessions() -> None:
    argv = cl.run_argv(cl.CapacityConfig(prompts_per_ue=3), 4, "greedy", cl.Path("/tmp/x"))
    assert argv[argv.index("--ues") + 1] == "4" and argv[argv.index("--max-batch") + 1] == "4"
    assert "--batch-verify" in argv and argv[argv.index("--prompts") + 1] == "12"


@pytest.mark.parametrize("argv, says", [(["--protocols", "bogus"], "unknown protocol 'bogus'"),
                                        (["--ues", "0"], "--ues: must be >= 1, got 0"),
                                        (["--prompts-per-ue", "0"], "--prompts-per-ue: must be >= 1")])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, argv, says) -> None:
    with pytest.raises(SystemExit) as e:
        cl.main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and says in err
    assert not (tmp_path / "out").exists()

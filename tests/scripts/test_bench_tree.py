"""bench_tree: the latency model's arithmetic and a one-prompt run on the built-in pair."""
import pytest

from scripts.bench.tree import BenchConfig, latency_s, run


def test_latency_model_adds_compute_and_link_and_overlaps_proactive_drafting():
    rows = [{"t_draft_s": 0.01, "t_verify_s": 0.005, "t_proactive_s": 0.0, "up": 1000, "down": 250}]
    link = 0.02 + 8 * 1250 / 10e6
    assert latency_s(rows, 20.0, 10.0) == pytest.approx(0.01 + link + 0.005)
    rows[0]["t_proactive_s"] = 1.0  # longer than the link and the verification: it sets the round's time
    assert latency_s(rows, 20.0, 10.0) == pytest.approx(1.01)


@pytest.mark.slow
def test_one_prompt_run_is_lossless_and_reports_every_method():
    rep = run(BenchConfig(budgets=[4, 16], rtts_ms=[5.0], prompts=1, max_new_tokens=24, proactive=2, calib_prompts=1))
    assert set(rep["methods"]) == {"chain", "tree", "tree+proactive2", "chain+cal", "tree+cal", "chain+tokcal",
                                   "tree+tokcal"}
    assert set(rep["calibrations"]) == {"cal", "tokcal"} and rep["calibrations"]["tokcal"]["tokens"]
    for by_budget in rep["methods"].values():
        for s in by_budget.values():
            assert s["matches_target"] == 1.0 and s["tokens_per_verification"] >= 1
            assert s["latency_s"]["5.0"] > 0.005 * s["rounds"]
    assert rep["goal"]["checked"] and rep["goal"]["tree_over_chain_aal"] > 0
    assert set(rep["goal"]["over_same_scoring_chain"]) == {"tree", "tree+cal", "tree+tokcal"}

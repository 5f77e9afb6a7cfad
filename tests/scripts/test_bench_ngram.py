"""scripts/bench/ngram.py on the built-in toy pair: every method on every prompt, lossless, the summary's speed-ups and
mean accepted tokens from the records; a pass-cost file drives the window."""
from __future__ import annotations

import json

import pytest

from scripts.bench import ngram as bench_ngram


@pytest.fixture
def prompts(tmp_path):
    f = tmp_path / "p.jsonl"
    rows = [{"prompt_id": f"p{i}", "prompt": "one two three one two three one two", "raw": True, "kind": k}
            for i, k in enumerate(["summarization", "rag", "summarization"])]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def test_the_bench_runs_every_method_losslessly_and_summarises_the_records(tmp_path, prompts):
    costs = tmp_path / "rows.json"
    costs.write_text(json.dumps({"config": {"prefix": 100}, "target_pad_plan": {"3": 4},
                                 "target_ms_by_rows": {"1": 1.0, "2": 1.9, "3": 2.8, "4": 2.0}}))
    out = tmp_path / "b.json"
    doc = bench_ngram.main(["--pair", "toy", "--prompts-file", str(prompts), "--prompts", "1", "--max-new-tokens",
                            "12", "--peer-tokens", "3", "--pass-rows", str(costs), "--out", str(out)])
    assert json.loads(out.read_text())["config"]["prompts"] == 1
    methods = {"target-generate", "target-ours", "hf-lookup-3", "ngram", "ngram-window"}
    assert {r["method"] for r in doc["records"]} == methods and len(doc["records"]) == 2 * len(methods)
    assert all(r["matches_target"] for r in doc["records"])
    s = doc["summary"]
    assert set(s) == {"rag", "summarization", "overall"} and set(s["overall"]) == methods
    ng = [r for r in doc["records"] if r["method"] == "ngram"]
    assert s["overall"]["ngram"]["mean_acceptance_length"] == pytest.approx(
        (sum(r["accepted"] for r in ng) + sum(r["rounds"] for r in ng)) / sum(r["rounds"] for r in ng))
    assert s["overall"]["target-ours"]["speedup_vs_target-ours"] == pytest.approx(1.0)
    assert s["overall"]["target-ours"]["modelled_speedup_vs_target-ours"] == pytest.approx(1.0)
    assert "modelled_ms" in ng[0] and "modelled_ms" not in doc["records"][0]  # generate: passes unknown


def test_one_source_of_prompts_is_needed():
    with pytest.raises(ValueError, match="one of --prompts-file and --dataset"):
        bench_ngram.parse_args([])


def test_modelled_ms_prices_each_pass_by_its_padded_rows():
    costs = {1: 10.0, 2: 19.0, 3: 28.0, 4: 20.0}
    assert bench_ngram.modelled_ms([0, 0, 0], costs, None) == 30.0  # the target alone: a row a token
    assert bench_ngram.modelled_ms([2, 0], costs, {3: 4}) == 30.0  # 3 rows padded to 4 (20 ms), then one row
    assert bench_ngram.modelled_ms([7], costs, None) == pytest.approx(40.0)  # past the table: the largest's rate

"""testbed.run --dataset: the second turn of a two-turn question is built on the target's greedy first answer (each
reference computed once), prompts the target cannot hold are refused before any work, and a live run keeps the turn
and groups by task and turn."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from testbed.live.orchestrate import prompts as run_prompts
from testbed.live.orchestrate.run import parse_args, run
from wisv.models.loader import load_model
from wisv.tasks.evaluate import greedy_reference
from wisv.tasks.prompts import answer_text, dataset_rows, second_turn_rows

NEW = 6  # --max-new-tokens


def _args(pair_dirs, *more: str) -> list[str]:
    return ["--drafter", str(pair_dirs.drafter), "--target", str(pair_dirs.target), "--max-new-tokens", str(NEW),
            *more]


def test_second_turns_are_built_on_the_targets_first_answer(pair_dirs, tmp_path, monkeypatch):
    computed: list[str] = []
    local = run_prompts._local_references
    monkeypatch.setattr(run_prompts, "_local_references",
                        lambda cfg, p: computed.extend(p["prompt_id"]) or local(cfg, p))
    cfg = parse_args(_args(pair_dirs, "--dataset", "mt-bench", "--prompts", "2"))
    prompts, tok = run_prompts.load_prompts(cfg, tmp_path / "prompts.jsonl")
    ids = ["spec-bench-81", "spec-bench-81-t2", "spec-bench-82", "spec-bench-82-t2"]
    assert prompts["prompt_id"].tolist() == ids and prompts["turn"].tolist() == [1, 2] * 2
    target = load_model(pair_dirs.target, "target", "cpu", torch.float32)
    firsts = dataset_rows(tok, "mt-bench", 2)
    answers = {r["prompt_id"]: answer_text(tok, greedy_reference(target, r["prompt_ids"], NEW)) for r in firsts}
    assert prompts["prompt_ids"].tolist() == [r["prompt_ids"] for r in second_turn_rows(tok, firsts, answers)]
    saved = [json.loads(x) for x in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert [(r["category"], r["turn"], r["question_id"]) for r in saved][:2] == [("writing", 1, "spec-bench-81"),
                                                                                ("writing", 2, "spec-bench-81")]
    refs = run_prompts.reference_outputs(cfg, prompts, tmp_path / "reference.jsonl", tok)
    assert computed == [ids[0], ids[2], ids[1], ids[3]]  # the first turns' references were not computed twice
    assert set(refs) == set(prompts["prompt_id"])


def test_first_turn_only_runs_no_second_turn(pair_dirs, tmp_path):
    cfg = parse_args(_args(pair_dirs, "--dataset", "mt-bench", "--prompts", "2", "--first-turn-only"))
    prompts, _ = run_prompts.load_prompts(cfg, tmp_path / "prompts.jsonl")
    assert prompts["prompt_id"].tolist() == ["spec-bench-81", "spec-bench-82"] and "turns" not in prompts


def test_prompts_the_target_cannot_hold_are_refused_before_any_reference(pair_dirs, tmp_path):
    cfg = parse_args(_args(pair_dirs, "--dataset", "spec-bench:rag", "--prompts", "3"))  # ~2,000 tokens; context 512
    with pytest.raises(ValueError, match=r"^3 of 3 prompts do not fit the target; the longest, spec-bench-48\d: "
                                         r"prompt \d+ \+ max_new_tokens 6 = \d+ tokens > the target's context 512"):
        run_prompts.load_prompts(cfg, tmp_path / "prompts.jsonl")
    assert not (tmp_path / "prompts.jsonl").exists()


@pytest.mark.slow
def test_a_live_two_turn_run_is_lossless_and_grouped_by_task_and_turn(pair_dirs, tmp_path):
    out = tmp_path / "run"
    [s] = run(parse_args(_args(pair_dirs, "--dataset", "mt-bench", "--prompts", "1", "--protocol", "greedy",
                               "--out", str(out), "--head", "none")))
    assert (s["prompts"], s["errors"], s["matches_target"]) == (2, 0, 1.0)
    groups = pd.read_csv(out / "summary_by_group.csv")
    assert dict(zip(groups["group"], groups["prompts"])) == {"Multi-turn Conversation": 2, "turn 1": 1, "turn 2": 1}
    outputs = pd.read_json(out / "greedy" / "outputs.jsonl", lines=True, dtype={"prompt_id": str})
    assert sorted(outputs["prompt_id"]) == ["spec-bench-81", "spec-bench-81-t2"]
    assert Path(out / "complete").exists()


def test_a_pairs_default_prompts_give_way_to_a_dataset(monkeypatch):
    import wisv.pairs
    from testbed.live.orchestrate.run import with_pair
    monkeypatch.setattr(wisv.pairs, "resolve_pair", lambda name: SimpleNamespace(drafter=Path("d"), target=Path("t")))
    monkeypatch.setattr(wisv.pairs, "default_prompts_file", lambda pair, split: "pool.jsonl")
    assert with_pair(parse_args(["--pair", "toy", "--dataset", "gsm8k"])).prompts_file is None
    assert with_pair(parse_args(["--pair", "toy"])).prompts_file == "pool.jsonl"


def test_numeric_looking_prompt_ids_stay_text_when_outputs_are_collected(tmp_path):
    from testbed.live.orchestrate.gather import collect
    (tmp_path / "ue0").mkdir()
    (tmp_path / "ue0" / "outputs.jsonl").write_text('{"prompt_id": "7", "tokens": [1, 2], "t_e2e_s": 0.5}\n')
    prompts = pd.DataFrame({"prompt_id": ["7"], "prompt_ids": [[3, 4]], "answer": [None]})  # a custom row's own id
    summary, outputs = collect("greedy", tmp_path, pd.DataFrame(), prompts, None, {"7": [1, 2]})
    assert outputs["prompt_id"].tolist() == ["7"] and summary["matches_target"] == 1.0

"""The labeling pipeline reads a named dataset (--dataset): collect takes its first questions, evaluate only the ones
collect did not take (held out means held out), and a bad name is one line before any model loads."""
from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from labeling.config import EvalConfig
from labeling.evaluate import held_out_rows
from labeling.store import EPISODES, stage_path
from tests.testbed.conftest import TOKENIZER_DIR
from wisv.tasks.jsonl import write_jsonl
from wisv.tasks.prompts import prompt_rows


@pytest.fixture
def tok():
    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


def _collected(run_dir: Path, ids: list[str]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(stage_path(run_dir, EPISODES), [{"prompt_id": i, "episode": e} for e, i in enumerate(ids)])


def test_evaluate_leaves_out_what_collect_took(tmp_path: Path, tok) -> None:
    spec = "spec-bench:qa"
    calib = prompt_rows(tok, "calib", 3, dataset=spec, first_turn_only=True)
    _collected(tmp_path, [r["prompt_id"] for r in calib])
    cfg = EvalConfig(run_dir=str(tmp_path), dataset=spec, prompts=4)
    test = held_out_rows(cfg, tok, {"dataset": spec})
    assert len(test) == 4 and not {r["prompt_id"] for r in test} & {r["prompt_id"] for r in calib}
    assert test[0]["prompt_id"] == prompt_rows(tok, "test", 4, dataset=spec)[3]["prompt_id"]  # the next one
    other = held_out_rows(cfg, tok, {"dataset": None})  # collect read another set: nothing to leave out
    assert [r["prompt_id"] for r in other] == [r["prompt_id"] for r in prompt_rows(tok, "test", 4, dataset=spec)]


def test_a_set_collect_took_whole_has_nothing_held_out(tmp_path: Path, tok) -> None:
    spec = "spec-bench:qa"
    _collected(tmp_path, [r["prompt_id"] for r in prompt_rows(tok, "calib", None, dataset=spec)])
    with pytest.raises(ValueError, match="none is held out"):
        held_out_rows(EvalConfig(run_dir=str(tmp_path), dataset=spec), tok, {"dataset": spec})


@pytest.mark.parametrize("stage", ["collect", "evaluate"])
def test_bad_dataset_is_one_line_exit_2_and_nothing_written(tmp_path: Path, capsys, stage: str) -> None:
    from labeling.__main__ import main
    run_dir = tmp_path / "run"
    rc = main([stage, "--dataset", "spec-bench:nope", "--run-dir", str(run_dir)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "unknown category 'nope'" in err
    assert not run_dir.exists()

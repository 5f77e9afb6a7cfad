"""testbed.simulate --dataset: a named set's first turns with answers feed the traces, named by the set and its file's
content; a set without answers, or one beside --prompts-file, is one line and exit 2 before anything is written."""
from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from testbed.sim.cli import main
from testbed.sim.traces import TraceKey, trace_prompts
from tests.testbed.conftest import TOKENIZER_DIR
from wisv.tasks.datasets import load_dataset


def test_a_dataset_names_its_traces_and_feeds_its_first_turns():
    plain, gsm = TraceKey("pair", "greedy", 4, 2, 16), TraceKey("pair", "greedy", 4, 2, 16, dataset="gsm8k")
    assert len({plain.filename(), gsm.filename(), TraceKey("pair", "greedy", 4, 2, 16,
                                                           dataset="spec-bench:math_reasoning").filename()}) == 3
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    rows = trace_prompts(tok, TraceKey("pair", "greedy", 4, 3, 16, dataset="spec-bench:math_reasoning"))
    refs = [r.references[0] for r in load_dataset("spec-bench:math_reasoning")[:3]]
    assert [r["answer"] for r in rows] == refs and {r["turn"] for r in rows} == {1}


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "spec-bench:qa"], "--dataset spec-bench:qa: every row needs an answer"),
    (["--dataset", "mt-bench"], "--dataset mt-bench: every row needs an answer"),
    (["--dataset", "gsm8k", "--prompts-file", "p.jsonl"], "both name the prompts; give one"),
    (["--dataset", "gsm8k:qa"], "--dataset gsm8k:qa: only spec-bench takes categories")])
def test_bad_datasets_are_one_line_before_anything_is_written(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()

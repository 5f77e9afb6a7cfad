"""The simulator's and the load test's traces use the named pair's own prompt set and checker (the SmolLM2 pair's
long-form test pool, wisv.tasks.qa's checker), and the trace cache never hands one prompt set's traces to another."""
from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

import wisv.pairs
from testbed.load.cli import LoadConfig
from testbed.sim.calibrate import CalibrateConfig
from testbed.sim.cli import SimConfig
from testbed.sim.traces import TraceKey, trace_prompts
from tests.testbed.conftest import TOKENIZER_DIR
from wisv.pairs import PairPaths, apply_pair, default_prompts_file
from wisv.tasks import toydata
from wisv.tasks.pools import load_pool, pool_path
from wisv.tasks.qa import check_answer


@pytest.fixture
def built(monkeypatch, tmp_path):
    """Every named pair resolves as if built (no weights are read)."""
    monkeypatch.setattr(wisv.pairs, "resolve_pair", lambda name: PairPaths(name, tmp_path / "d", tmp_path / "t"))


@pytest.mark.parametrize("cls", [SimConfig, LoadConfig, CalibrateConfig])
def test_a_named_pair_brings_its_prompt_set(built, cls):
    assert apply_pair(cls(pair="smollm2")).prompts_file == default_prompts_file("smollm2") == str(pool_path("test"))
    assert default_prompts_file("smollm2", "calib") == str(pool_path("calib"))  # labeling collect's
    assert apply_pair(cls(pair="toy")).prompts_file is None  # the toy task's built-in test split
    assert apply_pair(cls(pair="smollm2", prompts_file="mine.jsonl")).prompts_file == "mine.jsonl"


def test_the_trace_prompts_are_the_pairs_rows_and_answers():
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    rows = trace_prompts(tok, TraceKey("p", "greedy", 4, 3, 16, prompts_file=default_prompts_file("smollm2")))
    shipped = load_pool("test", 3)
    assert [r["prompt_id"] for r in rows] == [q["prompt_id"] for q in shipped]
    assert [r["prompt_ids"] for r in rows] == [tok(q["prompt"]).input_ids for q in shipped]  # raw: no toy format
    assert all(check_answer(f"The answer is {q['answers'][0]}.", r["answer"]) for r, q in zip(rows, shipped))
    assert not check_answer("#### 7", rows[0]["answer"])  # the QA checker, not the toy one
    toy = trace_prompts(tok, TraceKey("p", "greedy", 4, 3, 16))
    assert [r["prompt_id"] for r in toy] == [p.pid for p in toydata.load_split("test", 3)]
    assert check_answer(f"#### {toy[0]['answer']}", toy[0]["answer"])


def test_the_cache_key_tells_prompt_sets_apart(tmp_path):
    toy = TraceKey("pair", "greedy", 4, 2, 16)  # its name is the one before the field (test_chat_template.py)
    qa_key = TraceKey("pair", "greedy", 4, 2, 16, prompts_file=default_prompts_file("smollm2"))
    assert qa_key.filename() != toy.filename()
    a, b = tmp_path / "a" / "set.jsonl", tmp_path / "b" / "set.jsonl"
    for path, text in ((a, '{"prompt": "x"}\n'), (b, '{"prompt": "y"}\n')):
        path.parent.mkdir()
        path.write_text(text)
    names = {TraceKey("pair", "greedy", 4, 2, 16, prompts_file=str(p)).filename() for p in (a, b)}
    assert len(names) == 2  # same name, other content: another trace
    b.write_text(a.read_text())
    assert TraceKey("pair", "greedy", 4, 2, 16, prompts_file=str(b)).filename() in names  # where it lies: no matter


@pytest.mark.parametrize("argv", [["--draft-lens", "4", "--methods", "greedy"], ["calibrate", "--no-link"]])
def test_simulate_names_a_missing_prompts_file(argv, tmp_path, capsys):
    from testbed.sim.cli import main
    with pytest.raises(SystemExit) as e:
        main(argv + ["--prompts-file", str(tmp_path / "nope.jsonl"), "--prompts", "1", "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    assert f"error: prompts file {tmp_path / 'nope.jsonl'}: no such file" in capsys.readouterr().err


def test_calibration_times_its_own_pool_never_the_test_prompts(built, tmp_path):
    """The profile a simulation or a crossover map prices with is fitted on the calibration pool: the built-in calib
    split, or a named pair's calib pool; neither shares a prompt with the test prompts the runs measure."""
    from testbed.sim.calibrate import CALIB_SPLIT, calib_rows, write_link_prompts
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    cfg = CalibrateConfig(out=str(tmp_path / "local_profile.json"))
    calib = calib_rows(tok, cfg, 20)
    test = {tuple(p) for p in (r["prompt_ids"] for r in trace_prompts(tok, TraceKey("p", "greedy", 4, 500, 16)))}
    assert [r["prompt_id"] for r in calib] == [p.pid for p in toydata.load_split(CALIB_SPLIT, 20)]
    assert not {tuple(r["prompt_ids"]) for r in calib} & test
    named = apply_pair(CalibrateConfig(pair="smollm2"), split=CALIB_SPLIT)
    assert named.prompts_file == str(pool_path("calib")) != default_prompts_file("smollm2")
    assert not {q["prompt_id"] for q in load_pool("calib")} & {q["prompt_id"] for q in load_pool("test")}
    path = write_link_prompts(tok, cfg)  # the short link run's prompts: the same pool, as token ids
    lines = [json.loads(line) for line in open(path)]
    assert [r["prompt_ids"] for r in lines] == [r["prompt_ids"] for r in calib[:cfg.link_prompts]]

"""The drafter's distillation: its sources (never a held-out pool), its prompt-by-prompt generation cache, and its
resumable training (a paused run goes on to the weights of an uninterrupted one), on a tiny random Llama."""
from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from scripts.train import distill_cache
from scripts.train.distill_sources import HELD_OUT, check_held_out, seen_rows, sources
from scripts.train.distill_state import load_state, milestones
from scripts.train.smollm2_drafter import (
    DistillConfig,
    epoch_batches,
    label_vocab,
    lr_at,
    next_token_labels,
    parse_args,
    train,
)
from tests.tiny_pair import make_pair
from wisv.pairs.drafter import early_exit
from wisv.tasks import suite
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.pools import normalise_prompt


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Per-epoch checkpoints go to the cache directory: a temporary one here."""
    monkeypatch.setenv("WISV_CACHE_DIR", str(tmp_path / "cache"))


def test_sources_read_the_suite_distill_pools_and_no_held_out_prompt():
    srcs = {s.name: s for s in sources(DistillConfig())}
    assert list(srcs) == ["generic", "longform", "suite", "free"]
    assert len(srcs["suite"].prompts) == len(suite.load_suite("distill")) > 2000
    assert len(srcs["free"].prompts) == len(suite.load_suite("distill", "free")) > 300
    ours = {normalise_prompt(p) for s in srcs.values() for p in s.prompts}
    for name, path in HELD_OUT.items():
        assert not ours & {normalise_prompt(r["prompt"]) for r in read_jsonl(path)}, name
    small = sources(DistillConfig(prompts=3, pool_rows=0, suite_rows=5, free_rows=2))
    assert [(s.name, len(s.prompts)) for s in small] == [("generic", 3), ("suite", 5), ("free", 2)]


def test_a_held_out_or_unseen_prompt_is_refused():
    test_q = suite.load_suite("test")[0]
    with pytest.raises(ValueError, match="held-out"):
        check_held_out(["Explain gravity.", test_q["prompt"].upper()])
    unseen = next(r for r in suite.load_suite("test") if suite.role(r["kind"]) == "unseen")
    with pytest.raises(ValueError, match=unseen["kind"]):
        seen_rows([unseen])


def test_the_generation_cache_skips_done_prompts_after_a_kill(tmp_path):
    prompts = [f"p{i}" for i in range(7)]
    settings = {"target": "t", "max_new_tokens": 4, "top_k": 2}
    path = distill_cache.cache_path(tmp_path, "src", settings)
    calls = []

    def gen(ps):
        calls.append(list(ps))
        if len(calls) == 2 and killed:
            raise KeyboardInterrupt  # killed while generating the second batch
        return [[1, [0, len(p)], [], []] for p in ps]

    killed = True
    with pytest.raises(KeyboardInterrupt):
        distill_cache.cached_generate(prompts, path, settings, 3, gen)
    with path.open("a") as f:
        f.write('{"key": "torn')  # a line cut short by the kill
    killed, calls[:] = False, []
    rows = distill_cache.cached_generate(prompts, path, settings, 3, gen)
    assert calls == [["p3", "p4", "p5"], ["p6"]]  # the first batch came from the cache
    assert rows == [[1, [0, 2], [], []]] * 7
    calls.clear()
    assert distill_cache.cached_generate(prompts, path, settings, 3, gen) == rows and calls == []
    other = dict(settings, max_new_tokens=8)
    assert distill_cache.cache_path(tmp_path, "src", other) != path


def _rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        seq, plen = [rng.randrange(1, 60) for _ in range(rng.randrange(6, 11))], 3
        gen = len(seq) - plen
        rows.append({"ids": seq, "labels": next_token_labels(seq, plen), "prompt_len": plen,
                     "top_ids": [rng.sample(range(1, 60), 3) for _ in range(gen)],
                     "top_logits": [[2.0, 1.0, 0.0] for _ in range(gen)]})
    return rows


TINY = DistillConfig(layers=[0, 1], train_layers=[0, 1], epochs=2, batch=2, warmup_steps=2, lr=1e-2,
                     milestone_tokens=[10, 30], checkpoint_steps=100, checkpoint_s=1e9)


def _drafter():
    _, target = make_pair()
    return early_exit(target, [0, 1])


def test_a_paused_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path, capsys):
    rows = _rows(8)
    vocab = label_vocab(rows, top_k=True)
    whole = _drafter()
    start = {k: v.clone() for k, v in whole.state_dict().items()}
    res = train(whole, rows, vocab, TINY, tmp_path / "whole")
    assert res["step"] == res["total"] == 8 and len(res["epoch_losses"]) == 2

    first = train(_drafter(), rows, vocab, dataclasses.replace(TINY, stop_after_steps=3), tmp_path / "cut")
    assert first["step"] == 3 and first["epoch_losses"] == []
    assert load_state(tmp_path / "cut")["step"] == 3
    resumed = _drafter()
    second = train(resumed, rows, vocab, TINY, tmp_path / "cut")
    assert "resumed" in capsys.readouterr().out and second["step"] == 8 and second["tokens"] == res["tokens"]
    got, want = resumed.state_dict(), whole.state_dict()
    assert any(not torch.equal(want[k], start[k]) for k in want)  # training moved the weights
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert second["epoch_losses"] == pytest.approx(res["epoch_losses"], abs=0)
    kept = [[(t, s) for t, s, _ in milestones(tmp_path / d)] for d in ("cut", "whole")]
    assert kept[0] == kept[1]
    assert milestones(tmp_path / "whole")[-1][:2] == (res["tokens"], 8)


def test_a_run_directory_refuses_other_settings_unless_fresh(tmp_path):
    rows = _rows(4)
    vocab = label_vocab(rows, top_k=True)
    train(_drafter(), rows, vocab, dataclasses.replace(TINY, stop_after_steps=1), tmp_path)
    with pytest.raises(SystemExit, match="lr"):
        train(_drafter(), rows, vocab, dataclasses.replace(TINY, lr=5e-3), tmp_path)
    other = _rows(4, seed=1)
    with pytest.raises(SystemExit, match="data"):  # same settings, other generations
        train(_drafter(), other, label_vocab(other, top_k=True), TINY, tmp_path)
    res = train(_drafter(), rows, vocab, dataclasses.replace(TINY, lr=5e-3, fresh=True, stop_after_steps=1), tmp_path)
    assert res["step"] == 1  # started over
    res = train(_drafter(), rows, vocab, dataclasses.replace(TINY, lr=5e-3, max_train_s=1e6), tmp_path)
    assert res["step"] == 4  # a budget is not a run-defining setting


def test_the_schedule_is_a_function_of_the_step():
    lengths = [5, 9, 3, 7, 7, 2, 8]
    b = epoch_batches(lengths, 3, 1234, 0)
    assert sorted(i for x in b for i in x) == list(range(7)) and b == epoch_batches(lengths, 3, 1234, 0)
    assert b != epoch_batches(lengths, 3, 1234, 1) or b != epoch_batches(lengths, 3, 1234, 2)
    cfg = DistillConfig(lr=1.0, warmup_steps=4)
    assert lr_at(0, 100, cfg) == pytest.approx(0.25) and lr_at(3, 100, cfg) < 1.0
    assert lr_at(50, 100, cfg) == pytest.approx(0.5) and lr_at(99, 100, cfg) < 0.01


def test_flags():
    cfg = parse_args(["--suite-rows", "100", "--free-rows", "-1", "--prompts", "0", "--milestone-tokens", "5,50",
                      "--run-dir", "r", "--fresh"])
    assert (cfg.suite_rows, cfg.free_rows, cfg.prompts, cfg.milestone_tokens, cfg.run_dir, cfg.fresh) == (
        100, -1, 0, [5, 50], "r", True)
    with pytest.raises(SystemExit):
        parse_args(["--suite-rows", "-2"])

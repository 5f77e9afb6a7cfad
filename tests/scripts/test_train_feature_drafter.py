"""scripts/train/feature_drafter.py on the built-in toy pair: a tiny run, resumed, stopped by --max-train-s and
evaluated."""
from __future__ import annotations

import json

import pytest
import torch

from scripts.train.feature_drafter import FeatureDrafterConfig, run
from wisv.decoding.featdraft import load_head


@pytest.mark.slow
def test_a_tiny_run_trains_resumes_stops_on_time_and_compares_aal(tmp_path, capsys):
    torch.set_num_threads(1)
    base = {"out": str(tmp_path / "h"), "prompts": 3, "max_new_tokens": 24, "window": 16, "batch": 3,
            "save_every": 2, "eval_prompts": 1, "draft_len": 4}
    first = run(FeatureDrafterConfig(**base, steps=4))
    assert first["last"]["step"] == 4 and (tmp_path / "h" / "pool.pt").is_file()
    again = run(FeatureDrafterConfig(**base, steps=6))
    assert "resumed at step 4" in capsys.readouterr().out and again["last"]["step"] == 6
    ev = json.loads((tmp_path / "h" / "eval.json").read_text())["eval"]
    assert ev["feature_head"]["identical_to_target"] == 1.0 and ev["drafter"]["identical_to_target"] == 1.0
    assert ev["feature_head"]["rounds"] > 0 and ev["k"] == 4
    assert load_head(tmp_path / "h").cfg.window == 16
    done = run(FeatureDrafterConfig(**base | {"eval_prompts": 0}, steps=6))  # nothing left: it only saves the head
    meta = json.loads((tmp_path / "h" / "head.json").read_text())["meta"]
    assert done["last"]["step"] == 6 and meta["last"]["step"] == 6 and meta["pool_positions"] > 0
    assert [(r["from_step"], r["to_step"], r["steps"]) for r in meta["runs"]] == [(0, 4, 4), (4, 6, 6)]
    assert "runs" not in meta["last"]
    early = run(FeatureDrafterConfig(**base | {"out": str(tmp_path / "e"), "eval_prompts": 0}, steps=8, stop_step=3))
    assert early["last"]["step"] == 3 and torch.load(tmp_path / "e" / "ckpt.pt", weights_only=True)["step"] == 3
    capped = run(FeatureDrafterConfig(**base | {"out": str(tmp_path / "c"), "eval_prompts": 0}, steps=1000,
                                      max_train_s=1e-3))
    assert capped["last"]["step"] == 1 and torch.load(tmp_path / "c" / "ckpt.pt", weights_only=True)["step"] == 1


@pytest.mark.slow
def test_the_loss_falls_on_a_fixed_pool(tmp_path):
    """Twenty steps on three generations lower the feature regression and the token CE (the head learns)."""
    from scripts.train.feature_drafter import batch_of, build_pool, loss_of
    from wisv.decoding.featdraft import FeatureHead
    from wisv.models.loader import load_pair
    from wisv.tasks.prompts import prompt_rows
    _, target, tok = load_pair()
    pool = build_pool(target, prompt_rows(tok, "train", 3), 24)
    torch.manual_seed(0)
    head = FeatureHead.from_target(target, window=16)
    opt = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=1e-3)
    fixed = batch_of(pool, [0, 1, 2], 16, torch.Generator().manual_seed(0))
    before = loss_of(head, fixed, 0.0, torch.Generator().manual_seed(0))[1]
    for step in range(20):
        g = torch.Generator().manual_seed(step)
        reg, m = loss_of(head, batch_of(pool, [0, 1, 2], 16, g), 0.05, g)
        opt.zero_grad()
        (reg + 0.1 * m["_ce"]).backward()
        opt.step()
    after = loss_of(head, fixed, 0.0, torch.Generator().manual_seed(0))[1]
    assert after["reg"] < 0.8 * before["reg"] and after["ce"] < before["ce"]


def test_unroll_scores_the_head_on_its_own_features():
    """--unroll: the second pass reads the first pass's predictions, so the loss differs and reports acc_own."""
    from scripts.train.feature_drafter import loss_of
    from tests.tiny_pair import make_pair
    from wisv.decoding.featdraft import FeatureHead
    _, target = make_pair(vocab=61, eos=60)
    torch.manual_seed(0)
    head = FeatureHead.from_target(target, window=8)
    f = torch.randn(2, 6, 32)  # [B, T, d]
    batch = (torch.cat([torch.zeros(2, 1, 32), f[:, :-1]], 1), torch.randint(0, 61, (2, 6)), f,
             torch.randint(0, 61, (2, 6)))
    plain, m = loss_of(head, batch, 0.0, torch.Generator().manual_seed(0))
    both, mu = loss_of(head, batch, 0.0, torch.Generator().manual_seed(0), unroll=True)
    assert "acc_own" in mu and "acc_own" not in m and not torch.isclose(plain, both)


@pytest.mark.slow
def test_a_pool_from_cached_generations_matches_one_built_by_generating(tmp_path):
    """--pool-files: the distillation caches' generations, read in turn from each file, give the same tokens and (to
    fp16) the same features as generating them; a padded batch does not change a row's features."""
    from scripts.train.distill_cache import append_cache
    from scripts.train.feature_drafter import build_pool, interleave, pool_from_cache, read_generations
    from wisv.models.loader import load_pair
    from wisv.tasks.evaluate import greedy_reference
    from wisv.tasks.prompts import prompt_rows
    _, target, tok = load_pair()
    rows = prompt_rows(tok, "train", 3)
    built = build_pool(target, rows, 12)
    gens = [(len(r["prompt_ids"]), r["prompt_ids"] + greedy_reference(target, r["prompt_ids"], 12)) for r in rows]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append_cache(a, [("k0", [gens[0][0], gens[0][1], [], []]), ("k2", [gens[2][0], gens[2][1], [], []])])
    append_cache(b, [("k1", [gens[1][0], gens[1][1], [], []])])
    per_file = [list(read_generations(f).values()) for f in (a, b)]
    taken = interleave(per_file, 3)
    assert taken == gens  # a, b, a: the files in turn
    assert interleave(per_file, 2) == gens[:2]
    pool = pool_from_cache(target, taken, batch=2)
    for p, q in zip(pool, built):
        assert torch.equal(p["x"], q["x"])
        torch.testing.assert_close(p["f"].float(), q["f"].float(), atol=2e-2, rtol=1e-2)


def test_a_missing_pool_file_fails_before_the_models_load(tmp_path, monkeypatch):
    import pytest

    import scripts.train.feature_drafter as tfd
    monkeypatch.setattr(tfd, "load_pair", lambda *a: pytest.fail("the models loaded before the check"))
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl: no such generation cache"):
        run(FeatureDrafterConfig(out=str(tmp_path / "h"), pool_files=[str(tmp_path / "nowhere.jsonl")],
                                 eval_prompts=0))


def test_file_features_are_cached_by_row_and_a_grown_file_computes_only_its_new_rows(tmp_path, monkeypatch):
    """The features of a generation cache file are the target's (as ``pool_from_cache``), kept under
    <cache>/distill/feat/; rows added to the file later are the only ones computed, and an empty generation is left
    out."""
    import scripts.train.feature_drafter as tfd
    from scripts.train.distill_cache import append_cache
    from wisv.models.loader import load_pair
    from wisv.pairs import CACHE_ENV
    from wisv.tasks.evaluate import greedy_reference
    from wisv.tasks.prompts import prompt_rows
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    _, target, tok = load_pair()
    gens = [(len(r["prompt_ids"]), r["prompt_ids"] + greedy_reference(target, r["prompt_ids"], 8))
            for r in prompt_rows(tok, "train", 3)]
    f = tmp_path / "gen" / "suite-abc.jsonl"
    f.parent.mkdir()
    append_cache(f, [("k0", [gens[0][0], gens[0][1], [], []]), ("e", [2, [5, 6], [], []])])  # "e": nothing generated
    first = tfd.file_features(target, f)
    assert [p["x"].tolist() for p in first] == [gens[0][1][gens[0][0] - 1:]]
    assert tfd.feature_cache(f) == tmp_path / "cache" / "distill" / "feat" / "suite-abc.pt"
    append_cache(f, [("k1", [gens[1][0], gens[1][1], [], []])])
    seen = []
    real = tfd.pool_from_cache
    monkeypatch.setattr(tfd, "pool_from_cache", lambda t, seqs, **kw: seen.extend(seqs) or real(t, seqs, **kw))
    second = tfd.file_features(target, f)
    assert seen == [gens[1]]  # only the new row
    assert torch.equal(second[0]["f"], first[0]["f"]) and len(second) == 2
    for p, q in zip(second, real(target, gens[:2])):
        assert torch.equal(p["x"], q["x"])
        torch.testing.assert_close(p["f"].float(), q["f"].float(), atol=2e-2, rtol=1e-2)
    assert tfd.interleave([[1, 3, 5, 6], [2, 4]], 5) == [1, 2, 3, 4, 5]
    append_cache(f, [("k2", [gens[2][0], gens[2][1], [], []])])
    seen.clear()
    assert len(tfd.file_features(target, f, most=2)) == 2 and seen == []  # --prompts 2: the third row waits

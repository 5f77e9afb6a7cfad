"""Magpie prompts (scripts/make_magpie.py): which samples may be distilled on, and the shipped file's checks against
every held-out pool."""
from __future__ import annotations

from scripts.distill_sources import held_out_prompts
from scripts.make_magpie import MagpieConfig, keep_prompts, word_runs
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.pools import MAGPIE, normalise_prompt


def test_word_runs_are_lower_cased_and_ignore_punctuation():
    assert word_runs("What is the Sun, made of?", 3) == {("what", "is", "the"), ("is", "the", "sun"),
                                                          ("the", "sun", "made"), ("sun", "made", "of")}
    assert word_runs("two words", 3) == set()


def test_keep_prompts_drops_each_kind_of_bad_sample_and_says_why():
    cfg = MagpieConfig(min_words=3, max_words=12, overlap_words=4)
    held = ["What is the capital of France? Start with the answer."]
    samples = [("How do volcanoes form under the sea?", True),
               ("How do volcanoes form", False),                      # the turn never ended
               ("Hi", True),                                          # too short
               ("one two three four five six seven eight nine ten eleven twelve thirteen", True),  # too long
               ("Tell me about <|im_start|> tokens please", True),   # a special token leaked into the text
               ("how do volcanoes form under the sea", True),         # the same prompt again
               ("what is the capital of france start with the answer", True),  # a held-out prompt
               ("Tell me: what is the capital of Spain?", True),      # shares 'what is the capital' with one
               ("  Why is the sky blue?  ", True)]
    kept, why = keep_prompts(samples, held, cfg)
    assert kept == ["How do volcanoes form under the sea?", "Why is the sky blue?"]
    assert why == {"unfinished": 1, "length": 2, "special": 1, "duplicate": 1, "held_out": 1, "overlap": 1}


def test_the_shipped_prompts_are_new_distinct_and_share_no_run_of_words_with_a_held_out_pool():
    cfg = MagpieConfig()
    rows = read_jsonl(MAGPIE)
    assert len(rows) >= 500
    assert [r["prompt_id"] for r in rows] == [f"mp-{i:05d}" for i in range(len(rows))]
    kept, why = keep_prompts([(r["prompt"], True) for r in rows], list(held_out_prompts()), cfg)
    assert kept == [r["prompt"] for r in rows] and not any(why.values())
    assert len({normalise_prompt(r["prompt"]) for r in rows}) == len(rows)


def test_the_magpie_source_is_off_by_default_and_older_distillation_runs_still_resume():
    from scripts.distill_sources import sources
    from scripts.train_smollm2_drafter import DistillConfig, run_config
    base = dict(prompts=0, pool_rows=0, suite_rows=2, free_rows=0)
    assert [s.name for s in sources(DistillConfig(**base))] == ["suite"]
    assert "magpie_rows" not in run_config(DistillConfig())  # a state saved before the field matches
    assert run_config(DistillConfig(magpie_rows=5))["magpie_rows"] == 5
    if MAGPIE.is_file():
        got = {s.name: s for s in sources(DistillConfig(**base, magpie_rows=3))}
        assert got["magpie"].prompts == [r["prompt"] for r in read_jsonl(MAGPIE)][:3]
        assert got["magpie"].max_new_tokens == 96

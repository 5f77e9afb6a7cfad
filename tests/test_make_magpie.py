"""Magpie prompts (scripts/train/magpie.py): which samples may be distilled on, and the shipped file's checks against
every held-out pool."""
from __future__ import annotations

import pytest

from scripts.train.distill_sources import held_out_prompts
from scripts.train.magpie import MagpieConfig, is_question, keep_prompts, with_tails, word_runs
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.pools import MAGPIE, MAGPIE_QUESTIONS, normalise_prompt


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
    assert why == {"unfinished": 1, "length": 2, "special": 1, "not_question": 0, "duplicate": 1, "held_out": 1,
                   "overlap": 1}


def test_questions_only_keeps_turns_that_are_one_question():
    assert is_question("Who wrote Hamlet?") and not is_question("Who wrote Hamlet? And when?")
    assert not is_question("Tell me who wrote Hamlet.") and not is_question("Who? wrote it")
    samples = [("Who wrote the play Hamlet?", True), ("Write me a poem about the sea.", True),
               ("Why? Tell me why the sky is blue?", True)]
    kept, why = keep_prompts(samples, [], MagpieConfig(questions_only=True))
    assert kept == ["Who wrote the play Hamlet?"] and why["not_question"] == 2
    assert keep_prompts(samples[1:2], [], MagpieConfig())[0] == ["Write me a poem about the sea."]


def test_tails_are_appended_in_turn_and_the_sampled_turn_is_kept_beside_them():
    rows = with_tails(["Q one?", "Q two?", "Q three?"], ["Start with the answer.", "End with the answer."])
    assert [r["prompt"] for r in rows] == ["Q one? Start with the answer.", "Q two? End with the answer.",
                                           "Q three? Start with the answer."]
    assert [r["turn"] for r in rows] == ["Q one?", "Q two?", "Q three?"]
    assert with_tails(["Q one?"], []) == [{"prompt_id": "mp-00000", "prompt": "Q one?", "raw": True}]


@pytest.mark.parametrize("path", [MAGPIE, MAGPIE_QUESTIONS], ids=["magpie", "magpie-questions"])
def test_the_shipped_prompts_are_new_distinct_and_share_no_run_of_words_with_a_held_out_pool(path):
    """Each shipped draw passes its own filter again (its saved config), on the sampled turn."""
    import tomllib
    if not path.is_file():
        pytest.skip(f"{path} not made")
    saved = tomllib.loads(path.with_name("prompts_config.toml").read_text())  # (older keys are left out)
    cfg = MagpieConfig(**{k: v for k, v in saved.items() if k in MagpieConfig.__dataclass_fields__})
    rows = read_jsonl(path)
    assert len(rows) >= 500
    assert [r["prompt_id"] for r in rows] == [f"mp-{i:05d}" for i in range(len(rows))]
    turns = [r.get("turn", r["prompt"]) for r in rows]
    kept, why = keep_prompts([(t, True) for t in turns], list(held_out_prompts()), cfg)
    assert kept == turns and not any(why.values())
    assert with_tails(turns, cfg.tails) == rows
    assert len({normalise_prompt(r["prompt"]) for r in rows}) == len(rows)


def test_the_magpie_source_is_off_by_default_and_older_distillation_runs_still_resume():
    from scripts.train.distill_sources import sources
    from scripts.train.smollm2_drafter import DistillConfig, run_config
    base = dict(prompts=0, pool_rows=0, suite_rows=2, free_rows=0)
    assert [s.name for s in sources(DistillConfig(**base))] == ["suite"]
    assert "magpie_rows" not in run_config(DistillConfig())  # a state saved before the field matches
    assert run_config(DistillConfig(magpie_rows=5))["magpie_rows"] == 5
    if MAGPIE.is_file():
        got = {s.name: s for s in sources(DistillConfig(**base, magpie_rows=3))}
        assert got["magpie"].prompts == [r["prompt"] for r in read_jsonl(MAGPIE)][:3]
        assert got["magpie"].max_new_tokens == 96


def test_form_instructions_on_the_command_line_keep_their_commas():
    import config
    cfg = config.parse(MagpieConfig, ["--tails", "Start with the answer, then explain it.", "End with it.",
                                      "--starts", "How many"])
    assert cfg.tails == ["Start with the answer, then explain it.", "End with it."] and cfg.starts == ["How many"]


@pytest.mark.parametrize("flag", ["--tails", "--starts"])
def test_a_steering_flag_given_bare_is_an_error_not_the_default_draw(flag, capsys):
    import config
    with pytest.raises(SystemExit) as e:
        config.parse(MagpieConfig, ["--out", "x.jsonl", flag], prog="python -m scripts.train.magpie")
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == f"python -m scripts.train.magpie: error: {flag}: give at least 1 value(s), got 0\n"

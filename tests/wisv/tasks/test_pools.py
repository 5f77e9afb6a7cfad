"""Prompt pools: the long-form task's distill / calib / test pools, the generic distillation prompts and the generic
held-out set never share a (normalised) prompt; the shipped pools are what scripts/make_longform.py writes."""
from __future__ import annotations

import pytest

from scripts.make_longform import MakeLongformConfig, pools
from scripts.smollm2_distill_prompts import distill_prompts, generic_pool
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.qa import check_answer
from wisv.tasks.pools import GENERIC_HELDOUT, POOLS, load_pool, normalise_prompt, overlaps


@pytest.mark.parametrize("a, b", [("What is 3 + 4?", "what is 3+4"), ("Hi,  there!", "hi there"),
                                  ('The "plural" of child.', "the plural of child")])
def test_normalise_prompt_ignores_case_punctuation_and_spacing(a, b):
    assert normalise_prompt(a) == normalise_prompt(b)


def test_overlaps_names_every_shared_prompt():
    found = overlaps({"x": ["What is 3 + 4?", "Hello"], "y": ["what is 3+4", "Bye"], "z": ["bye!"]})
    assert found == [("x", "y", "what is 3 4"), ("y", "z", "bye")]
    assert overlaps({"x": ["a"], "y": ["b"]}) == []


def test_shipped_pools_generic_prompts_and_heldout_are_disjoint():
    named = {p: [r["prompt"] for r in load_pool(p)] for p in POOLS}
    named["generic distillation"] = generic_pool()  # every generic prompt a drafter may be distilled on
    named["generic held-out"] = [r["prompt"] for r in read_jsonl(GENERIC_HELDOUT)]
    assert overlaps(named) == []
    for p in POOLS:  # and none repeats inside a pool
        assert len({normalise_prompt(x) for x in named[p]}) == len(named[p])


def test_shipped_pools_are_the_generator_output_and_well_formed():
    made = pools(MakeLongformConfig())
    rows = [r for p in POOLS for r in made[p]]
    assert {p: made[p] for p in POOLS} == {p: load_pool(p) for p in POOLS}
    assert len(rows) >= 600 and len({r["prompt_id"] for r in rows}) == len(rows)
    assert sum(r["form"] == "last" for r in rows) >= len(rows) / 3
    for p in POOLS:
        assert {r["kind"] for r in made[p]} == {r["kind"] for r in rows}  # every pool holds every kind
    for r in rows:
        assert "answer" not in r and r["answers"] and r["raw"] is True and r["form"] in ("first", "last")
    assert load_pool("test", 5) == made["test"][:5]
    with pytest.raises(ValueError, match="expected one of"):
        load_pool("train")


def test_a_pools_rows_are_checked_in_either_form():
    first = next(r for r in load_pool("test") if r["form"] == "first")
    last = next(r for r in load_pool("test") if r["form"] == "last")
    a, n = first["answers"][0], last["answers"][0]
    assert check_answer(f"The answer to that is {a}. It is a fine place with old streets.", first["answers"])
    assert check_answer(f"We add the two numbers step by step.\n\nThe answer is {n}.", last["answers"])
    assert not check_answer("We add the two numbers step by step.\n\nThe answer is 1000.", last["answers"])


def test_generic_distill_prompts_are_a_seeded_prefix_of_the_pool():
    assert distill_prompts(50, 1) == distill_prompts(50, 1) != distill_prompts(50, 2)
    assert set(distill_prompts(3000, 1)) <= set(generic_pool()) and len(set(distill_prompts(3000, 1))) == 3000


def test_an_alias_belongs_to_its_entity_not_to_every_row_with_that_answer():
    rows = [r for p in POOLS for r in load_pool(p) if r["kind"] == "language"]
    by_prompt = {r["prompt"].split("?")[0]: r["answers"] for r in rows}
    assert by_prompt["What language is spoken in Germany"] == ["German"]
    assert set(by_prompt["What language is spoken in Switzerland"]) == {"German", "French", "Italian"}


def test_freeform_calib_pool_is_the_generators_and_disjoint_from_distillation_test_and_heldout():
    from scripts.freeform_calib_prompts import OUT, freeform_rows
    shipped = read_jsonl(OUT)
    assert shipped == freeform_rows(len(shipped), 0) and len(shipped) >= 200
    named = {p: [r["prompt"] for r in load_pool(p)] for p in POOLS}
    named["generic distillation"] = generic_pool()
    named["generic held-out"] = [r["prompt"] for r in read_jsonl(GENERIC_HELDOUT)]
    named["free-form calib"] = [r["prompt"] for r in shipped]
    assert [o for o in overlaps(named) if "free-form calib" in o[:2]] == []
    assert len({normalise_prompt(r["prompt"]) for r in shipped}) == len(shipped)

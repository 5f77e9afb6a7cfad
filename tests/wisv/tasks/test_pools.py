"""Prompt pools: the long-form task's distill / calib / test pools, the broad task suite's pools, the generic
distillation prompts and the generic held-out set never share a (normalised) prompt; the suite's unseen kinds are in
its test pool only and its dev kinds in calib only; the shipped pools are what scripts/data/longform.py and
scripts/data/suite.py write."""
from __future__ import annotations

import pytest

from scripts.data.longform import MakeLongformConfig, pools
from scripts.data.smollm2_distill_prompts import distill_prompts, generic_pool
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.pools import GENERIC_HELDOUT, POOLS, load_pool, normalise_prompt, overlaps
from wisv.tasks.qa import check_answer


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
    from scripts.data.freeform_calib_prompts import OUT, freeform_rows
    shipped = read_jsonl(OUT)
    assert shipped == freeform_rows(len(shipped), 0) and len(shipped) >= 200
    named = {p: [r["prompt"] for r in load_pool(p)] for p in POOLS}
    named["generic distillation"] = generic_pool()
    named["generic held-out"] = [r["prompt"] for r in read_jsonl(GENERIC_HELDOUT)]
    named["free-form calib"] = [r["prompt"] for r in shipped]
    assert [o for o in overlaps(named) if "free-form calib" in o[:2]] == []
    assert len({normalise_prompt(r["prompt"]) for r in shipped}) == len(shipped)


# The broad task suite (wisv/assets/suite, scripts/data/suite.py): kinds split between pools.
SUITE_FILES = [(p, fam) for fam in ("question", "free") for p in POOLS]


def _suite_named() -> dict[str, list[str]]:
    """Every prompt list no two of which may share a prompt: the suite's six files and every older pool."""
    from scripts.data.freeform_calib_prompts import OUT
    from wisv.tasks.suite import load_suite
    named = {f"suite {fam} {p}": [r["prompt"] for r in load_suite(p, fam)] for p, fam in SUITE_FILES}
    named |= {f"long-form {p}": [r["prompt"] for r in load_pool(p)] for p in POOLS}
    named["generic distillation"] = generic_pool()
    named["generic held-out"] = [r["prompt"] for r in read_jsonl(GENERIC_HELDOUT)]
    named["free-form calib"] = [r["prompt"] for r in read_jsonl(OUT)]
    return named


def test_suite_pools_are_disjoint_by_prompt_from_each_other_and_every_older_pool():
    named = _suite_named()
    assert overlaps(named) == []
    for name, prompts in named.items():
        if name.startswith("suite"):  # and none repeats inside a file
            assert len({normalise_prompt(x) for x in prompts}) == len(prompts), name


def test_suite_kinds_are_split_by_role():
    from wisv.tasks.suite import kind_split, load_suite
    split = kind_split()
    kinds = {(p, fam): {r["kind"] for r in load_suite(p, fam)} for p, fam in SUITE_FILES}
    for (p, fam), ks in kinds.items():
        roles = {split[k] for k in ks}
        want = {"distill": {"seen"}, "calib": {"seen", "dev"}, "test": {"seen", "unseen"}}[p]
        assert roles == want, (p, fam, roles)  # no unseen kind in distill or calib, dev kinds in calib only
    for fam in ("question", "free"):  # a seen kind is in every pool
        seen = {k for k in kinds[("distill", fam)]}
        assert seen <= kinds[("calib", fam)] and seen <= kinds[("test", fam)]
    lf = {r["kind"] for p in POOLS for r in load_pool(p)}
    assert lf and all(split[k] == "seen" for k in lf)  # the long-form kinds are seen kinds
    assert {r["kind"] for r in load_suite("test", longform=True)} >= lf | kinds[("test", "question")]


def test_suite_counts_meet_the_minimums():
    from wisv.tasks.suite import is_unseen, load_suite
    rows = {(p, fam): load_suite(p, fam) for p, fam in SUITE_FILES}
    questions = [r for p in POOLS for r in rows[(p, "question")]]
    forms = {}
    for r in questions:
        forms.setdefault(r["kind"], set()).add(r["form"])
    assert len(forms) >= 30 and all(f == {"first", "last"} for f in forms.values())  # each kind in both forms
    assert len({r["kind"] for p in POOLS for r in rows[(p, "free")]}) >= 20
    unseen_test = [r for r in rows[("test", "question")] if is_unseen(r["kind"])]
    assert len({r["kind"] for r in unseen_test}) >= 10 and len(unseen_test) >= 40
    for k in {r["kind"] for r in unseen_test}:  # at least 6 questions a form of each unseen kind
        assert all(sum(r["kind"] == k and r["form"] == f for r in unseen_test) >= 6 for f in ("first", "last"))
    assert len({r["kind"] for r in rows[("test", "free")] if is_unseen(r["kind"])}) >= 5
    assert len(rows[("distill", "question")]) + len(rows[("distill", "free")]) >= 2500
    assert len(rows[("calib", "question")]) >= 300 and len(rows[("calib", "free")]) >= 50


@pytest.mark.slow
def test_suite_pools_are_the_generators_output_and_well_formed(tmp_path):
    from scripts.data.suite import MakeSuiteConfig, main, pools
    from wisv.tasks.suite import SUITE_DIR, load_suite, pool_path
    made = pools(MakeSuiteConfig())
    assert made == pools(MakeSuiteConfig())  # seeded: the same every time
    assert made != pools(MakeSuiteConfig(seed=7))
    main(["--out", str(tmp_path)])
    for p, fam in SUITE_FILES:  # the shipped files are byte for byte what the script writes
        name = pool_path(p, fam).name
        assert (tmp_path / name).read_bytes() == (SUITE_DIR / name).read_bytes(), name
        assert made[pool_path(p, fam).stem] == load_suite(p, fam)
    rows = [r for p, fam in SUITE_FILES for r in load_suite(p, fam)]
    assert len({r["prompt_id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["prompt_id"].startswith(f"su-{r['kind']}-") and r["raw"] is True and r["domain"]
        if r["form"] == "free":
            assert "answers" not in r
        else:
            assert r["form"] in ("first", "last") and [a for a in r["answers"] if not a.startswith("!")]
    with pytest.raises(ValueError, match="expected one of"):
        load_suite("train")
    with pytest.raises(ValueError, match="expected one of"):
        load_suite("test", "essay")


def test_suite_rows_read_as_prompt_file_rows_with_their_answers():
    from wisv.tasks.prompts import read_jsonl_prompts
    from wisv.tasks.suite import pool_path

    class Tok:
        chat_template = None

        def __call__(self, text, add_special_tokens=True):
            return type("Enc", (), {"input_ids": [ord(c) for c in text]})()

    q = read_jsonl_prompts(pool_path("test"), Tok(), chat_template="off")
    f = read_jsonl_prompts(pool_path("test", "free"), Tok(), chat_template="off")
    assert all(isinstance(r["answer"], list) and r["answer"] for r in q) and all(r["answer"] is None for r in f)

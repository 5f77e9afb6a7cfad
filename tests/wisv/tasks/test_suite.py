"""The task suite's kinds and the answer checker on them: every question kind with a right and a wrong hand-written
output (both forms among them), every fact's answers against the other facts of its kind, and the kind table."""
from __future__ import annotations

import random

import pytest

from wisv.tasks.qa import YES_NO, check_answer, normalise
from wisv.tasks.suite import (
    DEV_KINDS,
    LONGFORM_KINDS,
    UNSEEN_KINDS,
    dev_split,
    family,
    is_dev,
    is_unseen,
    kind_of,
    kind_split,
    role,
)
from wisv.tasks.suite_free import FREE_KINDS
from wisv.tasks.suite_kinds import QUESTION_KINDS, a

LAST = "\n\nThe answer is "
# kind, words the question holds, a right output, a wrong output
CASES = [
    ("element_symbol", ["symbol for gold"], "The chemical symbol for gold is Au. It comes from the Latin aurum.",
     "The chemical symbol for gold is Ag. It comes from the Latin argentum."),
    ("element_name", ["symbol Fe"], "Iron has the chemical symbol Fe." + LAST + "iron.",
     "Fe stands for ferrum." + LAST + "fluorine."),
    ("chemical_formula", ["formula of water"], "The chemical formula of water is H₂O. Each molecule has three atoms.",
     "The chemical formula of water is HO. It is a liquid."),
    ("formula_name", ["formula NaCl"], "NaCl is table salt, also called sodium chloride.",
     "NaCl is sodium hydroxide."),
    ("planet", ["Red Planet"], "Mars is known as the Red Planet because of iron oxide.",
     "The Red Planet is Jupiter. It is big."),
    ("science_fact", ["plants take in"], "Plants take in carbon dioxide from the air." + LAST + "carbon dioxide.",
     "Plants need light." + LAST + "oxygen."),
    ("science_number", ["bones"], "An adult human body has 206 bones.", "An adult human body has 208 bones."),
    ("state_of_matter", ["is mercury"], "At room temperature, mercury is a liquid. It is a metal.",
     "Mercury is a solid metal at room temperature, not a liquid."),
    ("animal_class", ["Is a dolphin"], "Dolphins are mammals, not fish. They breathe air.",
     "A dolphin is a fish that lives in the sea."),
    ("animal_diet", ["Is a lion"], "Lions live in Africa and hunt in groups." + LAST + "a carnivore.",
     "Lions live in Africa and hunt in groups." + LAST + "omnivore."),
    ("animal_legs", ["legs does a spider"], "A spider has eight legs. Insects have six.",
     "A spider has six legs, like an insect."),
    ("baby_animal", ["baby kangaroo"], "A baby kangaroo is called a joey.", "A baby kangaroo is called a cub."),
    ("body_part", ["pumps blood"], "The heart pumps blood around the body.", "The lungs pump blood around the body."),
    ("event_year", ["World War II end"], "World War II ended in 1945.", "World War II ended in 1944."),
    ("famous_person", ["Mona Lisa"], "The Mona Lisa was painted by Leonardo da Vinci.",
     "The Mona Lisa was painted by Michelangelo."),
    ("author", ["wrote Pride and Prejudice"], "Pride and Prejudice was written by Jane Austen in 1813.",
     "Pride and Prejudice was written by Charlotte Brontë."),
    ("players_per_team", ["in basketball"], "A basketball team has five players on the court at one time.",
     "A basketball team has six players on the court."),
    ("sport_term", ["shuttlecock"], "Players hit a shuttlecock in badminton." + LAST + "badminton.",
     "Players hit a shuttlecock." + LAST + "tennis."),
    ("unit_fact", ["grams are in a kilogram"], "There are 1,000 grams in a kilogram.",
     "There are 100 grams in a kilogram."),
    ("unit_multiple", ["minutes are in 3 hours"], "One hour is 60 minutes, so 3 hours is 3 x 60 = 180 minutes."
     + LAST + "180.", "One hour is 60 minutes." + LAST + "160."),
    ("days_in_month", ["in April"], "April has thirty days.", "April has 31 days."),
    ("day_order", ["right after Tuesday"], "The day after Tuesday is Wednesday.",
     "The day after Tuesday is Thursday."),
    ("month_order", ["right before March"], "The month before March is February.",
     "The month before March is April."),
    ("month_number", ["is October"], "October is the tenth month of the year.",
     "October is the ninth month of the year."),
    ("continent", ["is Kenya"], "Kenya is in Africa, on the east coast.", "Kenya is in Asia."),
    ("landmark", ["Statue of Liberty"], "The Statue of Liberty is in the United States, in New York.",
     "The Statue of Liberty is in France, where it was made."),
    ("currency", ["currency of India"], "The currency of India is the Indian rupee.",
     "The currency of India is the Indian dollar."),
    ("geo_fact", ["largest ocean"], "The largest ocean on Earth is the Pacific Ocean.",
     "The largest ocean on Earth is the Atlantic Ocean."),
    ("addition", ["What is 34 + 58?"], "34 + 58 = 92. I added the tens and then the ones.", "34 + 58 = 82."),
    ("subtraction", ["What is 83 - 27?"], "We take 27 from 83 step by step." + LAST + "56.",
     "We take 27 from 83 step by step." + LAST + "66."),
    ("multiplication", ["What is 7 times 8?"], "7 times 8 is fifty-six.", "7 times 8 is 54."),
    ("division", ["What is 56 divided by 8?"], "56 divided by 8 equals 7.", "56 divided by 8 equals 6."),
    ("word_problem_add", ["has 15 ", "gives", "9 more"], "15 + 9 = 24, so the total is 24." + LAST + "24.",
     "15 + 9 = 23." + LAST + "23."),
    ("word_problem_sub", ["has 20 ", "gives 8 of them"], "12 are left, because 20 - 8 = 12.",
     "20 - 8 = 11." + LAST + "11."),
    ("word_problem_mul", ["has 4 bags with 6 "], "Four bags of 6 make 24. The answer is 24.",
     "4 bags of 6 make 20." + LAST + "20."),
    ("larger_number", ["larger, 0.3 or 0.25", "larger, 0.25 or 0.3"], "0.3 is larger than 0.25.",
     "0.25 is larger than 0.3 because it has more digits."),
    ("compare_things", ["an elephant or a mouse", "a mouse or an elephant"], "An elephant is heavier than a mouse.",
     "A mouse is heavier than an elephant."),
    ("yes_no_fact", ["Is a spider an insect?"], "No, a spider is not an insect. It is an arachnid.",
     "Yes, a spider is an insect."),
    ("even_odd", ["Is 47 an"], "47 is an odd number, because it ends in 7.", "47 is even."),
    ("letter_count", ["word 'elephant'"], "E-l-e-p-h-a-n-t: the word has 8 letters." + LAST + "8.",
     "The word 'elephant' has 9 letters."),
    ("everyday_number", ["keys does a standard piano"], "A standard piano has 88 keys.",
     "A standard piano has 76 keys."),
    ("geometry", ["sides does a hexagon"], "A hexagon has six sides.", "A hexagon has eight sides."),
    ("opposite", ["opposite of 'early'"], "The opposite of 'early' is 'late'.", "The opposite of 'early' is 'soon'."),
    ("plural", ["plural of 'goose'"], "The plural of 'goose' is 'geese'.", "The plural of 'goose' is 'gooses'."),
    ("past_tense", ["past tense of 'swim'"], "The past tense of 'swim' is 'swam'.",
     "The past tense of 'swim' is 'swimmed'."),
    ("occupation", ["treats sick animals"], "A person who treats sick animals is called a veterinarian, or vet.",
     "A person who treats sick animals is called a doctor."),
    ("color", ["mix blue and yellow"], "Mixing blue and yellow gives green." + LAST + "green.",
     "Mixing blue and yellow gives a new color." + LAST + "purple."),
]


def answers_of(kind: str, words: list[str]) -> list[str]:
    """The answers of the kind's one question holding all of ``words`` (or, for alternatives, any one of them)."""
    items = QUESTION_KINDS[kind].items(random.Random(0))
    found = [ans for q, ans in items if all(w in q for w in words)]
    if not found:  # alternatives: the question in either order of its options
        found = [ans for q, ans in items if any(w in q for w in words)]
    assert len(found) >= 1, f"{kind}: no question holds {words}"
    return found[0]


def test_every_question_kind_has_a_hand_written_case():
    assert sorted({c[0] for c in CASES}) == sorted(QUESTION_KINDS)


@pytest.mark.parametrize("kind, words, right, wrong", CASES, ids=[c[0] for c in CASES])
def test_checker_on_each_kind(kind, words, right, wrong):
    answers = answers_of(kind, words)
    assert check_answer(right, answers), f"{kind}: {right!r} should be accepted for {answers}"
    assert not check_answer(wrong, answers), f"{kind}: {wrong!r} should be rejected for {answers}"


@pytest.mark.parametrize("kind", sorted(QUESTION_KINDS))
def test_each_fact_is_accepted_in_both_forms_and_the_kinds_other_answers_are_not(kind):
    items = QUESTION_KINDS[kind].items(random.Random(0))
    assert len(items) >= 11 and len({q for q, _ in items}) == len(items)  # one question an entity
    if len(items) > 120:  # a generated kind: a seeded sample of its questions
        items = random.Random(kind).sample(items, 120)
    canon = [next(x for x in ans if not x.startswith("!")) for _, ans in items]
    distinct = list(dict.fromkeys(canon))
    for (q, ans), right in zip(items, canon):
        assert all(normalise(x.lstrip("!")) for x in ans), (q, ans)
        assert check_answer(_first(right), ans), (q, ans)
        assert check_answer(f"Let me think about it.{LAST}{right}.", ans), (q, ans)
        accepted = {normalise(x) for x in ans}
        wrong = [x[1:] for x in ans if x.startswith("!")] or \
            [c for c in distinct if normalise(c) not in accepted][:5]
        for w in wrong:
            assert not check_answer(_first(w), ans), (q, ans, w)
            assert not check_answer(f"Let me think about it.{LAST}{w}.", ans), (q, ans, w)


def _first(answer: str) -> str:
    """An answer-first output stating ``answer``: "Yes. ...", or "It is Paris. ..." (a bare "5. " opens a list)."""
    return f"{answer}. More about it follows." if normalise(answer) in YES_NO else f"It is {answer}. More follows."


def test_question_kinds_ask_their_question_in_both_forms():
    qk = QUESTION_KINDS["author"]
    first, last = qk.prompts("Who wrote Hamlet?", "first"), qk.prompts("Who wrote Hamlet?", "last")
    assert len(first) == 3 and all(p.startswith("Who wrote Hamlet? ") and "answer first" in p.lower() or
                                   "Start with the answer" in p for p in first)
    assert len(last) == 2 and all('end with "The answer is" followed by the author\'s name.' in p for p in last)
    assert a("eagle") == "an eagle" and a("dog") == "a dog"


def test_kind_split_is_one_table_with_every_kind():
    split = kind_split()
    assert set(split) == set(QUESTION_KINDS) | set(FREE_KINDS) | set(LONGFORM_KINDS)
    assert set(UNSEEN_KINDS) | set(DEV_KINDS) <= set(split) and not set(UNSEEN_KINDS) & set(DEV_KINDS)
    assert all(split[k] == "seen" for k in LONGFORM_KINDS)
    assert is_unseen("author") and not is_unseen("element_symbol") and is_dev("plural") and not is_dev("author")
    assert role("capital") == "seen" and family("recipe_outline") == "free" and family("capital") == "question"
    with pytest.raises(ValueError, match="not a kind"):
        role("astrology")


def test_kind_of_reads_suite_and_longform_ids():
    assert kind_of("su-word_problem_mul-012") == "word_problem_mul" and kind_of("lf-capital_history-003") == \
        "capital_history"
    with pytest.raises(ValueError, match="expected"):
        kind_of("heldout-001")


def test_dev_split_leaves_whole_kinds_out():
    rows = [{"kind": "plural"}, {"kind": "opposite"}, {"kind": "speech"}, {"kind": "capital"}]
    train, dev = dev_split(rows)
    assert [r["kind"] for r in dev] == ["plural", "speech"] and [r["kind"] for r in train] == ["opposite", "capital"]

"""The task suite's question kinds: each kind's domain, its questions with accepted answers (from the fact tables, or
generated: sums, word problems, comparisons), and the two forms every question comes in.

- answer first (``form`` "first"): the question, then "Start with the answer, then ..." (as the long-form task's
  ``capital`` rows): the checker reads the first sentence;
- answer last (``form`` "last"): the question, then "First ... Then end with "The answer is" followed by ..." (as
  ``language_last``): the checker reads the closing statement.

A kind's ``items(rng)`` lists (question, answers) in a fixed order, one per entity; ``rng`` only picks names and
objects of word problems and the order of a comparison's options.  Choice questions list their wrong options with a
leading "!" (``wisv.tasks.qa``).  Pure: no torch."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from wisv.tasks import suite_facts as F
from wisv.tasks import suite_words as W
from wisv.tasks.numwords import ordinal

Item = tuple[str, list[str]]  # (question, accepted answers; "!x" a wrong option)
FIRST_FACT = ("Start with the answer, then explain it in a few sentences.",
              "Give the answer first, then write a short paragraph about {about}.",
              "Start with the answer, then tell me two more facts about {about}.")
LAST_FACT = ('First write two sentences about {about}. Then end with "The answer is" followed by {noun}.',
             'First explain how you know in two sentences. Then end with "The answer is" followed by {noun}.')
FIRST_STEPS = ("Start with the answer, then explain how you worked it out.",
               "Give the answer first, then show your steps.")
LAST_STEPS = ('First explain your steps. Then end with "The answer is" followed by {noun}.',
              'Work it out step by step, then end with "The answer is" followed by {noun}.')
NAMES = ("Tom", "Sara", "Ben", "Mia", "Leo", "Anna", "Sam", "Lily", "Max", "Emma", "Noah", "Zoe", "Omar", "Nina")
OBJECTS = ("apples", "books", "pencils", "marbles", "stickers", "cookies", "balloons", "stamps", "shells", "cards")
CLASSES = ("mammal", "bird", "fish", "reptile", "amphibian")
DIETS = ("herbivore", "carnivore", "omnivore")
STATES = ("solid", "liquid", "gas")


@dataclass(frozen=True)
class QuestionKind:
    """One kind of question with a checkable answer."""

    domain: str  # science, biology, history, literature, sport, units, calendar, geography, arithmetic, ...
    items: Callable[[random.Random], list[Item]]  # every (question, answers), one per entity, in a fixed order
    about: str  # what the free text is about: "two more facts about {about}"
    noun: str  # what follows the closing "The answer is": "the symbol"
    steps: bool = False  # a worked problem: the free text shows steps, not facts

    def prompts(self, question: str, form: str) -> list[str]:
        """Every prompt of one question in one form ("first" or "last")."""
        first, last = (FIRST_STEPS, LAST_STEPS) if self.steps else (FIRST_FACT, LAST_FACT)
        tails = first if form == "first" else last
        return [f"{question} {t.format(about=self.about, noun=self.noun)}" for t in tails]


def a(noun: str) -> str:
    """The noun with "a" or "an": a(eagle) -> "an eagle"."""
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def table(template: str, facts: dict, aliases: dict | None = None) -> Callable[[random.Random], list[Item]]:
    """Questions from a table: ``template`` with {x} the subject (the question itself where ``template`` is "{x}")."""
    def items(rng: random.Random) -> list[Item]:
        out = []
        for x, ans in facts.items():
            answers = [ans] if isinstance(ans, str) else list(ans)
            out.append((template.format(x=x), answers + (aliases or {}).get(x, [])))
        return out
    return items


def choice(template: str, facts: dict[str, str], options: tuple[str, ...]) -> Callable[[random.Random], list[Item]]:
    """Questions that offer every option: the right one accepted, the others marked wrong."""
    def items(rng: random.Random) -> list[Item]:
        return [(template.format(x=x), [right] + [f"!{o}" for o in options if o != right])
                for x, right in facts.items()]
    return items


def with_plurals(facts: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each one-word answer also with a plural -s (currencies: "rupees", "euros")."""
    return {k: list(dict.fromkeys(v + [w + "s" for w in v if " " not in w and not w.endswith("s")]))
            for k, v in facts.items()}


def _arithmetic(op: str) -> Callable[[random.Random], list[Item]]:
    """Every sum, difference, product or quotient of the kind's number ranges whose answer is not in the question."""
    def items(rng: random.Random) -> list[Item]:
        out = []
        if op == "+":
            pairs = [(x, y, x + y) for x in range(11, 100) for y in range(11, 100)]
        elif op == "-":
            pairs = [(x, y, x - y) for x in range(20, 100) for y in range(11, x - 5)]
        elif op == "times":
            pairs = [(x, y, x * y) for x in range(3, 13) for y in range(3, 13)]
        else:
            pairs = [(x * y, y, x) for x in range(3, 13) for y in range(3, 13)]
        word = {"+": "+", "-": "-", "times": "times", "/": "divided by"}[op]
        for x, y, r in pairs:
            if r not in (x, y):
                out.append((f"What is {x} {word} {y}?", [str(r)]))
        return out
    return items


def word_problems(op: str) -> Callable[[random.Random], list[Item]]:
    """Short word problems: a gain (+), a loss (-) or equal groups (x)."""
    def items(rng: random.Random) -> list[Item]:
        out = []
        if op == "x":
            for n in range(2, 10):
                for m in range(3, 13):
                    name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
                    q = f"{name} has {n} bags with {m} {obj} in each bag. How many {obj} does {name} have in all?"
                    out.append((q, [str(n * m)]))
            return out
        for x in range(8, 40):
            for y in range(3, 20):
                r = x + y if op == "+" else x - y
                if r < 2 or r in (x, y):
                    continue
                name, obj = rng.choice(NAMES), rng.choice(OBJECTS)
                if op == "+":
                    q = f"{name} has {x} {obj}. A friend gives {name} {y} more. How many {obj} does {name} have now?"
                else:
                    q = f"{name} has {x} {obj} and gives {y} of them away. How many {obj} does {name} have left?"
                out.append((q, [str(r)]))
        return out
    return items


def unit_multiples(rng: random.Random) -> list[Item]:
    return [(f"How many {small} are in {n} {big}?", [str(n * f)]) for small, big, f in F.UNIT_FACTORS
            for n in range(2, 10)]


def larger_numbers(rng: random.Random) -> list[Item]:
    """Two whole numbers with the same digits, or a one-place and a two-place decimal."""
    pairs = [(str(10 * t + u), str(10 * u + t)) for t in range(1, 10) for u in range(1, 10) if t > u]
    pairs += [(f"0.{t}", f"0.{u}{v}") for t in range(2, 10) for u in range(1, t) for v in (5,)]
    out = []
    for big, small in pairs:
        x, y = (big, small) if rng.random() < 0.5 else (small, big)
        out.append((f"Which number is larger, {x} or {y}?", [big, f"!{small}"]))
    return out


def comparisons(rng: random.Random) -> list[Item]:
    out = []
    for what, more, less in W.COMPARISONS:
        x, y = (more, less) if rng.random() < 0.5 else (less, more)
        out.append((f"Which is {what}, {x} or {y}?", [_bare(more), f"!{_bare(less)}"]))
    return out


def _bare(noun: str) -> str:
    return noun.split(" ", 1)[1] if noun.split(" ", 1)[0] in ("a", "an", "the") else noun


def even_odd(rng: random.Random) -> list[Item]:
    return [(f"Is {n} an even number or an odd number?", ["even", "!odd"] if n % 2 == 0 else ["odd", "!even"])
            for n in range(11, 100)]


def letter_counts(rng: random.Random) -> list[Item]:
    return [(f"How many letters are in the word '{w}'?", [str(len(w))]) for w in W.WORDS]


def days_of_week(rng: random.Random) -> list[Item]:
    d = F.WEEKDAYS
    return [q for i, day in enumerate(d) for q in (
        (f"What day of the week comes right after {day}?", [d[(i + 1) % 7]]),
        (f"What day of the week comes right before {day}?", [d[(i - 1) % 7]]),
        (f"What day of the week is two days after {day}?", [d[(i + 2) % 7]]))]


def months_in_order(rng: random.Random) -> list[Item]:
    m = F.MONTHS
    return [q for i, month in enumerate(m) for q in (
        (f"Which month comes right after {month}?", [m[(i + 1) % 12]]),
        (f"Which month comes right before {month}?", [m[(i - 1) % 12]]))]


def month_numbers(rng: random.Random) -> list[Item]:
    return [(f"Counting from January, which month of the year is {m}?", [ordinal(i), str(i)])
            for i, m in enumerate(F.MONTHS, 1) if i > 1]


QUESTION_KINDS: dict[str, QuestionKind] = {
    "element_symbol": QuestionKind("science", table("What is the chemical symbol for {x}?", F.ELEMENT_SYMBOLS),
                                   "the element", "the symbol"),
    "element_name": QuestionKind("science", table("Which chemical element has the symbol {x}?",
                                                  {v: [k] + F.ELEMENT_ALIASES.get(k, [])
                                                   for k, v in F.ELEMENT_SYMBOLS.items()}),
                                 "the element", "the name of the element"),
    "chemical_formula": QuestionKind("science", table("What is the chemical formula of {x}?", F.CHEMICAL_FORMULAS),
                                     "the substance", "the formula"),
    "formula_name": QuestionKind("science", table("Which substance has the chemical formula {x}?", F.FORMULA_NAMES),
                                 "the substance", "the name of the substance"),
    "planet": QuestionKind("science", table("{x}", F.PLANETS), "the planet", "the name of the planet"),
    "science_fact": QuestionKind("science", table("{x}", F.SCIENCE_FACTS), "it", "the answer in a word or two"),
    "science_number": QuestionKind("science", table("{x}", F.SCIENCE_NUMBERS), "it", "the number"),
    "state_of_matter": QuestionKind("science", choice("At room temperature, is {x} a solid, a liquid or a gas?",
                                                      F.STATES_OF_MATTER, STATES), "the substance",
                                    "solid, liquid or gas"),
    "animal_class": QuestionKind("biology", choice("Is {x} a mammal, a bird, a fish, a reptile or an amphibian?",
                                                   {a(k): v for k, v in F.ANIMAL_CLASSES.items()}, CLASSES),
                                 "the animal", "the class of animal"),
    "animal_diet": QuestionKind("biology", choice("Is {x} a herbivore, a carnivore or an omnivore?",
                                                  {a(k): v for k, v in F.ANIMAL_DIETS.items()}, DIETS),
                                "the animal", "herbivore, carnivore or omnivore"),
    "animal_legs": QuestionKind("biology", table("How many legs does {x} have?",
                                                 {a(k): str(v) for k, v in F.ANIMAL_LEGS.items()}),
                                "the animal", "the number"),
    "baby_animal": QuestionKind("biology", table("What is a baby {x} called?", F.BABY_ANIMALS), "the animal",
                                "the name of the baby"),
    "body_part": QuestionKind("biology", table("{x}", F.BODY_PARTS), "the human body", "the name of the body part"),
    "event_year": QuestionKind("history", table("In what year {x}?", F.EVENT_YEARS), "the event", "the year"),
    "famous_person": QuestionKind("history", table("{x}", F.FAMOUS_PEOPLE), "the person", "the person's name"),
    "author": QuestionKind("literature", table("Who wrote {x}?", F.AUTHORS), "the book", "the author's name"),
    "players_per_team": QuestionKind("sport", table(
        "How many players does one team have {x}?",
        {f"{place} at one time in {sport}": [n] for sport, (n, place) in F.PLAYERS_PER_TEAM.items()}),
        "the sport", "the number"),
    "sport_term": QuestionKind("sport", table("{x}", F.SPORT_TERMS), "the sport", "the name of the sport"),
    "unit_fact": QuestionKind("units", table("{x}", F.UNIT_FACTS), "the units", "the number", steps=True),
    "unit_multiple": QuestionKind("units", unit_multiples, "the units", "the number", steps=True),
    "days_in_month": QuestionKind("calendar", table("How many days are there in {x}?", F.DAYS_IN_MONTH), "the month",
                                  "the number"),
    "day_order": QuestionKind("calendar", days_of_week, "the days of the week", "the day"),
    "month_order": QuestionKind("calendar", months_in_order, "the months of the year", "the month"),
    "month_number": QuestionKind("calendar", month_numbers, "the month", "its number"),
    "continent": QuestionKind("geography", table("On which continent is {x}?", F.CONTINENTS), "the country",
                              "the name of the continent"),
    "landmark": QuestionKind("geography", table("In which country {x}?", F.LANDMARKS), "the landmark",
                             "the name of the country"),
    "currency": QuestionKind("geography", table("What is the currency of {x}?", with_plurals(F.CURRENCIES)),
                             "the currency", "the name of the currency"),
    "geo_fact": QuestionKind("geography", table("{x}", F.GEO_FACTS), "the place", "the name of the place"),
    "addition": QuestionKind("arithmetic", _arithmetic("+"), "", "the number", steps=True),
    "subtraction": QuestionKind("arithmetic", _arithmetic("-"), "", "the number", steps=True),
    "multiplication": QuestionKind("arithmetic", _arithmetic("times"), "", "the number", steps=True),
    "division": QuestionKind("arithmetic", _arithmetic("/"), "", "the number", steps=True),
    "word_problem_add": QuestionKind("word problem", word_problems("+"), "", "the number", steps=True),
    "word_problem_sub": QuestionKind("word problem", word_problems("-"), "", "the number", steps=True),
    "word_problem_mul": QuestionKind("word problem", word_problems("x"), "", "the number", steps=True),
    "larger_number": QuestionKind("comparison", larger_numbers, "", "the larger number", steps=True),
    "compare_things": QuestionKind("comparison", comparisons, "the two", "the one you chose"),
    "yes_no_fact": QuestionKind("yes/no", table("{x}", W.YES_NO_FACTS), "it", "yes or no"),
    "even_odd": QuestionKind("yes/no", even_odd, "", "even or odd", steps=True),
    "letter_count": QuestionKind("counting", letter_counts, "", "the number", steps=True),
    "everyday_number": QuestionKind("counting", table("{x}", W.EVERYDAY_NUMBERS), "it", "the number"),
    "geometry": QuestionKind("counting", table("{x}", W.GEOMETRY), "the shape", "the number"),
    "opposite": QuestionKind("language", table("What is the opposite of '{x}'?", W.OPPOSITES), "the two words",
                             "the word"),
    "plural": QuestionKind("language", table("What is the plural of '{x}'?", W.PLURALS), "the word", "the word"),
    "past_tense": QuestionKind("language", table("What is the past tense of '{x}'?", W.PAST_TENSES), "the verb",
                               "the word"),
    "occupation": QuestionKind("language", table("What do we call a person who {x}?", W.OCCUPATIONS), "the job",
                               "the name of the job"),
    "color": QuestionKind("everyday", table("{x}", W.COLORS), "it", "the color"),
}

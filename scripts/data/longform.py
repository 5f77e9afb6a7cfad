"""Write the long-form task (wisv/assets/longform/{distill,calib,test}.jsonl): seeded, offline.

Each prompt asks for a checkable answer and for free text beside it.  Answer-first kinds (``form`` "first") ask for
the answer first and then facts or a paragraph, so the checker reads the first sentence; answer-last kinds (``form``
"last") ask for the reasoning first and a closing "The answer is ...", as GSM8K ends.  Rows keep the QA task's
format (prompt_id, kind, prompt, answers, raw) plus ``form``; there is no ``answer`` field (``answers`` lists every
accepted answer).

The three pools are disjoint by construction: each kind's entities (a country, a city, a pair of numbers) are
shuffled with the seed and cut into distill / calib / test, and every prompt about an entity goes to that entity's
pool.  Kinds the target answered under 55% of the time (DROPPED, measured by scripts/bench/qa_accuracy.py on it) are
left out.  Each pool spreads its kinds evenly over the file (make_qa's ``spread``), so the first N prompts are a fair
sample."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import config
from scripts.data.qa import CAPITAL_ALIASES, CAPITALS, CITIES, CITY_ALIASES, LANGUAGE_ALIASES, LANGUAGES, spread
from wisv.tasks.jsonl import write_splits
from wisv.tasks.pools import LONGFORM_DIR, POOLS

MORE_CAPITALS = {"Brazil": "Brasilia", "Ghana": "Accra", "Qatar": "Doha", "Jordan": "Amman", "Ecuador": "Quito",
                 "Uruguay": "Montevideo", "Jamaica": "Kingston", "Bangladesh": "Dhaka", "Singapore": "Singapore",
                 "Senegal": "Dakar", "Uganda": "Kampala", "Algeria": "Algiers", "Tunisia": "Tunis",
                 "Estonia": "Tallinn", "Latvia": "Riga", "Lithuania": "Vilnius", "Slovakia": "Bratislava",
                 "Albania": "Tirana", "Cyprus": "Nicosia", "Mongolia": "Ulaanbaatar"}
MORE_CAPITAL_ALIASES = {"Brasilia": ["Brasília"], "Ulaanbaatar": ["Ulan Bator"]}
MORE_CITIES = {"Kyoto": "Japan", "Naples": "Italy", "Hamburg": "Germany", "Seville": "Spain", "Marseille": "France",
               "Lyon": "France", "Florence": "Italy", "Venice": "Italy", "Frankfurt": "Germany", "Porto": "Portugal",
               "Krakow": "Poland", "Prague": "the Czech Republic", "Budapest": "Hungary", "Beijing": "China",
               "Seoul": "South Korea", "Bangkok": "Thailand", "Delhi": "India", "Melbourne": "Australia",
               "Vancouver": "Canada", "Montreal": "Canada", "Boston": "the United States",
               "Miami": "the United States", "Edinburgh": "Scotland", "Liverpool": "England", "Zurich": "Switzerland"}
MORE_CITY_ALIASES = {"the Czech Republic": ["Czechia"], "South Korea": ["Korea"],
                     "Scotland": ["United Kingdom", "UK", "Britain"]}
MORE_LANGUAGES = {"Kenya": "Swahili", "Egypt": "Arabic", "Peru": "Spanish", "Chile": "Spanish", "Colombia": "Spanish",
                  "Cuba": "Spanish", "Venezuela": "Spanish", "Ecuador": "Spanish", "Uruguay": "Spanish",
                  "Bolivia": "Spanish", "Saudi Arabia": "Arabic", "Syria": "Arabic", "Iraq": "Arabic",
                  "Morocco": "Arabic", "Lebanon": "Arabic", "Jordan": "Arabic", "Algeria": "Arabic",
                  "Tunisia": "Arabic", "Qatar": "Arabic", "Austria": "German", "Canada": "English",
                  "Ireland": "English", "New Zealand": "English", "the United Kingdom": "English",
                  "Jamaica": "English", "Nigeria": "English", "Ghana": "English", "Indonesia": "Indonesian",
                  "Malaysia": "Malay", "the Philippines": "Filipino", "Pakistan": "Urdu", "Bangladesh": "Bengali",
                  "Iceland": "Icelandic", "Croatia": "Croatian", "Serbia": "Serbian", "Bulgaria": "Bulgarian",
                  "Estonia": "Estonian", "Latvia": "Latvian", "Lithuania": "Lithuanian", "Slovakia": "Slovak",
                  "Nepal": "Nepali", "India": "Hindi", "Ethiopia": "Amharic", "Mongolia": "Mongolian",
                  "Cyprus": "Greek", "Senegal": "French", "Uganda": "English", "Belgium": "Dutch",
                  "Switzerland": "German", "Afghanistan": "Pashto", "Cambodia": "Khmer", "Laos": "Lao",
                  "Sri Lanka": "Sinhala", "Albania": "Albanian", "Slovenia": "Slovenian"}
MORE_LANGUAGE_ALIASES = {"Kenya": ["English"], "the Philippines": ["Tagalog", "English"], "Pakistan": ["English"],
                         "India": ["English"], "Malaysia": ["Malaysian", "Bahasa"], "Indonesia": ["Bahasa"],
                         "Belgium": ["French", "Flemish"], "Switzerland": ["French", "Italian"],
                         "Afghanistan": ["Dari", "Persian"], "Cyprus": ["Turkish"], "Senegal": ["Wolof"],
                         "Sri Lanka": ["Tamil"], "Morocco": ["French"], "Algeria": ["French"], "Tunisia": ["French"],
                         "Lebanon": ["French"], "Bangladesh": ["Bangla"], "Ireland": ["Irish"], "Canada": ["French"],
                         "New Zealand": ["Maori"], "Uganda": ["Swahili"]}  # by country: other official languages
NAMES = ("Tom", "Sara", "Ben", "Mia", "Leo", "Anna", "Sam", "Lily", "Max", "Emma", "Noah", "Zoe")
OBJECTS = ("apples", "books", "pencils", "marbles", "stickers", "cookies", "balloons", "stamps", "shells", "cards")
THEN_SAY = 'Explain your steps, then write "The answer is" followed by the number.'
FIRST_FACTS = "Start with the answer, then tell me three facts about the {about}."
FIRST_PARAGRAPH = "Give the answer first, then write a short paragraph about the {about}."
FIRST_WHY = "Start with the answer, then explain why the {about} is important."

# kind -> (form, templates with {w}, {w: answer}, {answer: aliases}, {w: aliases})
WORD_KINDS = {
    "capital": ("first", [f"What is the capital of {{w}}? {t.format(about='city')}"
                          for t in (FIRST_FACTS, FIRST_PARAGRAPH, FIRST_WHY)],
                CAPITALS | MORE_CAPITALS, CAPITAL_ALIASES | MORE_CAPITAL_ALIASES, {}),
    "city_country": ("first", [f"In which country is the city of {{w}}? {t.format(about=a)}"
                               for t, a in ((FIRST_FACTS, "country"), (FIRST_PARAGRAPH, "city"))],
                     CITIES | MORE_CITIES, CITY_ALIASES | MORE_CITY_ALIASES, {}),
    "language": ("first", [f"What language is spoken in {{w}}? {t.format(about='language')}"
                           for t in (FIRST_FACTS, FIRST_PARAGRAPH)], LANGUAGES | MORE_LANGUAGES,
                 LANGUAGE_ALIASES, MORE_LANGUAGE_ALIASES),
    "language_last": ("last", [f"What language do people speak in {{w}}? First write two sentences about the {t} of "
                               '{w}. Then end with "The answer is" followed by the name of the language.'
                               for t in ("culture", "history")], LANGUAGES | MORE_LANGUAGES,
                      LANGUAGE_ALIASES, MORE_LANGUAGE_ALIASES),
    "capital_history": ("last", [f"Which city is the capital of {{w}}? First write two sentences about the {t} of "
                                 '{w}. Then end with "The answer is" followed by the name of the capital city.'
                                 for t in ("history", "culture")],
                        CAPITALS | MORE_CAPITALS, CAPITAL_ALIASES | MORE_CAPITAL_ALIASES, {}),
    "capital_last": ("last", ['Tell me about {w} in two sentences. Then finish with "The answer is" and the name of '
                              'its capital city.'], CAPITALS | MORE_CAPITALS, CAPITAL_ALIASES | MORE_CAPITAL_ALIASES,
                     {}),
}
WORD_PROBLEMS = (f"{{name}} has {{a}} {{obj}} and gets {{b}} more. How many {{obj}} does {{name}} have now? {THEN_SAY}",
                 f"There are {{a}} {{obj}} in a box. {{name}} puts {{b}} more {{obj}} in the box. How many {{obj}} are "
                 f"in the box now? {THEN_SAY}")
KINDS = (*WORD_KINDS, "word_problem")
# Dropped after measuring the target (scripts/bench/qa_accuracy.py, docs/longform-task.md): under 55% correct.
# Test pool, 96 new tokens: capital_last 15% (it describes the country and stops), word_problem 23% ("2 * 4 = 8
# books", and 0% for the "in a box" template).
DROPPED: tuple[str, ...] = ("capital_last", "word_problem")
SHIPPED = tuple(k for k in KINDS if k not in DROPPED)


@dataclass
class MakeLongformConfig:
    """One generation of the long-form pools."""

    out: str = str(LONGFORM_DIR)  # directory for distill.jsonl, calib.jsonl and test.jsonl
    seed: int = 24  # seed of the word problems' names and objects and of the entities' pools
    fractions: list[float] = field(default_factory=lambda: [0.5, 0.25, 0.25])  # share of each kind's entities in
    #   distill, calib and test (summing to 1)
    numbers: list[int] = field(default_factory=lambda: [2, 12])  # word problems: both addends in [lo, hi]
    kinds: list[str] = field(default_factory=lambda: list(SHIPPED), metadata={"choices": KINDS})  # kinds written


def entities(kind: str, cfg: MakeLongformConfig) -> list[tuple]:
    """A kind's entities in a fixed order: its table's words, or the word problems' (a, b) pairs."""
    if kind == "word_problem":
        lo, hi = cfg.numbers
        return [(a, b) for a in range(lo, hi + 1) for b in range(lo, hi + 1)]
    return [(w,) for w in WORD_KINDS[kind][2]]


def entity_rows(kind: str, entity: tuple, rng: random.Random) -> list[dict]:
    """Every prompt of one entity (one per template)."""
    if kind == "word_problem":
        a, b = entity
        return [_row(kind, "last", t.format(name=rng.choice(NAMES), obj=rng.choice(OBJECTS), a=a, b=b), str(a + b))
                for t in WORD_PROBLEMS]
    form, templates, table, by_answer, by_word = WORD_KINDS[kind]
    w = entity[0]
    aliases = list(dict.fromkeys(by_answer.get(table[w], []) + by_word.get(w, [])))
    return [_row(kind, form, t.format(w=w), table[w], aliases) for t in templates]


def _row(kind: str, form: str, prompt: str, answer: str, aliases: list[str] | None = None) -> dict:
    return {"kind": kind, "form": form, "prompt": prompt, "answers": [answer] + list(aliases or []), "raw": True}


def pools(cfg: MakeLongformConfig) -> dict[str, list[dict]]:
    """distill, calib and test: each kind's entities shuffled and cut by ``fractions``; an entity's prompts stay in
    its pool.  Ids ``lf-<kind>-NNN`` number a kind's rows in entity order."""
    if len(cfg.fractions) != len(POOLS) or abs(sum(cfg.fractions) - 1) > 1e-9 or min(cfg.fractions) <= 0:
        raise ValueError(f"fractions {cfg.fractions}: expected {len(POOLS)} positive shares summing to 1")
    groups: dict[str, list[list[dict]]] = {p: [] for p in POOLS}
    for kind in cfg.kinds:
        rng = random.Random(f"{cfg.seed}-{kind}")
        ents = entities(kind, cfg)
        rows = [entity_rows(kind, e, rng) for e in ents]
        n = 0
        for per in rows:
            for r in per:
                r["prompt_id"], n = f"lf-{kind}-{n:03d}", n + 1
        order = list(range(len(ents)))
        rng.shuffle(order)
        cuts = [round(sum(cfg.fractions[:i + 1]) * len(ents)) for i in range(len(POOLS))]
        for p, lo, hi in zip(POOLS, [0] + cuts[:-1], cuts):
            groups[p].append([r for i in sorted(order[lo:hi]) for r in rows[i]])
    return {p: [{"prompt_id": r.pop("prompt_id"), **r} for r in spread(g)] for p, g in groups.items()}


def parse_args(argv: list[str] | None = None) -> MakeLongformConfig:
    return config.parse(MakeLongformConfig, argv, prog="python -m scripts.data.longform",
                        description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
    cfg = parse_args(argv)
    return write_splits(cfg.out, pools(cfg))


if __name__ == "__main__":
    main()

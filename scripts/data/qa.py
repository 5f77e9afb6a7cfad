"""Write the short-answer QA task (wisv/assets/qa/{calib,test}.jsonl) from the word lists below: seeded, offline.

Each row: prompt_id, prompt (one user turn, "raw": the chat template alone frames it), answer, answers (aliases) and
kind.  The split is a seeded shuffle within each kind (CALIB_FRACTION to calib), so both splits hold every kind, and
each split spreads its kinds evenly over the file, so that the first N prompts are a fair sample."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import config
from wisv.tasks.jsonl import write_splits
from wisv.tasks.qa import QA_DIR

ONE_WORD = "Answer with one word."
NUMBER = "Answer with a number."

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Germany": "Berlin", "Spain": "Madrid",
            "Russia": "Moscow", "China": "Beijing", "Egypt": "Cairo", "Kenya": "Nairobi", "Canada": "Ottawa",
            "Australia": "Canberra", "Greece": "Athens", "Portugal": "Lisbon", "Ireland": "Dublin",
            "Norway": "Oslo", "Sweden": "Stockholm", "Finland": "Helsinki", "Denmark": "Copenhagen",
            "Austria": "Vienna", "Poland": "Warsaw", "Hungary": "Budapest", "Belgium": "Brussels",
            "the Netherlands": "Amsterdam", "Thailand": "Bangkok", "South Korea": "Seoul", "India": "New Delhi",
            "Peru": "Lima", "Argentina": "Buenos Aires", "Chile": "Santiago", "Cuba": "Havana",
            "Mexico": "Mexico City", "the United Kingdom": "London", "Turkey": "Ankara", "Iran": "Tehran",
            "Iraq": "Baghdad", "Vietnam": "Hanoi", "the Philippines": "Manila", "Indonesia": "Jakarta",
            "Ukraine": "Kyiv", "the Czech Republic": "Prague", "Romania": "Bucharest", "Bulgaria": "Sofia",
            "Serbia": "Belgrade", "Croatia": "Zagreb", "Switzerland": "Bern", "Iceland": "Reykjavik",
            "Colombia": "Bogota", "Venezuela": "Caracas", "Ethiopia": "Addis Ababa", "Nigeria": "Abuja",
            "Morocco": "Rabat", "Saudi Arabia": "Riyadh", "Israel": "Jerusalem", "Lebanon": "Beirut",
            "Syria": "Damascus", "Afghanistan": "Kabul", "Pakistan": "Islamabad", "Nepal": "Kathmandu",
            "Malaysia": "Kuala Lumpur", "New Zealand": "Wellington"}
CAPITAL_ALIASES = {"Kyiv": ["Kiev"], "Bogota": ["Bogotá"], "New Delhi": ["Delhi"]}
OPPOSITES = {"hot": "cold", "big": "small", "up": "down", "fast": "slow", "happy": "sad", "light": "dark",
             "tall": "short", "old": "young", "open": "closed", "left": "right", "wet": "dry", "hard": "soft",
             "full": "empty", "day": "night", "rich": "poor", "early": "late", "high": "low", "strong": "weak",
             "thick": "thin", "loud": "quiet", "inside": "outside", "win": "lose", "buy": "sell", "push": "pull",
             "start": "finish", "true": "false", "good": "bad", "clean": "dirty", "heavy": "light",
             "long": "short", "north": "south", "east": "west", "yes": "no", "love": "hate", "above": "below",
             "black": "white", "first": "last", "sweet": "sour", "cheap": "expensive", "near": "far",
             "alive": "dead", "come": "go", "laugh": "cry", "remember": "forget", "friend": "enemy",
             "question": "answer", "before": "after", "always": "never", "boy": "girl", "king": "queen"}
OPPOSITE_ALIASES = {"closed": ["shut"], "finish": ["end", "stop"], "quiet": ["soft", "silent"], "old": ["new"],
                    "young": ["new"], "big": ["large"], "small": ["little", "tiny"], "sad": ["unhappy"],
                    "lose": ["loss"], "short": ["small"], "poor": ["broke"], "weak": ["feeble"],
                    "dead": ["deceased"], "empty": ["vacant"], "go": ["leave"], "answer": ["reply"],
                    "sour": ["bitter"]}
PLURALS = {"child": "children", "mouse": "mice", "man": "men", "woman": "women", "tooth": "teeth", "foot": "feet",
           "goose": "geese", "person": "people", "ox": "oxen", "sheep": "sheep", "fish": "fish", "deer": "deer",
           "knife": "knives", "leaf": "leaves", "wolf": "wolves", "wife": "wives", "life": "lives",
           "half": "halves", "box": "boxes", "bus": "buses", "glass": "glasses", "church": "churches",
           "baby": "babies", "city": "cities", "lady": "ladies", "story": "stories", "potato": "potatoes",
           "tomato": "tomatoes", "hero": "heroes", "cat": "cats", "dog": "dogs", "book": "books", "car": "cars",
           "tree": "trees", "house": "houses", "apple": "apples", "chair": "chairs", "table": "tables",
           "bird": "birds", "day": "days", "key": "keys", "toy": "toys", "boy": "boys", "watch": "watches",
           "dish": "dishes", "fox": "foxes", "class": "classes", "party": "parties", "cactus": "cacti"}
PLURAL_ALIASES = {"fish": ["fishes"], "cactus": ["cactuses"], "person": ["persons"]}
PAST = {"go": "went", "run": "ran", "eat": "ate", "see": "saw", "write": "wrote", "take": "took", "give": "gave",
        "come": "came", "swim": "swam", "sing": "sang", "drink": "drank", "speak": "spoke", "break": "broke",
        "drive": "drove", "fly": "flew", "know": "knew", "grow": "grew", "throw": "threw", "buy": "bought",
        "bring": "brought", "think": "thought", "teach": "taught", "catch": "caught", "sleep": "slept",
        "keep": "kept", "feel": "felt", "leave": "left", "meet": "met", "sit": "sat", "stand": "stood",
        "tell": "told", "sell": "sold", "find": "found", "make": "made", "play": "played", "walk": "walked",
        "jump": "jumped", "talk": "talked", "cook": "cooked", "dance": "danced"}
COMPARATIVE = {"big": "bigger", "small": "smaller", "tall": "taller", "short": "shorter", "fast": "faster",
               "slow": "slower", "old": "older", "young": "younger", "long": "longer", "strong": "stronger",
               "cold": "colder", "hot": "hotter", "warm": "warmer", "happy": "happier", "easy": "easier",
               "heavy": "heavier", "busy": "busier", "funny": "funnier", "good": "better", "bad": "worse",
               "far": "farther", "high": "higher", "low": "lower", "deep": "deeper", "wide": "wider",
               "large": "larger", "nice": "nicer", "thin": "thinner", "fat": "fatter", "sad": "sadder",
               "loud": "louder", "quiet": "quieter", "clean": "cleaner", "dark": "darker", "bright": "brighter",
               "rich": "richer", "poor": "poorer", "cheap": "cheaper", "soft": "softer", "hard": "harder"}
COMPARATIVE_ALIASES = {"far": ["further"], "old": ["elder"]}
LANGUAGES = {"Spain": "Spanish", "France": "French", "Germany": "German", "Italy": "Italian",
             "Portugal": "Portuguese", "Russia": "Russian", "Japan": "Japanese", "China": "Chinese",
             "Greece": "Greek", "Poland": "Polish", "Turkey": "Turkish", "Sweden": "Swedish",
             "Norway": "Norwegian", "Finland": "Finnish", "Denmark": "Danish", "the Netherlands": "Dutch",
             "Hungary": "Hungarian", "Brazil": "Portuguese", "Mexico": "Spanish", "Argentina": "Spanish",
             "England": "English", "Australia": "English", "South Korea": "Korean", "Thailand": "Thai",
             "Vietnam": "Vietnamese", "Iran": "Persian", "Israel": "Hebrew", "Ukraine": "Ukrainian",
             "Romania": "Romanian", "Czech Republic": "Czech"}
LANGUAGE_ALIASES = {"Chinese": ["Mandarin"], "Persian": ["Farsi"]}
SYMBOLS = {"gold": "Au", "silver": "Ag", "iron": "Fe", "oxygen": "O", "hydrogen": "H", "carbon": "C",
           "nitrogen": "N", "sodium": "Na", "potassium": "K", "copper": "Cu", "lead": "Pb", "helium": "He",
           "calcium": "Ca", "zinc": "Zn", "mercury": "Hg", "tin": "Sn", "sulfur": "S", "chlorine": "Cl",
           "neon": "Ne", "uranium": "U"}
LETTER_WORDS = ["apple", "banana", "cherry", "dog", "elephant", "forest", "garden", "house", "island", "jacket",
                "kitten", "lemon", "mountain", "night", "orange", "pencil", "queen", "river", "sun", "tiger",
                "umbrella", "violin", "window", "yellow", "zebra", "bread", "castle", "dragon", "eagle", "flower",
                "guitar", "honey", "igloo", "jungle", "kite", "ladder", "mirror", "nest", "ocean", "piano",
                "rabbit", "snake", "table", "unicorn", "valley", "water", "yogurt", "zoo", "candle", "desert",
                "engine", "feather", "giraffe", "hammer", "insect", "jelly", "kettle", "lion", "monkey", "needle",
                "basket", "carrot", "doctor", "finger", "gold", "horse", "iron", "jewel", "kangaroo", "lamp",
                "marble", "nurse", "owl", "parrot", "rocket", "silver", "tomato", "village", "wagon", "yacht"]
DEMONYMS = {"France": "French", "Germany": "German", "Italy": "Italian", "Spain": "Spanish", "Japan": "Japanese",
            "China": "Chinese", "Canada": "Canadian", "Mexico": "Mexican", "Brazil": "Brazilian",
            "Russia": "Russian", "India": "Indian", "Egypt": "Egyptian", "Greece": "Greek", "Ireland": "Irish",
            "Sweden": "Swedish", "Norway": "Norwegian", "Poland": "Polish", "Turkey": "Turkish",
            "Australia": "Australian", "Kenya": "Kenyan"}
DEMONYM_ALIASES = {"Sweden": ["Swede"], "Poland": ["Pole"], "Turkey": ["Turk"], "Spain": ["Spaniard"],
                   "France": ["Frenchman", "Frenchwoman"], "Ireland": ["Irishman"]}
CITIES = {"Paris": "France", "Tokyo": "Japan", "Rome": "Italy", "Berlin": "Germany", "Madrid": "Spain",
          "Moscow": "Russia", "Cairo": "Egypt", "Sydney": "Australia", "Toronto": "Canada", "Mumbai": "India",
          "Barcelona": "Spain", "Milan": "Italy", "Munich": "Germany", "Lisbon": "Portugal", "Athens": "Greece",
          "Istanbul": "Turkey", "Rio de Janeiro": "Brazil", "Shanghai": "China", "Osaka": "Japan",
          "Amsterdam": "the Netherlands", "Dublin": "Ireland", "Vienna": "Austria", "Chicago": "the United States",
          "Los Angeles": "the United States", "Manchester": "England"}
CITY_ALIASES = {"the United States": ["USA", "US", "United States of America", "America"],
                "the Netherlands": ["Holland"], "England": ["United Kingdom", "UK", "Britain"]}


# kind -> (question with {w}, {w: answer}, extra accepted answers by answer, extra accepted answers by w)
WORD_KINDS: dict[str, tuple[str, dict[str, str], dict[str, list[str]], dict[str, list[str]]]] = {
    "capital": (f"What is the capital of {{w}}? {ONE_WORD}", CAPITALS, CAPITAL_ALIASES, {}),
    "opposite": (f'What is the opposite of "{{w}}"? {ONE_WORD}', OPPOSITES, OPPOSITE_ALIASES, {}),
    "plural": (f'What is the plural of "{{w}}"? {ONE_WORD}', PLURALS, {}, PLURAL_ALIASES),
    "past_tense": (f'What is the past tense of the verb "{{w}}"? {ONE_WORD}', PAST, {}, {}),
    "comparative": (f'What is the comparative form of "{{w}}"? {ONE_WORD}', COMPARATIVE, {}, COMPARATIVE_ALIASES),
    "language": (f"What language is spoken in {{w}}? {ONE_WORD}", LANGUAGES, LANGUAGE_ALIASES, {}),
    "symbol": ("What is the chemical symbol for {w}?", SYMBOLS, {}, {}),
    "first_letter": ('What is the first letter of the word "{w}"? Answer with one letter.',
                     {w: w[0] for w in LETTER_WORDS}, {}, {}),
    "demonym": (f"What do you call a person from {{w}}? {ONE_WORD}", DEMONYMS, {}, DEMONYM_ALIASES),
    "city_country": (f"In which country is the city of {{w}}? {ONE_WORD}", CITIES, CITY_ALIASES, {}),
}


def word_rows(kind: str) -> list[dict]:
    """One question per entry of a word kind's table, in table order."""
    template, table, by_answer, by_word = WORD_KINDS[kind]
    return [_row(kind, template.format(w=w), a, by_answer.get(a, []) + by_word.get(w, [])) for w, a in table.items()]


def rows_larger(rng: random.Random, n: int) -> list[dict]:
    out = []
    for a, b in _distinct_pairs(rng, n, 2, 99):
        out.append(_row("larger", f"Which is larger, {a} or {b}? {NUMBER}", str(max(a, b))))
    return out


def rows_addition(rng: random.Random, n: int) -> list[dict]:
    return [_row("addition", f"What is {a} + {b}? {NUMBER}", str(a + b)) for a, b in _distinct_pairs(rng, n, 1, 10)]


def rows_next_number(rng: random.Random, n: int) -> list[dict]:
    return [_row("next_number", f"What number comes after {a}? {NUMBER}", str(a + 1))
            for a in rng.sample(range(2, 99), n)]


def _distinct_pairs(rng: random.Random, n: int, lo: int, hi: int) -> list[tuple[int, int]]:
    """``n`` pairs of two different numbers from [lo, hi], no pair twice in either order, each in a random order."""
    pairs = rng.sample([(a, b) for a in range(lo, hi + 1) for b in range(a + 1, hi + 1)], n)
    return [(a, b) if rng.random() < 0.5 else (b, a) for a, b in pairs]


def _row(kind: str, prompt: str, answer: str, aliases: list[str] | None = None) -> dict:
    return {"kind": kind, "prompt": prompt, "answer": answer, "answers": [answer] + list(aliases or []), "raw": True}


KINDS: dict[str, Callable[[random.Random], list[dict]]] = {
    **{k: (lambda rng, k=k: word_rows(k)) for k in WORD_KINDS},
    "larger": lambda rng: rows_larger(rng, 30), "addition": lambda rng: rows_addition(rng, 40),
    "next_number": lambda rng: rows_next_number(rng, 20)}
# Dropped after round 1 (docs/qa-task.md): the target answered under 55% of them (past tense 20%, comparative 28%,
# next number 45%, demonym 50%, larger of two numbers 50%).
DROPPED = ("past_tense", "comparative", "demonym", "larger", "next_number")
SHIPPED = tuple(k for k in KINDS if k not in DROPPED)


@dataclass
class MakeQAConfig:
    """One generation of the QA splits."""

    out: str = str(QA_DIR)  # directory for calib.jsonl and test.jsonl
    seed: int = 15  # seed of the drawn numbers and of the split
    calib_fraction: float = 0.6  # fraction of each kind that goes to calib (the rest to test), in (0, 1)
    kinds: list[str] = field(default_factory=lambda: list(SHIPPED),
                             metadata={"choices": tuple(KINDS)})  # question kinds written (default: the shipped ones)


def all_rows(seed: int, kinds: list[str]) -> list[dict]:
    """Every question of ``kinds`` (each kind drawing from its own seeded generator), ids ``qa-<kind>-NN``."""
    groups = [KINDS[k](random.Random(f"{seed}-{k}")) for k in kinds]
    return [{"prompt_id": f"qa-{r['kind']}-{i:02d}", **r} for g in groups for i, r in enumerate(g)]


def split(rows: list[dict], seed: int, calib_fraction: float) -> dict[str, list[dict]]:
    """calib and test: a seeded shuffle of each kind, its first ``calib_fraction`` to calib."""
    if not 0 < calib_fraction < 1:
        raise ValueError(f"calib fraction {calib_fraction}: expected in (0, 1)")
    rng, out = random.Random(seed + 1), {"calib": [], "test": []}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        group = [r for r in rows if r["kind"] == kind]
        rng.shuffle(group)
        cut = round(len(group) * calib_fraction)
        out["calib"].append(group[:cut])
        out["test"].append(group[cut:])
    return {name: spread(groups) for name, groups in out.items()}


def spread(groups: list[list[dict]]) -> list[dict]:
    """The groups' rows merged so that each kind is spread evenly over the file (row i of a group of n sits at
    fraction (i + 0.5) / n; ties in group order): every prefix (``--prompts N``) holds the kinds in proportion."""
    keyed = [((i + 0.5) / len(g), gi, r) for gi, g in enumerate(groups) for i, r in enumerate(g)]
    return [r for *_, r in sorted(keyed, key=lambda t: t[:2])]


def parse_args(argv: list[str] | None = None) -> MakeQAConfig:
    return config.parse(MakeQAConfig, argv, prog="python -m scripts.data.qa", description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
    cfg = parse_args(argv)
    return write_splits(cfg.out, split(all_rows(cfg.seed, cfg.kinds), cfg.seed, cfg.calib_fraction))


if __name__ == "__main__":
    main()

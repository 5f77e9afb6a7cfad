"""Deterministic toy GSM8K-style arithmetic word problems: generator, fixed splits and answer checker.

Each problem has 2-4 steps (add, subtract, multiply), names and objects, many paraphrase
templates, and a chain-of-thought answer ending in ``#### N``.  Every problem draws a
*preferred wording style* that its solution follows for 80% of the steps, so a weak drafter
makes harmless wording mismatches as well as critical number mismatches.

Splits are fixed by seed: ``train`` (model training), ``calib`` (labeling traces for the
decision head) and ``test`` (the evaluation set the whole project uses).  A problem's split
is decided by a hash of its question text, so no question text appears in two splits.
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

NAMES = [("Tom", "he", "his"), ("Anna", "she", "her"), ("Liam", "he", "his"), ("Mia", "she", "her"),
         ("Noah", "he", "his"), ("Emma", "she", "her"), ("Omar", "he", "his"), ("Sara", "she", "her"),
         ("Ben", "he", "his"), ("Lucy", "she", "her"), ("Ivan", "he", "his"), ("Nora", "she", "her"),
         ("Ravi", "he", "his"), ("Zoe", "she", "her"), ("Leo", "he", "his"), ("Ella", "she", "her"),
         ("Sam", "he", "his"), ("Maya", "she", "her"), ("Jack", "he", "his"), ("Lena", "she", "her"),
         ("Hugo", "he", "his"), ("Ada", "she", "her"), ("Max", "he", "his"), ("Iris", "she", "her")]
OBJECTS = ["apples", "marbles", "stickers", "books", "coins", "pencils", "cookies", "cards",
           "shells", "stamps", "balloons", "candies", "toys", "flowers", "eggs", "beads",
           "buttons", "rocks", "cupcakes", "oranges", "crayons", "ribbons", "blocks", "nuts"]
FRIENDS = ["a friend", "a neighbor", "a classmate", "a cousin", "the teacher", "a brother", "a sister"]

START = ["{N} has {a} {o}.", "{N} owns {a} {o}.", "{N} starts with {a} {o}.",
         "There are {a} {o} in {N}'s bag.", "{N} collected {a} {o}.", "{N} keeps {a} {o} in a box."]
ADD = ["{P} buys {b} more {o}.", "{P} finds {b} more {o}.", "{F} gives {N} {b} more {o}.",
       "{P} gets {b} more {o} from {F}.", "{P} picks up {b} more {o}.", "{P} receives {b} extra {o}."]
SUB = ["{P} gives {b} {o} to {F}.", "{P} loses {b} {o}.", "{P} uses {b} of the {o}.",
       "{P} sells {b} {o}.", "{F} takes {b} {o} away.", "{P} drops {b} {o} on the way."]
MUL = {2: ["The number of {o} doubles.", "{P} doubles the {o}.", "{P} ends up with twice as many {o}."],
       3: ["The number of {o} triples.", "{P} triples the {o}.", "{P} ends up with three times as many {o}."]}
QUESTION = ["How many {o} does {N} have now?", "How many {o} does {N} have at the end?",
            "How many {o} are left with {N}?", "What is the final number of {o} {N} has?"]

# Answer-side wording.  A style is one choice per slot; a problem prefers one style.
ANS_START = ["{N} starts with {a} {o}.", "At first {N} has {a} {o}.", "{N} begins with {a} {o}."]
ANS_STEP = {
    "add": ["{P} gets {b} more", "{P} adds {b}", "After getting {b} more"],
    "sub": ["{P} gives away {b}", "{P} loses {b}", "After losing {b}"],
    "mul": ["The amount is multiplied by {b}", "{P} multiplies by {b}", "After multiplying by {b}"],
}
ANS_LINK = [", so {p} has {expr} {o}.", ", which gives {expr} {o}.", ", now {p} has {expr} {o}.",
            ", that makes {expr} {o}."]
ANS_END = ["The answer is {y}.", "So {N} has {y} {o}.", "{N} has {y} {o} in the end."]
STYLE_FOLLOW = 0.8  # fraction of solution slots that follow the problem's preferred style
SPLIT_SEEDS = {"train": 1, "calib": 2, "test": 3}
SPLIT_SIZES = {"train": 60000, "calib": 600, "test": 500}
MAX_VALUE = 99  # every intermediate value stays in [1, MAX_VALUE]


@dataclass(frozen=True)
class Problem:
    """One toy problem: question, chain-of-thought answer and the integer result."""

    pid: str  # stable id, e.g. "test-0007"
    question: str
    solution: str  # chain of thought ending in "#### N"
    answer: int

    @property
    def prompt(self) -> str:
        """Text the models are conditioned on; the solution follows it."""
        return format_prompt(self.question)


def format_prompt(question: str) -> str:
    """The prompt format shared by training, evaluation and the testbed."""
    return f"Question: {question}\nAnswer:"


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def _pick(rng: random.Random, options: list[str], preferred: int, follow: float | None) -> str:
    """Follow the preferred option with probability ``follow``, else any other; None: uniform per slot."""
    if follow is None:
        return rng.choice(options)
    if rng.random() < follow or len(options) == 1:
        return options[preferred % len(options)]
    return rng.choice([o for i, o in enumerate(options) if i != preferred % len(options)])


def _steps(rng: random.Random, start: int, n_steps: int) -> list[tuple[str, int, int]]:
    """Draw (op, operand, result) steps keeping every value within [1, MAX_VALUE]."""
    steps, x = [], start
    for _ in range(n_steps):
        ops = ["add", "sub"] + (["mul"] if x * 2 <= MAX_VALUE else [])
        op = rng.choice(ops)
        if op == "add" and x < MAX_VALUE:
            b = rng.randint(1, min(20, MAX_VALUE - x))
            y = x + b
        elif op == "mul":
            b = 3 if x * 3 <= MAX_VALUE and rng.random() < 0.4 else 2
            y = x * b
        elif x > 1:
            op, b = "sub", rng.randint(1, min(20, x - 1))
            y = x - b
        else:
            op, b = "add", rng.randint(1, 20)
            y = x + b
        steps.append((op, b, y))
        x = y
    return steps


def make_problem(rng: random.Random, pid: str, style_follow: float | None = STYLE_FOLLOW) -> Problem:
    """Generate one problem from a seeded random generator.

    ``style_follow=None`` draws every wording slot uniformly (no per-problem style): the built-in
    drafter is trained that way, so it cannot infer a problem's style from the answer so far and
    makes harmless wording mismatches against the target.
    """
    name, pron, _ = rng.choice(NAMES)
    obj, friend = rng.choice(OBJECTS), rng.choice(FRIENDS)
    start = rng.randint(2, 30)
    steps = _steps(rng, start, rng.randint(2, 4))
    fmt = {"N": name, "P": _cap(pron), "p": pron, "o": obj, "F": friend}
    q = [rng.choice(START).format(a=start, **fmt)]
    for op, b, _ in steps:
        tmpl = rng.choice(MUL[b]) if op == "mul" else rng.choice(ADD if op == "add" else SUB)
        q.append(_cap(tmpl.format(b=b, **{**fmt, "F": friend})))
    q.append(rng.choice(QUESTION).format(**fmt))
    style = rng.randrange(12)  # preferred option index per slot, derived from one draw
    a = [_pick(rng, ANS_START, style, style_follow).format(a=start, **fmt)]
    x = start
    for op, b, y in steps:
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        head = _pick(rng, ANS_STEP[op], style // 4, style_follow).format(b=b, **fmt)
        link = _pick(rng, ANS_LINK, style, style_follow).format(expr=f"{x} {sym} {b} = {y}", **fmt)
        a.append(head + link)
        x = y
    a.append(_pick(rng, ANS_END, style // 4, style_follow).format(y=x, **fmt))
    return Problem(pid=pid, question=" ".join(q), solution=" ".join(a) + f" #### {x}", answer=x)


def _split_of(question: str) -> str:
    """Assign a question text to a split by hash, so splits never share a question."""
    h = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) % 100
    return "test" if h < 2 else "calib" if h < 4 else "train"


def load_split(split: str, n: int | None = None, style_follow: float | None = STYLE_FOLLOW) -> list[Problem]:
    """Return the first ``n`` problems of a fixed split (all of it when ``n`` is None).

    ``style_follow`` changes the solutions' wording (see make_problem); evaluation uses the default.
    """
    if split not in SPLIT_SEEDS:
        raise ValueError(f"unknown split {split!r}; choose one of {sorted(SPLIT_SEEDS)}")
    size = SPLIT_SIZES[split] if n is None else n
    if size > SPLIT_SIZES[split]:
        raise ValueError(f"split {split!r} has {SPLIT_SIZES[split]} problems; asked for {size}")
    rng, out, seen = random.Random(SPLIT_SEEDS[split]), [], set()
    while len(out) < size:
        p = make_problem(rng, pid="", style_follow=style_follow)
        if _split_of(p.question) != split or p.question in seen:
            continue
        seen.add(p.question)
        out.append(Problem(f"{split}-{len(out):04d}", p.question, p.solution, p.answer))
    return out


_ANSWER_RE = re.compile(r"####\s*(-?\d+)")


def extract_answer(text: str) -> int | None:
    """The integer after the first ``####`` in generated text, or None if absent."""
    m = _ANSWER_RE.search(text)
    return int(m.group(1)) if m else None


def is_correct(text: str, answer: int) -> bool:
    """The toy task's checker: exact match of the ``#### N`` answer."""
    return extract_answer(text) == answer

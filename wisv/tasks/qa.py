"""The short-answer QA task for real chat pairs: its calib/test splits, answer normalisation and checker, and the one
``check_answer`` that picks the QA checker (a list of accepted answers), the toy ``#### N`` checker (an integer) or
GSM8K's rule (a reference solution ending ``#### N``: wisv.tasks.scoring).
The checker finds an answer where a sentence states it first (the QA task, the long-form task's answer-first rows)
or in a closing "The answer is ..." (the long-form task's answer-last rows, as GSM8K ends); a yes/no answer, and a
question's wrong options marked "!" in ``answers`` (the task suite's comparisons), are read in one place only (see
``is_correct``).  Pure: no torch."""
from __future__ import annotations

import numbers
import re
import unicodedata
from pathlib import Path

from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.numwords import words_to_digits
from wisv.tasks.scoring import GSM8K_MARK, gsm8k_correct
from wisv.tasks.toydata import is_correct as toy_is_correct

QA_DIR = Path(__file__).resolve().parents[1] / "assets" / "qa"
SPLITS = ("calib", "test")
ARTICLES = {"a", "an", "the"}
YES_NO = ("yes", "no")  # an answer that is one of these: the first word of the answer's sentence must be it
REJECT = "!"  # an answers entry "!mouse": an option the question offers that is wrong ("heavier, elephant or mouse?")
# Where a sentence states its answer: the text after the first of these ("The capital of France is Paris.").
_MARKER_RE = re.compile(r"\s(?:is|are|was|were|equals|makes)\s|=|:\s")
_WORD_RE = re.compile(r"\d+(?:[.:]\d+)+|[^\W_]+")  # 2.5 and 3:00 stay whole
_INT_RE = re.compile(r"\s*-?\d+\s*")  # a toy answer read back as text
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_INITIAL_END_RE = re.compile(r"(?:^|[\s.])[A-Z]\.$")  # a piece ending in a name's initial ("by J.")
_INITIALS_END_RE = re.compile(r"(?:^|[\s.])[A-Z]\.\s?[A-Z]\.$")  # ... in two of them ("by J. K.", "J.R.R.")
_INITIAL_START_RE = re.compile(r"[A-Z]\.")  # a piece opening with an initial ("K. Rowling")
_LIST_MARK_RE = re.compile(r"^(?:\d{1,2}[.)]|[-*\u2022])\s+")  # "1. ", "2) ", "- " opening a list item: not a sentence
_CLOSING_RE = re.compile(r"\bthe answer is\b:?", re.IGNORECASE)  # a closing statement of the answer


def split_path(split: str) -> Path:
    """The shipped JSONL of a split (``calib`` or ``test``)."""
    if split not in SPLITS:
        raise ValueError(f"QA split {split!r}: expected one of {SPLITS}")
    return QA_DIR / f"{split}.jsonl"


def load_split(split: str, n: int | None = None) -> list[dict]:
    """The first ``n`` rows (all if None) of a shipped split: prompt_id, prompt, answer, answers, kind, raw."""
    return read_jsonl(split_path(split))[:n]


def accepted(row: dict) -> list[str]:
    """A row's accepted answers: the canonical one (if the row has ``answer``) first, then ``answers``, without
    repeats."""
    first = [str(row["answer"])] if "answer" in row else []
    return list(dict.fromkeys(first + [str(a) for a in row.get("answers", [])]))


def normalise(text: str, keep_articles: bool = False) -> str:
    """Lower case, no punctuation (a point or colon between digits and a comma inside a number stay as 2.5 / 3:00 /
    1000), no articles (unless ``keep_articles``), number words as digits (``numwords``: "three thousand and
    five" -> 3005, "tenth" -> 10th), single spaces.  Unicode compatibility forms fold first (H₂O -> h2o)."""
    s = re.sub(r"(?<=\d),(?=\d{3})", "", unicodedata.normalize("NFKC", text).lower())
    words = [w for w in _WORD_RE.findall(s) if keep_articles or w not in ARTICLES]
    return " ".join(words_to_digits(words))


def answer_span(text: str) -> str:
    """The part of an output that states the answer: its first sentence, after the first 'is'/'are'/'='/': ' there."""
    return _MARKER_RE.split(_first_sentence(text), maxsplit=1)[-1]


def closing_span(text: str) -> str:
    """The part of an output after its last "The answer is" up to that sentence's end ("" if it has none); in
    "The answer is 8 + 7 = 15 apples." the part after the last "=" ("15 apples")."""
    found = list(_CLOSING_RE.finditer(text))
    if not found:
        return ""
    rest = text[found[-1].end():].strip()
    return next(iter(_sentences(rest)), "").rsplit("=", 1)[-1]


def _first_sentence(text: str) -> str:
    """The first sentence, without a list item's marker ("1. Rome is the capital." -> "Rome is the capital.")."""
    return next(iter(_sentences(_LIST_MARK_RE.sub("", text.strip()))), "")


def _sentences(text: str) -> list[str]:
    """The text's non-blank sentences: split after . ! ? and at line breaks, but kept whole across a name's initials
    ("J. K. Rowling", "J.R.R. Tolkien": a piece ending in two initials, or in one before another).  A lone initial
    before a word ends a sentence ("The symbol for carbon is C. It ...")."""
    out: list[str] = []
    for piece in (p for p in _SENTENCE_RE.split(text) if p.strip()):
        if out and _INITIAL_END_RE.search(out[-1]) and (_INITIALS_END_RE.search(out[-1])
                                                         or _INITIAL_START_RE.match(piece)):
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out


def _contains(hay: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {hay} "


def is_correct(text: str, answers: list[str]) -> bool:
    """Whether an output states one of the accepted answers: an answer is (as normalised words) in the answer span of
    the first sentence, or the first sentence starts with it followed by 'is'/'are' ("Paris is the capital ..."), or
    it is in the closing span (after the last "The answer is").  An answer that is only an article (the letter "a")
    is compared with the articles kept.

    Two kinds of rows read one place only, the closing span where the output has a closing "The answer is", else
    its first sentence: a yes/no answer (that place's first word must be it), and a row whose ``answers`` name the
    question's wrong options with a leading "!" (["elephant", "!mouse"]: the option that place states must be an
    accepted one, see ``_stated_option``)."""
    right = [a for a in answers if not a.startswith(REJECT)]
    wrong = [a[len(REJECT):] for a in answers if a.startswith(REJECT)]
    if wrong:
        return _stated_option(text, right + wrong) in {normalise(a) for a in right}
    return any(_yes_no(text, a) if normalise(a) in YES_NO else
               _states(text, a, keep_articles=not normalise(a)) or _closes(text, a, keep_articles=not normalise(a))
               for a in right)


def _statement(text: str) -> tuple[str, bool]:
    """Where a one-place row reads its answer: (the closing span, True) where the output has a closing "The answer
    is", else (its first sentence, False)."""
    if _CLOSING_RE.search(text):
        return closing_span(text), True
    return _first_sentence(text), False


def _yes_no(text: str, answer: str) -> bool:
    words = normalise(_statement(text)[0]).split()
    return bool(words) and words[0] == normalise(answer)


def _stated_option(text: str, options: list[str]) -> str | None:
    """The option (normalised) an output states: the first one in its closing span; else in its first sentence,
    the last one before the first 'is'/'are'/'=' ("Between a mouse and an elephant, the elephant is heavier"), or
    failing that the first one after it ("The heavier one is the elephant"; none after a leading "not"), or in a
    sentence without such a word the first one ("An elephant weighs more than a mouse").  An option matches with
    a plural -s or -es ("Dolphins are mammals")."""
    opts = [normalise(o) for o in options]
    place, closing = _statement(text)
    parts = [normalise(p) for p in _MARKER_RE.split(place, maxsplit=1)]
    if closing or len(parts) == 1:
        return _option_at(normalise(place), opts, last=False)
    head, span = parts
    return _option_at(head, opts, last=True) or (None if span.startswith("not ") else _option_at(span, opts, False))


def _option_at(hay: str, options: list[str], last: bool) -> str | None:
    """The option found first (or last) in normalised text, None if none is."""
    padded = f" {hay} "
    found = []  # (position, option)
    for o in filter(None, options):
        for form in (o, o + "s", o + "es"):
            pos = padded.rfind(f" {form} ") if last else padded.find(f" {form} ")
            if pos >= 0:
                found.append((pos, o))
    if not found:
        return None
    return (max if last else min)(found)[1]


def _closes(text: str, answer: str, keep_articles: bool) -> bool:
    span = normalise(closing_span(text), keep_articles)
    return not span.startswith("not ") and _contains(span, normalise(answer, keep_articles))


def _states(text: str, answer: str, keep_articles: bool) -> bool:
    span = normalise(answer_span(text), keep_articles)
    head = normalise(_MARKER_RE.split(_first_sentence(text), maxsplit=1)[0], keep_articles)
    want = normalise(answer, keep_articles)
    return not span.startswith("not ") and (_contains(span, want) or head == want)


def check_answer(text: str, answer) -> bool:
    """The checker a row's answer asks for: the toy task's ``#### N`` for an integer (or integer text), GSM8K's
    flexible extract (lm-evaluation-harness's rule, wisv.tasks.scoring) for a reference solution ending ``#### N``,
    the QA checker for a list of accepted answers (or one answer as other text)."""
    if isinstance(answer, numbers.Number) or (isinstance(answer, str) and _INT_RE.fullmatch(answer)):
        return toy_is_correct(text, int(answer))
    if isinstance(answer, str) and GSM8K_MARK in answer:
        return gsm8k_correct(text, answer, "flexible-extract")
    return is_correct(text, [answer] if isinstance(answer, str) else [str(a) for a in answer])


def answer_settled(prefix: str, answer) -> bool:
    """Whether ``check_answer`` accepts every text that starts with ``prefix``: the prefix's first sentence is complete
    (a further sentence starts inside the prefix, so no continuation can change it) and states an accepted answer.
    Always False for the toy task's integer answers and GSM8K's solutions (those checkers read the end of the text),
    and for yes/no rows and rows with "!" options (a closing "The answer is" may still come and overrule the first
    sentence)."""
    if isinstance(answer, numbers.Number) or (isinstance(answer, str) and (_INT_RE.fullmatch(answer)
                                                                          or GSM8K_MARK in answer)):
        return False  # these checkers read the end of the text
    pieces = _sentences(_LIST_MARK_RE.sub("", prefix.strip()))
    if len(pieces) < 2 or _INITIAL_END_RE.search(pieces[0]):
        return False  # the first sentence may go on (or, ending in an initial, be joined to the next)
    answers = [answer] if isinstance(answer, str) else [str(a) for a in answer]
    if any(a.startswith(REJECT) or normalise(a) in YES_NO for a in answers):
        return False  # these rows read a closing "The answer is" first, and one may still come
    return any(_states(prefix, a, keep_articles=not normalise(a)) for a in answers)


def accuracy(texts: list[str], answers: list) -> float:
    """Fraction of outputs that ``check_answer`` accepts (0 for no outputs)."""
    return sum(check_answer(t, a) for t, a in zip(texts, answers)) / max(1, len(texts))

"""The short-answer QA task for real chat pairs: its calib/test splits, answer normalisation and checker, and the one
``check_answer`` that picks the QA checker (a list of accepted answers) or the toy ``#### N`` checker (an integer).
The checker finds an answer where a sentence states it first (the QA task, the long-form task's answer-first rows)
or in a closing "The answer is ..." (the long-form task's answer-last rows, as GSM8K ends).  Pure: no torch."""
from __future__ import annotations

import numbers
import re
from pathlib import Path

from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.toydata import is_correct as toy_is_correct

QA_DIR = Path(__file__).resolve().parents[1] / "assets" / "qa"
SPLITS = ("calib", "test")
ARTICLES = {"a", "an", "the"}
UNITS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
         "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
         "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
# Where a sentence states its answer: the text after the first of these ("The capital of France is Paris.").
_MARKER_RE = re.compile(r"\s(?:is|are|was|were|equals|makes)\s|=|:\s")
_WORD_RE = re.compile(r"\d+(?:[.:]\d+)+|[^\W_]+")  # 2.5 and 3:00 stay whole
_INT_RE = re.compile(r"\s*-?\d+\s*")  # a toy answer read back as text
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
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


def _words_to_digits(words: list[str]) -> list[str]:
    """Number words as digits: 'twenty one' -> '21', 'seven' -> '7' (0-99)."""
    out: list[str] = []
    tens_last = False  # the last word was a tens word that a unit may complete
    for w in words:
        if tens_last and UNITS.get(w, 10) < 10:
            out[-1] = str(int(out[-1]) + UNITS[w])
        else:
            out.append(str(UNITS.get(w, TENS.get(w, w))))
        tens_last = w in TENS
    return out


def normalise(text: str, keep_articles: bool = False) -> str:
    """Lower case, no punctuation (a point or colon between digits and a comma inside a number stay as 2.5 / 3:00 /
    1000), no articles (unless ``keep_articles``), number words as digits, single spaces."""
    s = re.sub(r"(?<=\d),(?=\d{3})", "", text.lower())
    words = [w for w in _WORD_RE.findall(s) if keep_articles or w not in ARTICLES]
    return " ".join(_words_to_digits(words))


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
    return next((s for s in _SENTENCE_RE.split(rest) if s.strip()), "").rsplit("=", 1)[-1]


def _first_sentence(text: str) -> str:
    """The first sentence, without a list item's marker ("1. Rome is the capital." -> "Rome is the capital.")."""
    return next((s for s in _SENTENCE_RE.split(_LIST_MARK_RE.sub("", text.strip())) if s.strip()), "")


def _contains(hay: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {hay} "


def is_correct(text: str, answers: list[str]) -> bool:
    """Whether an output states one of the accepted answers: an answer is (as normalised words) in the answer span of
    the first sentence, or the first sentence starts with it followed by 'is'/'are' ("Paris is the capital ..."), or
    it is in the closing span (after the last "The answer is").  An answer that is only an article (the letter "a")
    is compared with the articles kept."""
    return any(_states(text, a, keep_articles=not normalise(a)) or _closes(text, a, keep_articles=not normalise(a))
               for a in answers)


def _closes(text: str, answer: str, keep_articles: bool) -> bool:
    span = normalise(closing_span(text), keep_articles)
    return not span.startswith("not ") and _contains(span, normalise(answer, keep_articles))


def _states(text: str, answer: str, keep_articles: bool) -> bool:
    span = normalise(answer_span(text), keep_articles)
    head = normalise(_MARKER_RE.split(_first_sentence(text), maxsplit=1)[0], keep_articles)
    want = normalise(answer, keep_articles)
    return not span.startswith("not ") and (_contains(span, want) or head == want)


def check_answer(text: str, answer) -> bool:
    """The checker a row's answer asks for: the toy task's ``#### N`` for an integer (or integer text), the QA checker
    for a list of accepted answers (or one answer as other text)."""
    if isinstance(answer, numbers.Number) or (isinstance(answer, str) and _INT_RE.fullmatch(answer)):
        return toy_is_correct(text, int(answer))
    return is_correct(text, [answer] if isinstance(answer, str) else [str(a) for a in answer])


def answer_settled(prefix: str, answer) -> bool:
    """Whether ``check_answer`` accepts every text that starts with ``prefix``: the prefix's first sentence is complete
    (a further sentence starts inside the prefix, so no continuation can change it) and states an accepted answer.
    Always False for the toy task's integer answers (that checker reads the end of the text)."""
    if isinstance(answer, numbers.Number) or (isinstance(answer, str) and _INT_RE.fullmatch(answer)):
        return False
    pieces = [s for s in _SENTENCE_RE.split(_LIST_MARK_RE.sub("", prefix.strip())) if s.strip()]
    if len(pieces) < 2:
        return False
    answers = [answer] if isinstance(answer, str) else [str(a) for a in answer]
    return any(_states(prefix, a, keep_articles=not normalise(a)) for a in answers)


def accuracy(texts: list[str], answers: list) -> float:
    """Fraction of outputs that ``check_answer`` accepts (0 for no outputs)."""
    return sum(check_answer(t, a) for t, a in zip(texts, answers)) / max(1, len(texts))

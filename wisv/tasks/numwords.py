"""Number words as digits, for the answer checker: "twenty one" -> 21, "three thousand four hundred and five" -> 3405,
"a hundred" -> 100 (the article is dropped before), "tenth" -> 10th, "twenty first" -> 21st.

Words come in lower case, one word a token (hyphens already split).  Two numbers side by side stay two ("seven
eight" -> 7 8, "nineteen sixty" -> 19 60): only the English grammar of one number joins words.  Pure: no torch."""
from __future__ import annotations

UNITS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
         "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
         "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
SCALES = {"thousand": 1000, "million": 1_000_000}  # "hundred" scales only the group below a thousand
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
            "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
            "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
            "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50, "sixtieth": 60, "seventieth": 70,
            "eightieth": 80, "ninetieth": 90, "hundredth": 100, "thousandth": 1000}


def ordinal(n: int) -> str:
    """1 -> 1st, 2 -> 2nd, 3 -> 3rd, 11 -> 11th, 22 -> 22nd."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def read_number(words: list[str], i: int) -> tuple[str | None, int]:
    """The number that the words from ``words[i]`` spell, as digits (an ordinal as "21st"), and the index after it;
    (None, i) where no number word starts there.  A digit token counts where a scale word follows ("4 thousand")."""
    total = group = 0  # total: the thousands and millions read; group: the part below the next scale word
    last = None  # the last word's role: unit, tens, hundred, scale
    j = i
    if j + 1 < len(words) and words[j].isdigit() and (words[j + 1] in SCALES or words[j + 1] == "hundred"):
        group, last, j = int(words[j]), "unit", j + 1
    while j < len(words):
        w = words[j]
        if w in UNITS and (last in (None, "hundred", "scale") or (last == "tens" and UNITS[w] < 10)):
            group, last = group + UNITS[w], "unit"
        elif w in TENS and last in (None, "hundred", "scale"):
            group, last = group + TENS[w], "tens"
        elif w == "hundred" and last in (None, "unit", "tens") and group < 100:
            group, last = (group or 1) * 100, "hundred"
        elif w in SCALES and last in (None, "unit", "tens", "hundred"):
            total, group, last = total + (group or 1) * SCALES[w], 0, "scale"
        elif w == "and" and last in ("hundred", "scale") and j + 1 < len(words) and _starts_group(words[j + 1]):
            j += 1
            continue
        elif w in ORDINALS and (last in (None, "hundred", "scale") or (last == "tens" and ORDINALS[w] < 10)):
            n = ORDINALS[w]
            value = (group or 1) * n if n >= 100 else total + group + n
            return ordinal(value), j + 1
        else:
            break
        j += 1
    return (str(total + group), j) if last else (None, i)


def _starts_group(word: str) -> bool:
    return word in UNITS or word in TENS or word in ORDINALS


def words_to_digits(words: list[str]) -> list[str]:
    """Every number spelled in words as digits, the other words unchanged."""
    out: list[str] = []
    i = 0
    while i < len(words):
        number, j = read_number(words, i)
        if number is None:
            out.append(words[i])
            i += 1
        else:
            out.append(number)
            i = j
    return out

"""The field's scoring rules for the named prompt sets (docs/datasets.md): GSM8K as lm-evaluation-harness scores its
``gsm8k`` task (strict match and flexible extract, then exact match against the ``#### N`` reference), and
translation by chrF and BLEU through sacrebleu.  Pure functions of texts.

The GSM8K rules are lm-evaluation-harness v0.4.9.2's (commit ad3f4d0cad1cfcdb815f1e795f7947e49ed9f2e9):
``lm_eval/tasks/gsm8k/gsm8k.yaml`` (the filters and the metric's settings), ``lm_eval/filters/extraction.py``
(``RegexFilter``: ``findall``, the ``group_select``-th match, its first non-empty group, stripped, else
``[invalid]``), ``lm_eval/filters/selection.py`` (``take_first``: the first of the sampled responses; one greedy
response here) and ``lm_eval/api/metrics.py`` (``exact_match_hf_evaluate``: each ``regexes_to_ignore`` removed from
prediction and reference in turn, then ``ignore_case`` lower-cases both).
"""
from __future__ import annotations

import re

# lm_eval/tasks/gsm8k/gsm8k.yaml, filter_list:
#   strict-match:     regex_pattern: "#### (\\-?[0-9\\.\\,]+)"                               then take_first
#   flexible-extract: regex_pattern: "(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select: -1       then take_first
STRICT_RE = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_RE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
RULES = {"strict-match": (STRICT_RE, 0), "flexible-extract": (FLEXIBLE_RE, -1)}  # filter name -> (regex, group_select)
# metric_list: exact_match with ignore_case: true, ignore_punctuation: false and
#   regexes_to_ignore: [",", "\\$", "(?s).*#### ", "\\.$"]   (applied in this order)
IGNORE_RES = (",", r"\$", r"(?s).*#### ", r"\.$")
FALLBACK = "[invalid]"  # RegexFilter's answer when nothing matches
GSM8K_MARK = "####"  # a GSM8K reference solution ends in "#### N"


def extract(text: str, rule: str) -> str:
    """A response's answer as the rule's filter extracts it (``FALLBACK`` when the regex finds nothing)."""
    regex, group = RULES[rule]
    found = regex.findall(text)
    if not found:
        return FALLBACK
    pick = found[group]
    if isinstance(pick, tuple):  # several groups: the first one that matched
        pick = next((g for g in pick if g), FALLBACK)
    return pick.strip()


def normalise(text: str) -> str:
    """exact_match's view of a text: each ignored regex removed in turn, then lower case."""
    for pattern in IGNORE_RES:
        text = re.sub(pattern, "", text)
    return text.lower()


def gsm8k_correct(text: str, reference: str, rule: str = "flexible-extract") -> bool:
    """Whether ``text`` answers a GSM8K problem whose reference solution is ``reference`` (ending ``#### N``) by the
    harness's ``rule`` (strict-match | flexible-extract)."""
    return normalise(extract(text, rule)) == normalise(reference)


def gsm8k_scores(texts: list[str], references: list[str]) -> dict[str, float]:
    """exact_match under each filter, as the harness reports ``gsm8k`` (the mean over the problems; NaN for none)."""
    n = len(texts)
    return {rule: sum(gsm8k_correct(t, r, rule) for t, r in zip(texts, references)) / n if n else float("nan")
            for rule in RULES}


def translation_scores(texts: list[str], references: list[str]) -> dict[str, float]:
    """Corpus chrF (sacrebleu's defaults: chrF2, character 6-grams, beta 2) and BLEU (13a tokenisation) of the
    outputs against one reference each, both 0-100; NaN for no output."""
    from sacrebleu.metrics import BLEU, CHRF  # here: every prompt reader imports this module, few score translations

    if not texts:
        return {"chrf": float("nan"), "bleu": float("nan")}
    refs = [list(references)]  # sacrebleu: one stream per reference set
    return {"chrf": CHRF().corpus_score(list(texts), refs).score, "bleu": BLEU().corpus_score(list(texts), refs).score}

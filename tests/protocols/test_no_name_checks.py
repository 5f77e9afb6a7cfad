"""Outside protocols/ (and the tests), no code compares a string with a protocol's name: it reads the protocol's
description (wisv.timing.protodesc) or a list derived from it (protocols.registry).

A comparison is ``==``, ``!=``, ``in`` or ``not in`` with a string literal (or a tuple, list or set of them) on one
side, or a ``case`` pattern of such literals.  Three names are also words of other vocabularies: ``greedy`` (the
acceptance rule, the greedy baseline of the labeling tables), ``auto`` (--draft-len, --dtype and --chat-template
auto) and ``tree`` (tree decoding against chain decoding in the simulator's traces and the benches); for these the
comparison counts only when its other side names a protocol: its source mentions "proto", and it is not a rule
(``PROTOCOLS[n].rule == "greedy"`` compares an acceptance rule).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from protocols.registry import ALL_PROTOCOLS

ROOT = Path(__file__).resolve().parents[2]
SHARED = {"greedy", "auto", "tree"}  # protocol names that are also words of other vocabularies (see above)
NAMES_A_PROTOCOL = re.compile(r"proto", re.IGNORECASE)
A_RULE = re.compile(r"rule\W*$")  # the operand ends in a rule (x.rule, rule, d["rule"])


def _literals(node: ast.AST) -> list[str]:
    """The protocol names a comparison operand spells out: a string, or a tuple/list/set of strings."""
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [e.value for e in elts if isinstance(e, ast.Constant) and e.value in ALL_PROTOCOLS]


def _counts(names: list[str], other: ast.AST, source: str) -> list[str]:
    """The names whose comparison with ``other`` is a protocol-name check."""
    text = ast.get_source_segment(source, other) or ast.unparse(other)
    about_protocol = bool(NAMES_A_PROTOCOL.search(text)) and not A_RULE.search(text)
    return [n for n in names if n not in SHARED or about_protocol]


def name_checks(source: str, filename: str = "<string>") -> list[str]:
    """``file:line: name`` for every protocol-name comparison in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, sides, sides[1:]):
                if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                    continue
                hits = _counts(_literals(left), right, source) + _counts(_literals(right), left, source)
                found += [(node.lineno, n) for n in hits]
        elif isinstance(node, ast.Match):
            for case in node.cases:
                pats = case.pattern.patterns if isinstance(case.pattern, ast.MatchOr) else [case.pattern]
                names = [p.value.value for p in pats if isinstance(p, ast.MatchValue)
                         and isinstance(p.value, ast.Constant) and p.value.value in ALL_PROTOCOLS]
                found += [(case.pattern.lineno, n) for n in _counts(names, node.subject, source)]
    return [f"{filename}:{line}: {n!r}" for line, n in sorted(found, key=lambda hit: hit[0])]


def project_files() -> list[Path]:
    """Every module outside protocols/, tests/ and hidden directories (.git, .venv, .venv-vllm: others' code)."""
    skip = {"protocols", "tests"}
    return [p for p in sorted(ROOT.rglob("*.py")) if not skip & set(p.relative_to(ROOT).parts)
            and not any(part.startswith(".") for part in p.relative_to(ROOT).parts[:-1])]


@pytest.mark.slow
def test_no_code_outside_protocols_compares_a_protocol_name():
    found = [hit for p in project_files() for hit in name_checks(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "compare a protocol's description, not its name:\n" + "\n".join(found)


def test_the_scan_catches_a_planted_check():
    planted = '''
def f(cfg, p, m, key):
    if cfg.protocol == "tree":  # a shared word, against a protocol: caught
        pass
    x = p == "ef" or m in ("fh", "sh") or "reject" != p
    y = "auto" in cfg.protocols()
    match p:
        case "sh" | "greedy":
            pass
    z = PROTOCOLS[p].rule == "greedy" or p.protocol_rule in ("greedy",)  # a rule: not caught
    return key.rule == "tree", cfg.dtype == "auto", m == "greedy"  # other vocabularies: not caught
'''
    assert name_checks(planted, "planted.py") == [
        "planted.py:3: 'tree'", "planted.py:5: 'ef'", "planted.py:5: 'fh'", "planted.py:5: 'sh'",
        "planted.py:5: 'reject'", "planted.py:6: 'auto'", "planted.py:8: 'sh'"]
    assert project_files() and all("protocols" not in p.relative_to(ROOT).parts[:1] for p in project_files())

"""make_qa: the committed QA splits are what the script writes, and every prefix holds the kinds in proportion."""
import json
from collections import Counter

from scripts.data.qa import main, spread
from wisv.pairs import QA_DIR


def test_committed_splits_are_the_scripts_output(tmp_path):
    main(["--out", str(tmp_path)])
    for name in ("calib", "test"):
        assert (tmp_path / f"{name}.jsonl").read_text() == (QA_DIR / f"{name}.jsonl").read_text()


def test_spread_keeps_each_kinds_order_and_spreads_it():
    groups = [[{"k": "a", "i": i} for i in range(6)], [{"k": "b", "i": i} for i in range(2)]]
    rows = spread(groups)
    assert [r["i"] for r in rows if r["k"] == "a"] == list(range(6))
    assert [r["k"] for r in rows] == ["a", "a", "b", "a", "a", "a", "b", "a"]


def test_the_first_prompts_of_the_test_split_mix_every_kind():
    rows = [json.loads(line) for line in (QA_DIR / "test.jsonl").read_text().splitlines()]
    total = Counter(r["kind"] for r in rows)
    first = Counter(r["kind"] for r in rows[:20])
    assert set(first) == set(total)
    for kind, n in total.items():
        assert abs(first[kind] / 20 - n / len(rows)) <= 0.1, (kind, first[kind], n)

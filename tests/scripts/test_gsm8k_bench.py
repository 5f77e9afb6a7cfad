"""scripts.bench.gsm8k: both harness rules per protocol, and each protocol against server-only prompt by prompt."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from scripts.bench import gsm8k as g

REF = "so 3 + 4 = <<3+4=7>>7\n#### 7"


def _run(tmp: Path, outputs: dict[str, list[tuple[str, str, list[int]]]], answer: str = REF) -> Path:
    ids = sorted({pid for rows in outputs.values() for pid, _, _ in rows})
    (tmp / "prompts.jsonl").write_text("".join(json.dumps({"prompt_id": p, "answer": answer}) + "\n" for p in ids))
    for proto, rows in outputs.items():
        (tmp / proto).mkdir()
        (tmp / proto / "outputs.jsonl").write_text("".join(
            json.dumps({"prompt_id": p, "text": t, "tokens": k, "error": None}) + "\n" for p, t, k in rows))
    return tmp


def test_rules_accuracy_and_pairs(tmp_path: Path) -> None:
    run = _run(tmp_path, {"server": [("a", "It is 7.\n#### 7", [1]), ("b", "The total is 7 apples.", [2]),
                                     ("c", "#### 8", [3])],
                          "greedy": [("a", "It is 7.\n#### 7", [1]), ("b", "The total is 7 apples.", [2]),
                                     ("c", "#### 8", [3])],
                          "device": [("a", "I think 8", [9]), ("b", "#### 7", [8]), ("c", "no", [7])]})
    t = g.summarize(g.score(g.read_run(run)))
    assert t.loc["server", "strict-match"] == pytest.approx(1 / 3)  # only "#### 7" matches strictly
    assert t.loc["server", "flexible-extract"] == pytest.approx(2 / 3)  # the last number: 7, 7, 8
    assert t.loc["greedy", "identical_to_server"] == 1.0 and t.loc["greedy", "flexible-extract lost"] == 0
    assert t.loc["device", "strict-match gained"] == 1 and t.loc["device", "strict-match lost"] == 1
    assert t.loc["device", "flexible-extract lost"] == 1 and t.loc["device", "flexible-extract gained"] == 0
    assert t.loc["device", "identical_to_server"] == 0.0


def test_not_gsm8k_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path, {"server": [("a", "x", [1])]}, answer="Paris")
    with pytest.raises(SystemExit) as e:
        g.main([str(run), "--out", str(tmp_path / "s.json")])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "--dataset gsm8k" in err
    assert not (tmp_path / "s.json").exists()


def test_main_writes_scores(tmp_path: Path) -> None:
    run = _run(tmp_path, {"server": [("a", "#### 7", [1])]})
    g.main([str(run), "--out", str(tmp_path / "s.json")])
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["table"][0]["protocol"] == "server" and doc["table"][0]["strict-match"] == 1.0
    assert pd.DataFrame(doc["table"]).shape[0] == 1


def test_runs_are_comma_separated_and_a_protocol_twice_counts_once(tmp_path: Path, capsys) -> None:
    a = _run(tmp_path / "a" if (tmp_path / "a").mkdir() is None else None, {"server": [("x", "#### 7", [1])]})
    b = _run(tmp_path / "b" if (tmp_path / "b").mkdir() is None else None, {"server": [("x", "#### 7", [1])],
                                                                         "auto": [("x", "#### 7", [1])]})
    g.main([f"{a},{b}", "--out", str(tmp_path / "s.json")])
    table = pd.DataFrame(json.loads((tmp_path / "s.json").read_text())["table"]).set_index("protocol")
    assert table.loc["server", "problems"] == 1 and table.loc["auto", "identical_to_server"] == 1.0

"""The standalone UE (``python -m testbed.ue``) against a running edge: text prompts with answers, the built-in
split, and the same records and summary as testbed.run."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from testbed.live.orchestrate.procs import Child
from tests.tiny_pair import make_pair
from wisv.records.rows import RECORD_FIELDS

K, MAX_NEW = 4, 16


@pytest.fixture(scope="module")
def edge(pair_dirs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m testbed.serve`` (tiny target, --head none) on a free loopback port; stopped by its PID."""
    log = tmp_path_factory.mktemp("edge") / "edge.log"
    child = Child("edge", ["testbed.serve", "--bind", "tcp://127.0.0.1:0", "--target", str(pair_dirs.target),
                           "--head", "none"], log)
    try:
        yield child.wait_for("READY", 120)
    finally:
        child.stop()


def ue(endpoint: str, drafter: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "testbed.ue", "--connect", endpoint, "--drafter", str(drafter), "--out", str(out),
           "--draft-len", str(K), "--max-new-tokens", str(MAX_NEW), "--probe-bytes", "256", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_text_prompts_with_answers(edge, pair_dirs, tmp_path: Path) -> None:
    f = tmp_path / "prompts.jsonl"
    rows = [{"prompt": "Tom has 3 apples. He buys 2 more. How many apples?", "answer": 5},
            {"prompt": "Ann has 7 pens. She gives away 4. How many pens?", "answer": 3, "prompt_id": "ann"}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = ue(edge, pair_dirs.drafter, tmp_path / "o", "--prompts-file", str(f), "--protocol", "sh")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "o"
    outputs = pd.read_json(out / "outputs.jsonl", lines=True)
    assert list(outputs["prompt_id"].astype(str)) == ["line-1", "ann"] and outputs["tokens"].map(len).gt(0).all()
    rounds = pd.read_csv(out / "rounds.csv")
    assert list(rounds.columns) == list(RECORD_FIELDS) and len(rounds) >= 2
    s = json.loads((out / "summary.json").read_text())
    assert (s["protocol"], s["prompts"], s["errors"]) == ("sh", 2, 0)
    assert s["accuracy"] is not None and 0.0 <= s["accuracy"] <= 1.0
    assert s["matches_target"] == 1.0  # sh with --head none is lossless; the reference comes from the edge
    assert json.loads((out / "edge.json").read_text())["head"].startswith("none")
    assert pd.read_csv(out / "summary.csv")["protocol"].tolist() == ["sh"]
    assert "accuracy" in res.stdout and "matches_target" in res.stdout  # the table is printed


def test_builtin_split_n_prompts(edge, pair_dirs, tmp_path: Path) -> None:
    res = ue(edge, pair_dirs.drafter, tmp_path / "o", "--prompts", "3", "--protocol", "greedy")
    assert res.returncode == 0, res.stderr
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (s["prompts"], s["errors"]) == (3, 0)


def test_a_bad_prompts_file_is_a_clear_error(edge, pair_dirs, tmp_path: Path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"question": "no prompt here"}\n')
    res = ue(edge, pair_dirs.drafter, tmp_path / "o", "--prompts-file", str(f))
    assert res.returncode == 2 and "needs 'prompt' or 'prompt_ids'" in res.stderr


def test_a_drafter_with_another_vocabulary_is_refused_at_open(edge, pair_dirs, tmp_path: Path) -> None:
    """A 61-token drafter (no tokenizer: its model's vocabulary size is declared) against the 637-token target."""
    small = tmp_path / "small"
    make_pair(vocab=61, eos=60)[0].save_pretrained(small)
    f = tmp_path / "ids.jsonl"
    f.write_text(json.dumps({"prompt_ids": [1, 5, 7], "answer": 3}) + "\n")
    res = ue(edge, small, tmp_path / "o", "--prompts-file", str(f))
    assert res.returncode == 2, res.stderr
    assert "refused OPEN" in res.stderr and "vocab_mismatch" in res.stderr
    assert "61 tokens" in res.stderr and f"has {pair_dirs.vocab_size}" in res.stderr

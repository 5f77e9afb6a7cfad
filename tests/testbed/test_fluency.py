"""``python -m testbed.fluency``: a finished run's summaries gain the third LM's fluency, pooled over each protocol's
successful prompts that have a reference text (a hand-made run directory and a hand-made scorer)."""
import json
import math

import pandas as pd
import pytest

from testbed import fluency
from wisv.tasks.jsonl import write_jsonl


def scorer(prompt: str, text: str) -> list[float]:
    """NLL 1.0 per word, 3.0 for a word the prompt does not contain: off-topic text reads worse."""
    return [1.0 if w in prompt else 3.0 for w in text.split()]


@pytest.fixture
def run_dir(tmp_path):
    write_jsonl(tmp_path / "prompts.jsonl",
                [{"prompt_id": "a", "prompt_ids": [1]}, {"prompt_id": "b", "prompt_ids": [2]}])
    write_jsonl(tmp_path / "reference.jsonl", [{"prompt_id": "a", "tokens": [1], "text": "red fox"},
                                               {"prompt_id": "b", "tokens": [2], "text": "blue sea"}])
    rows = {"greedy": [("a", "red fox", None), ("b", "blue sea", None)],
            "auto": [("a", "red cat", None), ("b", "blue sea", None), ("c", "zzz", None)],  # c: no reference
            "fh": [("a", "", "timeout"), ("b", "green sea", None)]}  # a failed: not counted
    prompt_text = {"a": "the red fox", "b": "the blue sea", "c": "?"}
    summaries = []
    for proto, outs in rows.items():
        (tmp_path / proto).mkdir()
        write_jsonl(tmp_path / proto / "outputs.jsonl", [{"prompt_id": p, "tokens": [], "prompt_text": prompt_text[p],
                                                          "text": t, "error": e} for p, t, e in outs])
        summaries.append({"protocol": proto, "aal": 1.0})
        (tmp_path / proto / "summary.json").write_text(json.dumps(summaries[-1]))
    pd.DataFrame(summaries).to_csv(tmp_path / "summary.csv", index=False)
    return tmp_path


def test_rescore_writes_the_column(run_dir):
    got = fluency.rescore(run_dir, scorer)
    assert got["greedy"] == pytest.approx(1.0)
    assert got["auto"] == pytest.approx(math.exp((1 + 3 + 1 + 1) / 4 - 1.0))  # "cat" is off the prompt
    assert got["fh"] == pytest.approx(math.exp((3 + 1) / 2 - 1.0))  # only b: "green" is off the prompt
    for proto, r in got.items():
        assert json.loads((run_dir / proto / "summary.json").read_text())["fluency_ext_ppl_ratio"] == pytest.approx(r)
        assert json.loads((run_dir / proto / "summary.json").read_text())["aal"] == 1.0  # the rest kept
    csv = pd.read_csv(run_dir / "summary.csv").set_index("protocol")
    assert csv.loc["auto", "fluency_ext_ppl_ratio"] == pytest.approx(got["auto"]) and csv.loc["auto", "aal"] == 1.0


def test_no_text_or_no_reference_is_nan(run_dir):
    (run_dir / "reference.jsonl").write_text(json.dumps({"prompt_id": "a", "tokens": [1]}) + "\n")  # no text
    assert all(math.isnan(r) for r in fluency.rescore(run_dir, scorer).values())
    assert math.isnan(fluency.ext_ratio(pd.DataFrame({"prompt_id": ["a"], "tokens": [[1]]}), {"a": "x"}, scorer))


def test_cli_refuses_a_directory_that_is_not_a_run(tmp_path, capsys):
    with pytest.raises(SystemExit):
        fluency.main([str(tmp_path)])
    assert "not a testbed.run output directory" in capsys.readouterr().err

"""--drafter ngram on the device: which protocols it can run (read from their descriptions), bad combinations one
line and exit 2 with nothing written, and a live lossless run on the toy pair whose uplink carries token ids only."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from protocols.accounting import wire_payload_bits
from testbed.live.orchestrate import run
from testbed.live.ue import ue
from wisv.decoding.ngram import refusal
from wisv.timing.protodesc import DESCRIPTIONS, describe, uplink_bits


@pytest.mark.parametrize("name, reads, ok", [
    ("greedy", False, True), ("greedy", True, True), ("server", False, True),
    ("ef", False, True), ("ef", True, False), ("auto", False, True), ("auto", True, False),
    ("fh", False, False), ("sh", False, False), ("reject", False, False), ("tree", False, False),
    ("device", False, False)])
def test_refusal_reads_the_description(name: str, reads: bool, ok: bool) -> None:
    why = refusal(describe(name), reads)
    assert (why is None) == ok
    if why:
        assert "--drafter ngram" in why and f"--protocol {name}" in why and "\n" not in why


def test_draft_features_need_a_model() -> None:
    assert refusal(describe("greedy"), False, draft_features=True) is not None
    assert all(refusal(d, False) is None for d in DESCRIPTIONS.values() if d.uplink == ("ids", "features")
               and not d.head)


@pytest.mark.parametrize("main, argv, says", [
    (run.main, ["--protocol", "fh"], "--protocol fh cannot use it: it uploads the drafter's hidden states"),
    (run.main, ["--protocol", "reject"], "--protocol reject cannot use it"),
    (run.main, ["--protocol", "tree"], "--protocol tree cannot use it: it drafts a tree"),
    (run.main, ["--protocol", "greedy,sh"], "--protocol sh cannot use it"),
    (run.main, ["--protocol", "greedy", "--prompt-lookup-min", "5", "--prompt-lookup-max", "3"],
     "prompt_lookup_min <= prompt_lookup_max"),
    (run.main, ["--protocol", "greedy", "--drafter-head", "wisv/assets/smollm2-feature-head"],
     "--drafter-head needs the drafter model"),
    (run.main, ["--protocol", "auto", "--lookup-stop-streak", "3", "--prompt-lookup-max", "17"],
     "the edge matches n-grams of at most 16 tokens"),
    (ue.main, ["--protocol", "fh"], "--protocol fh cannot use it"),
    (ue.main, ["--protocol", "device"], "--protocol device cannot use it"),
])
def test_bad_combinations_one_line_exit_2(tmp_path: Path, capsys, main, argv: list[str], says: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        main(["--drafter", "ngram", "--out", str(out), "--prompts", "1", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and says in err[0], err
    assert not out.exists()


@pytest.mark.slow
def test_live_greedy_ngram_is_lossless_and_uploads_ids_only(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run.main(["--protocol", "greedy", "--drafter", "ngram", "--prompts", "2", "--max-new-tokens", "24",
              "--rate-mbps", "0", "--rtt-ms", "0", "--out", str(out)])
    s = json.loads((out / "greedy" / "summary.json").read_text())
    assert s["matches_target"] == 1.0 and (out / "complete").exists()
    rounds = pd.read_csv(out / "greedy" / "rounds.csv")
    assert (rounds["drafted"] == 0).any() and (rounds["drafted"] > 0).any()  # no match: an empty DRAFT
    pb = wire_payload_bits(0, 1, token=True)  # no hidden states, no probabilities: ids and the message's overhead
    model = rounds["drafted"].map(lambda k: uplink_bits(describe("greedy"), int(k), pb) / 8)
    assert (rounds["uplink_bytes"] - model).abs().max() <= 16, (rounds["uplink_bytes"] - model).describe()
    hidden = wire_payload_bits(64, 1, token=True)  # what a drafter's hidden states would add: far more
    assert (rounds["drafted"] * hidden.s_h / 8 > 16).any()

"""Fault test with real processes on loopback: the edge is killed with SIGKILL while a UE is mid-prompt and restarted
on the same port; the UE resends, re-OPENs with the committed prefix and finishes: every output equals the target's
greedy output, no prompt is lost and no token is committed twice.  Only the PIDs started here are signalled."""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pandas as pd
import torch

from testbed.common.files import complete_lines
from testbed.live.orchestrate.procs import Child
from wisv.models.loader import load_model
from wisv.tasks.evaluate import greedy_reference

PROMPTS = [[1, 51, 28, 223, 19, 20, 13, 21, 33], [1, 40, 41, 42, 43], [1, 60, 61, 62], [1, 70, 71, 72, 73, 74]]
MAX_NEW, K = 160, 4  # tokens per prompt: long enough that the kill lands inside the second prompt's rounds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_edge(pair_dirs, port: int, log: Path, *extra: str) -> Child:
    edge = Child("edge", ["testbed.serve", "--bind", f"tcp://127.0.0.1:{port}", "--target", str(pair_dirs.target),
                          "--head", "none", *extra], log)
    edge.wait_for("READY", 120)
    return edge


def wait_for_commit(journal: Path, sid: str, timeout_s: float) -> None:
    """Until the edge's journal holds a commit of session ``sid`` that did not end it: the session's rounds have
    begun (its OPEN_OK is behind it) and more are to come."""
    deadline = time.monotonic() + timeout_s
    while not any(e["ev"] == "commit" and e["sid"] == sid and not e["done"] for e in complete_lines(journal)):
        assert time.monotonic() < deadline, f"no commit of {sid} in {journal}"
        time.sleep(0.005)


def test_edge_killed_mid_prompt_and_restarted_gives_the_uninterrupted_outputs(pair_dirs, tmp_path: Path) -> None:
    port, out = free_port(), tmp_path / "ue"
    f = tmp_path / "prompts.jsonl"
    f.write_text("".join(json.dumps({"prompt_ids": p, "prompt_id": f"p{i}"}) + "\n" for i, p in enumerate(PROMPTS)))
    edge = start_edge(pair_dirs, port, tmp_path / "edge1.log", "--journal", str(tmp_path / "journal.jsonl"))
    ue = Child("ue", ["testbed.ue", "--connect", f"tcp://127.0.0.1:{port}", "--drafter", str(pair_dirs.drafter),
                      "--prompts-file", str(f), "--protocol", "greedy", "--draft-len", str(K), "--max-new-tokens",
                      str(MAX_NEW), "--probe-bytes", "0", "--recv-timeout-s", "1", "--retry-s", "90",
                      "--out", str(out)],
               tmp_path / "ue.log")
    edge2 = None
    try:
        # inside the second prompt's rounds: a kill between its OPEN and OPEN_OK would be a retried OPEN, not a resume
        wait_for_commit(tmp_path / "journal.jsonl", "ue0-1", 120)
        edge.proc.kill()  # SIGKILL to the edge's own PID
        edge.stop()
        edge2 = start_edge(pair_dirs, port, tmp_path / "edge2.log")
        assert ue.wait(300) == 0, (tmp_path / "ue.log").read_text()[-2000:]
    finally:
        for child in (ue, edge, edge2):
            if child is not None:
                child.stop()
    target = load_model(pair_dirs.target, "target", "cpu", torch.float32)
    outputs = pd.read_json(out / "outputs.jsonl", lines=True)
    assert list(outputs["prompt_id"]) == [f"p{i}" for i in range(len(PROMPTS))]  # no prompt lost
    assert "error" not in outputs or outputs["error"].isna().all()
    for ids, tokens in zip(PROMPTS, outputs["tokens"]):
        assert tokens == greedy_reference(target, ids, MAX_NEW)
    rounds = pd.read_csv(out / "rounds.csv", dtype={"prompt_id": str})
    for pid, rows in rounds.groupby("prompt_id"):  # each round recorded once, its tokens committed once
        assert list(rows["round"]) == list(range(len(rows)))
        assert rows["committed"].sum() == len(outputs.set_index("prompt_id").loc[pid, "tokens"])
    hit = rounds[rounds["resumed"] > 0]
    assert list(hit["prompt_id"]) == ["p1"] and hit["resumed"].iloc[0] == 1 and hit["retries"].iloc[0] >= 1
    assert "open session ue0-1 " in (tmp_path / "edge2.log").read_text()  # resumed on the restarted edge

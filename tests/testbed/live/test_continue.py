"""testbed.run --continue: a run killed -9 midway (its edge left running, stopped) and continued gives the outputs of
an uninterrupted run for every lossless protocol, no round twice, and no process left; a continue that would change
the config, or of a complete run, is refused with one line.  Every process here is started by the test."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from testbed.common.files import COMPLETE_FILE, complete_lines
from testbed.live.orchestrate.cont import differing_field, recorded, start_ticks, stop_leftovers
from testbed.live.ue.kept import keep_done
from wisv.records.rows import read_records

LOSSLESS = ("greedy", "fh", "sh", "auto", "tree", "server")  # with --head none on the edge


def run_cmd(pair_dirs, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "testbed.run", "--protocol", "all", "--prompts", "6", "--max-new-tokens", "16",
            "--draft-len", "4", "--probe-bytes", "0", "--head", "none", "--drafter", str(pair_dirs.drafter),
            "--target", str(pair_dirs.target), "--out", str(out), *extra]


def tokens_by_prompt(out: Path, proto: str) -> dict[str, list[int]]:
    rows = pd.read_json(out / proto / "outputs.jsonl", lines=True, dtype={"prompt_id": str})
    return dict(zip(rows["prompt_id"], rows["tokens"]))


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _kill_midway(cmd: list[str], out: Path, err: Path, watch: str = "fh") -> int:
    """Start the run, SIGSTOP its edge (so that it outlives the run) and kill -9 the run once ``watch`` has done 2
    prompts; returns the edge's PID."""
    with err.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=f)
    try:
        deadline = time.monotonic() + 600
        while len(complete_lines(out / watch / "ue0" / "outputs.jsonl")) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-2000:]
            time.sleep(0.05)
        edge = next(r["pid"] for r in recorded(out) if r["name"] == "edge")
        os.kill(edge, signal.SIGSTOP)
        proc.kill()
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return edge


@pytest.mark.slow
def test_a_run_killed_midway_and_continued_equals_an_uninterrupted_one(pair_dirs, tmp_path: Path) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    subprocess.run(run_cmd(pair_dirs, whole), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    edge = _kill_midway(run_cmd(pair_dirs, cut), cut, tmp_path / "err.txt")
    assert not _gone(edge) and not (cut / COMPLETE_FILE).exists()  # the killed run left its edge behind
    done = subprocess.run([sys.executable, "-m", "testbed.run", "--continue", str(cut)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"stopped edge (PID {edge})" in done.stdout and _gone(edge)
    assert (cut / COMPLETE_FILE).exists()
    for proto in LOSSLESS:
        assert tokens_by_prompt(cut, proto) == tokens_by_prompt(whole, proto), proto
    for proto in (*LOSSLESS, "reject"):
        rounds = read_records(cut / proto / "rounds.csv")
        assert not rounds.duplicated(["ue_id", "prompt_id", "round"]).any(), proto
        assert rounds.groupby("prompt_id")["committed"].sum().to_dict() == {
            p: len(t) for p, t in tokens_by_prompt(cut, proto).items()}, proto  # every committed token, once
    assert all(_gone(r["pid"]) for r in recorded(cut)), "a process of the run is left"
    summary = pd.read_csv(cut / "summary.csv").set_index("protocol")
    assert (summary["prompts"] == 6).all() and (summary["errors"] == 0).all()


@pytest.mark.slow
def test_an_interleaved_run_killed_midway_and_continued_keeps_each_lanes_prompts(pair_dirs, tmp_path: Path) -> None:
    """--interleave: one UE runs every protocol; killed after 2 prompts of greedy, each lane keeps what it completed
    and runs the rest: 6 prompts a protocol, each once, every round once, the same (target's) output in each."""
    cut, protos = tmp_path / "cut", ("server", "greedy", "auto")
    cmd = run_cmd(pair_dirs, cut, "--interleave")
    cmd[cmd.index("all")] = ",".join(protos)
    edge = _kill_midway(cmd, cut, tmp_path / "err.txt", watch="greedy")
    done = subprocess.run([sys.executable, "-m", "testbed.run", "--continue", str(cut)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _gone(edge) and (cut / COMPLETE_FILE).exists()
    outputs = [tokens_by_prompt(cut, p) for p in protos]
    assert len(outputs[0]) == 6 and outputs[1] == outputs[0] == outputs[2]
    for proto in protos:
        rounds = read_records(cut / proto / "rounds.csv")
        assert not rounds.duplicated(["ue_id", "prompt_id", "round"]).any(), proto
        assert rounds.groupby("prompt_id")["committed"].sum().to_dict() == {
            p: len(t) for p, t in tokens_by_prompt(cut, proto).items()}, proto


def test_a_continue_that_changes_the_config_or_of_a_complete_run_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.toml").write_text('protocol = "greedy"\nprompts = 4\n')
    cont = [sys.executable, "-m", "testbed.run", "--continue", str(out)]
    changed = subprocess.run(cont + ["--draft-len", "6"], capture_output=True, text=True)
    assert changed.returncode == 2 and changed.stderr.count("\n") == 1
    assert changed.stderr.startswith(f"python -m testbed.run: error: --continue {out}: --draft-len differs"), \
        changed.stderr
    (out / COMPLETE_FILE).write_text("{}")
    complete = subprocess.run(cont + ["--prompts", "4"], capture_output=True, text=True)  # repeating a flag is fine
    assert complete.returncode == 2 and "the run is complete" in complete.stderr


def test_a_ue_keeps_complete_prompts_and_drops_the_cut_one(tmp_path: Path) -> None:
    rec = lambda p, **kw: json.dumps({"prompt_id": p, "tokens": [1, 2], **kw})  # noqa: E731
    (tmp_path / "outputs.jsonl").write_text(rec("b") + "\n" + rec("a") + "\n" + rec("c", error="x") + "\n"
                                            + '{"prompt_id": "d", "tok')  # a line cut by the kill
    rnd = lambda p, r: json.dumps({"prompt_id": p, "round": r})  # noqa: E731
    (tmp_path / "rounds.jsonl").write_text("\n".join([rnd("a", 0), rnd("b", 0), rnd("b", 1), rnd("c", 0),
                                                      rnd("d", 0)]) + "\n" + '{"prompt_id": "d", "ro')
    kept = keep_done(tmp_path, ["a", "b", "c", "d", "e"])
    assert [r["prompt_id"] for r in kept.recs] == ["a", "b"] and kept.ids == {"a", "b"}
    assert [(r["prompt_id"], r["round"]) for r in kept.rows] == [("a", 0), ("b", 0), ("b", 1)]
    assert complete_lines(tmp_path / "outputs.jsonl") == kept.recs  # rewritten: only what is kept
    assert complete_lines(tmp_path / "rounds.jsonl") == kept.rows


def test_the_differing_field_is_named_by_its_path() -> None:
    assert differing_field({"a": 1, "ue": {"k": 4}}, {"a": 1, "ue": {"k": 6}}) == "ue.k"
    assert differing_field({"out": "x", "a": 1}, {"out": "y", "a": 1}) is None  # where it writes is not the config


def test_a_recorded_child_left_running_and_stopped_is_stopped_and_a_reused_pid_is_not(tmp_path: Path) -> None:
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        os.kill(left.pid, signal.SIGSTOP)  # SIGTERM alone would wait for a SIGCONT
        recs = [{"name": "edge", "pid": left.pid, "start_ticks": start_ticks(left.pid), "namespaces": []},
                {"name": "ue0", "pid": other.pid, "start_ticks": -1, "namespaces": []}]  # the PID reused since
        (tmp_path / "processes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        assert stop_leftovers(tmp_path, grace_s=0.5) == [f"edge (PID {left.pid})"]
        assert left.wait(10) in (-signal.SIGTERM, -signal.SIGKILL) and other.poll() is None
    finally:
        for p in (left, other):
            p.kill()
            p.wait()

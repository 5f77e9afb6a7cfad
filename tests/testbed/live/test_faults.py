"""Fault tests: a run across 5 s link outages, SIGTERM to testbed.run, a non-empty --out, a killed UE, an orphaned
child."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from testbed.common.files import COMPLETE_FILE, prepare_out
from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.gather import merge_rounds
from testbed.live.orchestrate.procs import Child
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue.ueconfig import UEConfig
from tests.channel.test_netns import needs_netns
from wisv.records.rows import RECORD_FIELDS, read_records, read_round_log

OUTAGE_S, UP_S = 5.0, 1.0  # the test trace: 1 s up, then 5 s down, again and again


def outage_trace(path: Path, repeats: int = 12) -> Path:
    """A CSI trace (the format of scripts/link/traces/outage_5s.csv) whose up periods are shorter than the UE's run."""
    rows = ["t_s,rate_up_mbps,rate_down_mbps,rtt_ms,per,outage"]
    for k in range(repeats):
        t = k * (UP_S + OUTAGE_S)
        rows += [f"{t:g},20,20,75,0,0", f"{t + UP_S:g},20,20,75,0,1"]
    rows.append(f"{repeats * (UP_S + OUTAGE_S):g},20,20,75,0,0")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.slow
def test_a_run_across_5_s_outages_completes_and_records_them(pair_dirs, tmp_path: Path) -> None:
    """2 prompts of >= 4 rounds (16 tokens, K = 4) and 3 more exchanges each (PING, OPEN, CLOSE) at 75 ms RTT keep
    the UE busy for more than one 1 s up period, so the run must cross an outage."""
    ue = UEConfig(draft_len=4, max_new_tokens=16, drafter=str(pair_dirs.drafter), probe_bytes=0)
    link = LinkSpec(rtt_ms=75.0, csi_trace=str(outage_trace(tmp_path / "outages.csv")))
    cfg = RunConfig(protocol="greedy", prompts=2, out=str(tmp_path / "run"), ue=ue,
                    edge=ServeConfig(target=str(pair_dirs.target)), link=link)
    [summary] = run(cfg)
    assert (summary["prompts"], summary["errors"], summary["matches_target"]) == (2, 0, 1.0)
    pdir = tmp_path / "run" / "greedy"
    outputs = pd.read_json(pdir / "outputs.jsonl", lines=True)
    assert outputs["outage_s"].sum() >= 0.5  # crossed (part of) an outage: held, not failed
    rounds = read_records(pdir / "rounds.csv")
    assert rounds["outage_s"].notna().all() and (rounds["outage_s"] <= OUTAGE_S + 0.1).all()
    crossed = rounds[rounds["outage_s"] > 0]
    assert (crossed["t_round_s"] >= crossed["outage_s"] - 0.05).all()  # a round's latency includes its outage
    assert json.loads((tmp_path / "run" / COMPLETE_FILE).read_text())["complete"] is True


@pytest.mark.slow
def test_an_outage_longer_than_the_heartbeat_timeout_frees_the_session_and_the_ue_resumes_it(pair_dirs,
                                                                                            tmp_path: Path) -> None:
    """5 s outages against a 1 s heartbeat timeout: the edge frees each session caught in one (its keepalives stop
    too), and the UE re-opens it with its committed prefix after the outage; nothing is lost (greedy = target)."""
    ue = UEConfig(draft_len=4, max_new_tokens=24, drafter=str(pair_dirs.drafter), probe_bytes=0)
    link = LinkSpec(rtt_ms=75.0, csi_trace=str(outage_trace(tmp_path / "outages.csv")))
    cfg = RunConfig(protocol="greedy", prompts=2, out=str(tmp_path / "run"), ue=ue, heartbeat_ivl_ms=200,
                    heartbeat_timeout_ms=1000, edge=ServeConfig(target=str(pair_dirs.target)), link=link)
    [summary] = run(cfg)
    assert (summary["prompts"], summary["errors"], summary["matches_target"]) == (2, 0, 1.0)
    edge_log = (tmp_path / "run" / "edge.log").read_text()
    assert "disconnected: freed 1 session(s)" in edge_log
    rounds = read_records(tmp_path / "run" / "greedy" / "rounds.csv")
    assert rounds["resumed"].sum() >= 1  # re-opened after the edge freed it
    assert rounds.groupby("prompt_id")["round"].apply(lambda r: list(r) == list(range(len(r)))).all()


def _wait_for_rounds(log: Path, n: int, proc: subprocess.Popen, err: Path, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().count("\n") >= n:
            return
        if proc.poll() is not None:
            pytest.fail(f"exited with {proc.returncode} before {n} rounds: {err.read_text()[-2000:]}")
        time.sleep(0.1)
    pytest.fail(f"no {n} rounds in {log} within {timeout_s} s")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _namespaces_of(pids: list[int]) -> set[str]:
    """The named namespaces these processes run in (other runs' namespaces may exist meanwhile)."""
    names = (subprocess.run(["ip", "netns", "identify", str(p)], capture_output=True, text=True, check=False).stdout
             for p in pids)
    return {n.strip() for n in names if n.strip()}


@pytest.mark.slow
@pytest.mark.parametrize("placement", ["loopback", pytest.param("netns", marks=[pytest.mark.root, needs_netns])])
def test_sigterm_to_testbed_run_leaves_no_process_or_namespace(pair_dirs, tmp_path: Path, placement: str) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "testbed.run", "--protocol", "greedy", "--prompts", "40", "--max-new-tokens", "32",
           "--draft-len", "4", "--probe-bytes", "0", "--no-reference", "--drafter", str(pair_dirs.drafter),
           "--target", str(pair_dirs.target), "--out", str(out)] + (["--netns"] if placement == "netns" else [])
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file)
    try:
        _wait_for_rounds(out / "greedy" / "ue0" / "rounds.jsonl", 2, proc, err_path)
        children = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        created = _namespaces_of(children) if placement == "netns" else set()
        assert len(children) >= 2 and len(created) == (2 if placement == "netns" else 0)  # edge and UE (+ emulator)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = err_path.read_text()
    assert rc == 128 + signal.SIGTERM and "interrupted by SIGTERM" in err, err
    assert all(_gone(pid) for pid in children), [pid for pid in children if not _gone(pid)]
    assert not (created & _namespaces())
    assert len(read_records(out / "greedy" / "rounds.csv")) >= 2  # the rounds so far, merged
    assert not (out / COMPLETE_FILE).exists()


def test_non_empty_out_is_refused_without_overwrite(tmp_path: Path, capsys) -> None:
    from testbed.live.orchestrate.run import main as run_main
    from testbed.load.cli import main as load_main
    out = tmp_path / "out"
    (out / "greedy" / "ue7").mkdir(parents=True)  # a stale UE folder from another run
    for main in (run_main, load_main):
        with pytest.raises(SystemExit) as e:
            main(["--out", str(out), "--prompts" if main is run_main else "--ues", "1"])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"--out {out} is not empty" in err and "--overwrite" in err
    assert (out / "greedy" / "ue7").is_dir()  # refused: nothing touched
    prepare_out(out, overwrite=True)
    assert out.is_dir() and not any(out.iterdir())  # --overwrite: removed first, never merged


@pytest.mark.slow
def test_a_killed_ue_keeps_its_appended_rows(pair_dirs, tmp_path: Path) -> None:
    edge = Child("edge", ["testbed.serve", "--bind", "tcp://127.0.0.1:0", "--target", str(pair_dirs.target)],
                 tmp_path / "edge.log")
    try:
        endpoint = edge.wait_for("READY", 120)
        ue_dir = tmp_path / "greedy" / "ue0"
        cmd = [sys.executable, "-m", "testbed.ue", "--connect", endpoint, "--drafter", str(pair_dirs.drafter),
               "--protocol", "greedy", "--prompts", "40", "--max-new-tokens", "32", "--draft-len", "4",
               "--probe-bytes", "0", "--no-reference", "--out", str(ue_dir)]
        err_path = tmp_path / "ue-stderr.txt"
        with err_path.open("w") as err_file:
            ue = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file)
        try:
            _wait_for_rounds(ue_dir / "rounds.jsonl", 3, ue, err_path)
        finally:
            ue.kill()
            ue.wait()
    finally:
        edge.stop()
    rows = read_round_log(ue_dir / "rounds.jsonl")
    assert len(rows) >= 3 and list(rows.columns) == list(RECORD_FIELDS)
    assert (rows["ue_id"] == "ue0").all() and (rows["drafted"] > 0).all() and rows["t_round_s"].gt(0).all()
    assert not (ue_dir / "rounds.csv").exists()  # killed: the end-of-run CSV never came
    merged = merge_rounds(tmp_path / "greedy")  # what testbed.run does after its UEs, even a killed one
    assert len(merged) == len(rows) and len(read_records(tmp_path / "greedy" / "rounds.csv")) == len(rows)


def test_children_die_with_their_parent(tmp_path: Path) -> None:
    code = ("import sys, time; from pathlib import Path; from testbed.live.orchestrate.procs import Child; "
            "c = Child('sleeper', ['timeit', '-n', '1', '-r', '1', 'import time; time.sleep(120)'], "
            f"Path({str(tmp_path / 'sleeper.log')!r})); print(c.proc.pid, flush=True); time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert not _gone(child)
    finally:
        parent.kill()  # SIGKILL: no cleanup code runs in the parent
        parent.wait()
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)

"""``testbed.run --edge``: the UEs here, the edge already serving elsewhere (loopback here; two network namespaces
joined by a veth under root), with a local run's outputs, the edge's reference and settings, and the measured CSI."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from transformers import AutoTokenizer

from channel.netns import exec_prefix, topology
from testbed.live.orchestrate import run
from testbed.live.orchestrate.procs import Child
from tests.channel.test_netns import needs_netns
from tests.testbed.live.test_handshake import swapped_tokenizer
from wisv.models.loader import builtin_paths

LOSSLESS = ["greedy", "fh", "sh", "auto"]  # with --head none on the edge
OUTPUTS = ["config.json", "config.toml", "prompts.jsonl", "reference.jsonl", "summary.csv", "run.png"]


def ue_flags(pair_dirs, out: Path) -> list[str]:
    return ["--drafter", str(pair_dirs.drafter), "--prompts", "3", "--max-new-tokens", "16", "--draft-len", "4",
            "--probe-bytes", "1024", "--out", str(out)]


def edge_args(pair_dirs, bind: str) -> list[str]:
    """The edge's command; --insecure: the namespaces' addresses are beyond loopback (protected mode), but they are
    this test's own, reachable from nowhere else."""
    return ["testbed.serve", "--bind", bind, "--target", str(pair_dirs.target), "--head", "none", "--insecure"]


@pytest.fixture(scope="module")
def edge(pair_dirs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    child = Child("edge", edge_args(pair_dirs, "tcp://127.0.0.1:0"), tmp_path_factory.mktemp("edge") / "edge.log")
    try:
        yield child.wait_for("READY", 120)
    finally:
        child.stop()


def check_outputs(out: Path, protocols: list[str], measured: bool) -> pd.DataFrame:
    """A local run's files; lossless protocols equal the edge's target-only output; the CSI recorded per round."""
    assert all((out / f).exists() for f in OUTPUTS)
    summary = pd.read_csv(out / "summary.csv").set_index("protocol")
    assert list(summary.index) == protocols and (summary["errors"] == 0).all()
    assert (summary.loc[[p for p in protocols if p in LOSSLESS], "matches_target"] == 1.0).all()
    assert summary["accuracy"].notna().all()
    saved = json.loads((out / "config.json").read_text())
    assert saved["edge_reported"]["head"] == "none" and saved["head_resolved"] == "none"
    assert saved["tau_resolved"] == 0.5 and saved["link_emulated"] is not measured
    for p in protocols:
        assert all((out / p / f).exists() for f in ("rounds.csv", "outputs.jsonl", "summary.json"))
    rounds = pd.read_csv(out / protocols[0] / "rounds.csv")
    if measured:  # the CSI in force is the UE's own measurement: RTT, rates, the uplink's TCP retransmission rate
        assert (rounds["rtt_ms"] == rounds["est_rtt_ms"]).all() and (rounds["rtt_ms"] > 0).all()
        # rates: the estimate's (empty = unlimited: loopback serializes even a 1 MiB probe faster than it can time)
        for d in ("up", "down"):
            est = rounds[f"est_rate_{d}_mbps"].replace(float("inf"), float("nan"))  # the estimate says inf there
            pd.testing.assert_series_equal(rounds[f"rate_{d}_mbps"], est, check_names=False)
        assert rounds["per_down"].isna().all()
        assert (rounds["per"] == 0.0).all() if shutil.which("ss") else rounds["per"].isna().all()  # a lossless link
    return rounds


@pytest.mark.slow
def test_remote_edge_on_loopback_all_protocols(edge, pair_dirs, tmp_path: Path) -> None:
    cfg = run.parse_args(["--edge", edge, "--protocol", "all", *ue_flags(pair_dirs, tmp_path)])
    assert not cfg.link.emulated  # no link flag: the real link
    run.run(cfg)
    check_outputs(tmp_path, list(run.ALL_PROTOCOLS), measured=True)


@pytest.mark.slow
def test_emulation_flags_put_the_emulator_in_front_of_the_remote_edge(edge, pair_dirs, tmp_path: Path) -> None:
    cfg = run.parse_args(["--edge", edge, "--protocol", "greedy", "--rtt-ms", "10", "--rate-mbps", "50",
                          *ue_flags(pair_dirs, tmp_path)])
    assert cfg.link.emulated and cfg.link.rtt_ms == 10.0
    run.run(cfg)
    rounds = check_outputs(tmp_path, ["greedy"], measured=False)
    assert (rounds["rtt_ms"] == 10.0).all() and (rounds["rate_up_mbps"] == 50.0).all()
    assert (rounds["est_rtt_ms"] >= 10.0).all()


@pytest.mark.parametrize("argv, words", [
    (["--head", "accept-all"], ["--head", "serving edge"]),
    (["--tau", "0.2", "--batch-verify", "--scheduler", "slo"], ["--tau", "--batch-verify", "--scheduler"]),
    (["--target", "/models/t"], ["--target"]),
    (["--netns"], ["--netns", "elsewhere"]),
])
def test_edge_settings_given_with_edge_are_refused_naming_the_flag(argv, words, capsys) -> None:
    with pytest.raises(SystemExit):
        run.parse_args(["--edge", "tcp://10.0.0.2:5555", *argv])
    err = capsys.readouterr().err
    assert all(w in err for w in words), err


@pytest.mark.slow
def test_a_drafter_with_another_tokenizer_is_refused_before_any_work(edge, pair_dirs, tmp_path: Path, capsys) -> None:
    drafter = tmp_path / "drafter"
    shutil.copytree(pair_dirs.drafter, drafter)
    swapped_tokenizer(AutoTokenizer.from_pretrained(drafter), drafter)  # same size, two ids swapped
    flags = ue_flags(pair_dirs, tmp_path / "run")
    flags[flags.index("--drafter") + 1] = str(drafter)
    with pytest.raises(SystemExit) as e:
        run.main(["--edge", edge, "--protocol", "greedy", *flags])
    err = capsys.readouterr().err
    assert e.value.code == 1 and "the edge refused REFERENCE" in err and "tokenizer mismatch" in err
    assert not (tmp_path / "run" / "greedy").exists()  # refused before any UE ran


def test_pair_with_edge_picks_the_pairs_drafter_and_leaves_the_target_to_the_edge() -> None:
    cfg = run.with_pair(run.parse_args(["--edge", "tcp://10.0.0.2:5555", "--pair", "toy"]))
    assert cfg.ue.drafter == str(builtin_paths()[0]) and cfg.edge.target is None
    local = run.with_pair(run.parse_args(["--pair", "toy"]))
    assert local.ue.drafter == str(builtin_paths()[0]) and local.edge.target == str(builtin_paths()[1])


def test_a_bad_edge_endpoint_is_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        run.parse_args(["--edge", "10.0.0.2:5555"])
    assert "tcp://HOST:PORT" in capsys.readouterr().err


@pytest.mark.root
@pytest.mark.slow
@needs_netns
def test_two_hosts_as_two_network_namespaces(pair_dirs, tmp_path: Path) -> None:
    """The edge in one namespace, testbed.run --edge in the other, over a veth pair (each end its own address)."""
    with topology() as t:
        bind = f"tcp://{t.edge_addr}:5555"
        edge = Child("edge", edge_args(pair_dirs, bind), tmp_path / "edge.log", prefix=exec_prefix(t.edge_ns))
        try:
            edge.wait_for("READY", 120)
            cmd = exec_prefix(t.ue_ns) + [sys.executable, "-m", "testbed.run", "--edge", bind, "--protocol", "all",
                                          *ue_flags(pair_dirs, tmp_path / "run")]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            assert res.returncode == 0, res.stderr[-3000:]
        finally:
            edge.stop()
    assert f"real link to {bind}" in res.stdout
    check_outputs(tmp_path / "run", list(run.ALL_PROTOCOLS), measured=True)

"""Placement helpers: the emulator command for a netns run (fixed link or CSI trace) and its reported trace start."""
import math
from pathlib import Path

import pytest

from channel import emulator
from channel.csi import CSI
from testbed.common.link import LinkSpec
from testbed.live.orchestrate.placement import _emulator_args, _t0_of


def test_emulator_args_fixed_and_trace(tmp_path):
    fixed = _emulator_args(LinkSpec(20.0, 20.0, 30.0, 1.0, 0.01, seed=3), "10.0.0.2")
    assert fixed[0] == "channel.emulator"
    emu = emulator.parse_args(fixed[1:])  # the rate stays on the veth (tbf): the emulator adds delay, jitter, loss
    assert (emu.listen_host, emu.listen_port, emu.target_host, emu.target_port) == ("127.0.0.1", 5601, "10.0.0.2", 5555)
    assert emu.csi == CSI(math.inf, math.inf, 30.0, 0.01, 0.01) and emu.trace is None
    assert (emu.jitter_ms, emu.seed, emu.host_overhead_ms) == (1.0, 3, 0.0)
    comp = _emulator_args(LinkSpec(20.0, 20.0, 30.0, host_overhead_ms=0.9), "10.0.0.2")
    assert emulator.parse_args(comp[1:]).host_overhead_ms == 0.9
    trace = tmp_path / "t.csv"
    traced = emulator.parse_args(_emulator_args(LinkSpec(csi_trace=str(trace)), "10.0.0.2")[1:])
    assert traced.trace == str(Path(trace).resolve()) and traced.csi is None


def test_t0_from_the_emulator_line():
    assert _t0_of("127.0.0.1:5601 -> 10.0.0.2:5555 t0_epoch_s=1700000000.25 config={}") == 1700000000.25
    assert _t0_of("127.0.0.1:5601 -> 10.0.0.2:5555 config={}") is None


def test_run_flag_reaches_the_emulator_config():
    from testbed.live.orchestrate.run import parse_args
    cfg = parse_args(["--rtt-ms", "10", "--host-overhead-ms", "0.8"])
    assert cfg.link.host_overhead_ms == 0.8
    assert cfg.link.emulator_config(5555).host_overhead_ms == 0.8


def test_rejection_threshold_needs_a_predictor_and_reaches_the_ues():
    from testbed.live.orchestrate.run import _ue_args, parse_args
    with pytest.raises(SystemExit):
        parse_args(["--rejection-threshold", "0.9"])
    cfg = parse_args(["--rejection-predictor", "p.safetensors", "--rejection-threshold", "0.9"])
    assert cfg.ue.rejection_threshold == 0.9
    assert parse_args(["--rejection-predictor", "p.safetensors"]).ue.rejection_threshold is None  # the predictor's own
    from testbed.live.orchestrate.placement import Site
    site = Site(connect="tcp://127.0.0.1:5601", t0_epoch_s=0.0)
    args = _ue_args(cfg, ["greedy"], site, Path("prompts.jsonl"), Path("out"), 0, 2)
    assert args[args.index("--rejection-threshold") + 1] == "0.9"

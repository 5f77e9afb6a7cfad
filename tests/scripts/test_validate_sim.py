"""scripts/bench/validate_sim.py: its children's argv, built from their config dataclasses, parse back to those
configs."""
from pathlib import Path

from scripts.bench import validate_sim
from testbed.live.orchestrate import run
from testbed.sim import calibrate
from testbed.sim import cli as sim_cli


def test_run_argv_rebuilds_the_run_config():
    cfg = validate_sim.parse_args(["--prompts", "3", "--draft-len", "6"])
    argv = validate_sim.run_argv(cfg, "fh", 2.0, 50.0, Path("o/runs/fh_2_50"))
    assert argv[1:3] == ["-m", "testbed.run"]
    rc = run.parse_args(argv[3:])
    assert (rc.protocol, rc.prompts, rc.out, rc.ue.draft_len, rc.edge.head) == ("fh", 3, "o/runs/fh_2_50", 6, "none")
    assert (rc.link.rate_up_mbps, rc.link.rate_down_mbps, rc.link.rtt_ms) == (2.0, 2.0, 50.0)


def test_simulate_argvs_rebuild_their_configs():
    argv = validate_sim.calibrate_argv("o/local_profile.json")
    assert argv[1:4] == ["-m", "testbed.simulate", "calibrate"]
    assert calibrate.parse_args(argv[4:]).out == "o/local_profile.json"
    argv = validate_sim.validate_argv(Path("o/runs/g"), Path("o/g"), "o/p.json")
    sim = sim_cli.parse_args(argv[3:])
    assert (sim.validate, sim.out, sim.local_profile) == ("o/runs/g", "o/g", "o/p.json")


def test_a_trace_setting_replays_the_trace():
    cfg = validate_sim.parse_args(["--protocols", "server", "device", "--csi-trace",
                                   "scripts/link/traces/lte_tmobile_short.csv"])
    assert cfg.protocols == ["server", "device"] and not cfg.calibrate_each
    assert validate_sim.parse_args(["--calibrate-each"]).calibrate_each  # a fresh profile before each setting
    argv = validate_sim.run_argv(cfg, "server", 0.0, 0.0, Path("o/runs/lte"), cfg.csi_trace)
    rc = run.parse_args(argv[3:])
    assert rc.protocol == "server" and rc.link.csi_trace == "scripts/link/traces/lte_tmobile_short.csv"


def test_an_unknown_protocol_is_one_line_exit_2(tmp_path, capsys):
    assert validate_sim.main(["--protocols", "bogus", "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown protocol 'bogus'" in err and not (tmp_path / "v").exists()

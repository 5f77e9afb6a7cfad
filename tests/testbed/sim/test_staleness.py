"""The local profile cannot go stale silently: the pure comparison, and the warnings of --validate and the simulator."""
import json

import pytest

import testbed.sim.calibrate as calibrate_mod
from testbed.common.machine import machine_info
from testbed.sim.cli import SimConfig, parse_args, run
from testbed.sim.staleness import SAME_SITTING_S, machine_differences, now_utc, staleness_warnings
from tests.testbed.sim.test_simulate import FAST, _run_dir
from wisv.timing.calibrate import Calibration, save_calibration

HERE = {"cpu_model": "Xeon", "cpu_count": 2, "platform": "Linux-6", "python": "3.11.9", "torch": "2.13.0",
        "transformers": "5.0.0", "git_commit": "a" * 40}
T0 = "2026-11-22T10:00:00+00:00"


def test_same_machine_in_the_same_sitting_warns_nothing():
    assert staleness_warnings(HERE, HERE | {"git_commit": "b" * 40}, T0, "2026-11-22T10:59:00+00:00") == []
    assert staleness_warnings(HERE, HERE, T0, None) == []  # no run: the time is not compared


@pytest.mark.parametrize("key, value", [("cpu_model", "EPYC"), ("cpu_count", 16), ("torch", "2.6.0"),
                                        ("platform", "Linux-5")])
def test_another_machine_is_named_key_by_key(key, value):
    assert machine_differences(HERE, HERE | {key: value}) == [f"{key}: {HERE[key]!r} -> {value!r}"]
    (w,) = staleness_warnings(HERE, HERE | {key: value}, T0, None)
    assert "another machine" in w and key in w and "testbed.simulate calibrate" in w


def test_an_older_record_has_an_unknown_machine_and_time():
    w = staleness_warnings(None, HERE, None, T0)
    assert len(w) == 2 and "machine it was measured on is unknown" in w[0] and "no calibration time" in w[1]


def test_a_profile_hours_older_than_the_run_warns():
    run_at = "2026-11-22T12:30:00+00:00"
    (w,) = staleness_warnings(HERE, HERE, T0, run_at)
    assert "2.5 h older than the run" in w
    assert SAME_SITTING_S < 2.5 * 3600
    assert staleness_warnings(HERE, HERE, run_at, T0) == []  # calibrated after the run: not stale


def _profile(path, notes):
    save_calibration(Calibration(FAST, exchange_overhead_s=0.002, notes=notes), path)
    return str(path)


def test_validate_warns_on_stderr_and_in_validation_json(tmp_path, capsys):
    run_dir = _run_dir(tmp_path)
    other = machine_info() | {"cpu_count": 999}
    prof = _profile(tmp_path / "old.json", {"machine": other, "measured_at": "2020-01-01T00:00:00+00:00"})
    run(parse_args(["--validate", str(run_dir), "--out", str(tmp_path / "v"), "--local-profile", prof]))
    err = capsys.readouterr().err
    assert err.count("WARNING: local profile") == 2 and "cpu_count: 999" in err and "older than the run" in err
    check = json.loads((tmp_path / "v" / "validation.json").read_text())["profile_check"]
    assert len(check["warnings"]) == 2 and check["profile_machine"]["cpu_count"] == 999
    assert check["current_machine"] == machine_info()


def test_validate_with_calibrate_measures_first_and_then_warns_nothing(tmp_path, capsys, monkeypatch):
    run_dir, prof = _run_dir(tmp_path), tmp_path / "fresh.json"
    calls = []

    def fake_calibrate(cfg):
        calls.append(cfg)
        _profile(cfg.out, {"machine": machine_info(), "measured_at": now_utc()})
    monkeypatch.setattr(calibrate_mod, "calibrate", fake_calibrate)
    argv = ["--validate", str(run_dir), "--out", str(tmp_path / "v"), "--local-profile", str(prof), "--calibrate"]
    run(parse_args(argv))
    assert [(c.out, c.drafter, c.target) for c in calls] == [(str(prof), None, None)]  # the run's pair: built-in
    assert "WARNING" not in capsys.readouterr().err
    assert json.loads((tmp_path / "v" / "validation.json").read_text())["profile_check"]["warnings"] == []


def test_calibrate_needs_the_local_profile():
    with pytest.raises(ValueError, match="--calibrate measures the 'local' profile"):
        run(SimConfig(calibrate=True))


def test_simulator_on_an_old_local_profile_warns(tmp_path, capsys, pair_dirs):
    prof = _profile(tmp_path / "old.json", {})
    cfg = SimConfig(out=str(tmp_path / "out"), methods=["greedy"], draft_lens=[2], rates_mbps=[20.0], rtts_ms=[5.0],
                    prompts=1, max_new_tokens=6, head="none", cache_dir=str(tmp_path / "cache"),
                    drafter=str(pair_dirs.drafter), target=str(pair_dirs.target), ue_profile="local",
                    edge_profile="local", local_profile=prof)
    run(cfg)
    assert "the machine it was measured on is unknown" in capsys.readouterr().err
    check = json.loads((tmp_path / "out" / "config.json").read_text())["profile_check"]
    assert check["profile_machine"] is None and len(check["warnings"]) == 1

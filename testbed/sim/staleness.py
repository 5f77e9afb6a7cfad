"""Is the ``local`` profile stale? Warn when it was measured on another machine, or well before the run it predicts.

``python -m testbed.simulate calibrate`` records the machine (``testbed.common.machine.machine_info``) and the
time in the calibration record's notes.  A profile from another CPU, core count, platform or library version
predicts another machine; one measured hours before the run misses this VM's drift (~10% over hours: a
validation was off by 15.7% with the committed profile, by 2.3% with one calibrated in the same sitting).
"""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from testbed.common.machine import machine_info
from wisv.timing.calibrate import load_calibration

MACHINE_KEYS = ("cpu_model", "cpu_count", "platform", "python", "torch", "transformers")  # compared; git is not
SAME_SITTING_S = 3600.0  # a profile measured at most this long before the run counts as current, s
RECALIBRATE = "re-calibrate with `python -m testbed.simulate calibrate` (or add --calibrate)"


@dataclass
class ProfileCheck:
    """What was compared and what it found (written into config.json / validation.json)."""

    path: str  # the calibration record checked
    profile_machine: dict | None  # the machine it records (None: an older record without one)
    current_machine: dict  # this machine, now
    measured_at: str | None  # when it was calibrated, ISO 8601 UTC (None: not recorded)
    run_at: str | None  # when the validated run was written, ISO 8601 UTC (None: not validating a run)
    warnings: list[str]  # empty when the profile fits

    def to_dict(self) -> dict:
        return asdict(self)


def now_utc() -> str:
    """The current time as calibration records store it."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def machine_differences(recorded: dict, current: dict) -> list[str]:
    """'key: profile value -> this machine's value' for each MACHINE_KEYS entry that differs."""
    return [f"{k}: {recorded.get(k)!r} -> {current.get(k)!r}" for k in MACHINE_KEYS
            if recorded.get(k) != current.get(k)]


def staleness_warnings(profile_machine: dict | None, current: dict, measured_at: str | None,
                       run_at: str | None) -> list[str]:
    """Pure: one sentence per reason the profile may not predict this machine or this run."""
    out = []
    if not profile_machine:
        out.append(f"it records no machine (calibrated before profiles recorded one): the machine it was measured "
                   f"on is unknown; {RECALIBRATE}")
    elif diffs := machine_differences(profile_machine, current):
        out.append(f"it was measured on another machine ({'; '.join(diffs)}); {RECALIBRATE}")
    if run_at is not None and measured_at is None:
        out.append("it records no calibration time: it may be older than the run")
    elif run_at is not None:
        age_s = (datetime.fromisoformat(run_at) - datetime.fromisoformat(measured_at)).total_seconds()
        if age_s > SAME_SITTING_S:
            out.append(f"it is {age_s / 3600:.1f} h older than the run (measured {measured_at}, run {run_at}); "
                       f"this machine's speed drifts over hours: {RECALIBRATE} in the run's sitting")
    return out


def run_time(run_dir: str | Path) -> str:
    """When a testbed.run directory was written: its config.json's modification time, ISO 8601 UTC."""
    mtime = (Path(run_dir) / "config.json").stat().st_mtime
    return datetime.fromtimestamp(mtime, UTC).isoformat(timespec="seconds")


def check_profile(path: str | Path, run_at: str | None = None, current: dict | None = None) -> ProfileCheck:
    """Compare the calibration record at ``path`` with this machine (and with the run's time, when validating)."""
    notes = load_calibration(path).notes
    current = machine_info() if current is None else current
    check = ProfileCheck(str(path), notes.get("machine"), current, notes.get("measured_at"), run_at, [])
    check.warnings = staleness_warnings(check.profile_machine, current, check.measured_at, run_at)
    return check


def print_warnings(check: ProfileCheck) -> None:
    """Each warning on stderr, after the results (where the user looks)."""
    for w in check.warnings:
        print(f"\nWARNING: local profile {check.path}: {w}", file=sys.stderr)

"""``testbed.run --continue DIR``: go on with an interrupted run (power cut, Ctrl-C, OOM, kill -9) where it stopped.

A run records every child it starts (edge, emulator, UEs) and the namespaces open at that moment in
``DIR/processes.jsonl``, one line each, as it starts them.  ``--continue`` first stops the recorded processes that
still run (matched by PID and start time, so a reused PID is left alone) and deletes the recorded namespaces that
still exist; it refuses a run that is complete, still running, or whose config would differ (one line naming the
field).  Then each UE keeps the prompts already complete in its ``outputs.jsonl`` (and their rounds from
``rounds.jsonl``), drops the unfinished prompt's rows, and runs only the rest with the same config (``--keep-done``:
testbed/live/ue/kept.py): the same seeds per prompt index, so a lossless protocol gives the outputs of an
uninterrupted run.  Per-UE files are appended one line at a time or replaced atomically; a line cut short by the kill
is dropped.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from testbed.common.files import COMPLETE_FILE, complete_lines

RECORD_FILE = "processes.jsonl"  # the run's children and namespaces, one JSON line per child started
IGNORED = ("out", "overwrite", "continue_dir")  # RunConfig fields a continue may give differently


class ContinueError(ValueError):
    """The run directory cannot be continued as asked."""


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


class Recorder:
    """Appends one line per child to DIR/processes.jsonl (procs.Child calls it as each child starts)."""

    def __init__(self, out: Path):
        self.path = out / RECORD_FILE
        self._line({"name": "run", "pid": os.getpid(), "start_ticks": start_ticks(os.getpid()), "namespaces": []})

    def __call__(self, child) -> None:
        from channel.netns import open_namespaces  # the namespaces open now (netns placement)
        self._line({"name": child.name, "pid": child.proc.pid, "start_ticks": start_ticks(child.proc.pid),
                    "namespaces": open_namespaces()})

    def _line(self, rec: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())


def recorded(out: Path) -> list[dict]:
    """The records of DIR/processes.jsonl (a line cut short by a kill is skipped)."""
    return complete_lines(out / RECORD_FILE)


def check_continuable(out: Path) -> None:
    """Refuse a directory that is not a run's, is complete, or whose run still runs."""
    if not (out / "config.toml").is_file():
        raise ContinueError(f"--continue {out}: no config.toml there (not a testbed.run directory)")
    if (out / COMPLETE_FILE).is_file():
        raise ContinueError(f"--continue {out}: the run is complete (its '{COMPLETE_FILE}' marker is there)")
    runs = [r for r in recorded(out) if r["name"] == "run" and _alive(r)]
    if runs:
        raise ContinueError(f"--continue {out}: its run is still running (PID {runs[-1]['pid']}); stop it first")


def stop_leftovers(out: Path, grace_s: float = 5.0) -> list[str]:
    """Stop the recorded children still running (by PID, start time checked) and delete the recorded namespaces
    still there; returns what was stopped or deleted."""
    recs = recorded(out)
    live = [r for r in recs if r["name"] != "run" and _alive(r)]
    for r in live:
        os.kill(r["pid"], signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(r) for r in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    for r in live:
        if _alive(r):
            os.kill(r["pid"], signal.SIGKILL)
    done = [f"{r['name']} (PID {r['pid']})" for r in live]
    for ns in dict.fromkeys(ns for r in recs for ns in r.get("namespaces", [])):
        if subprocess.run(["ip", "netns", "del", ns], capture_output=True).returncode == 0:
            done.append(f"namespace {ns}")
    return done


def _alive(rec: dict) -> bool:
    ticks = start_ticks(rec["pid"])
    return ticks is not None and ticks == rec.get("start_ticks") and not _zombie(rec["pid"])


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def differing_field(saved: dict, given: dict, prefix: str = "") -> str | None:
    """The first field (dotted path) whose value differs between two nested config dicts, IGNORED left out."""
    for k in sorted(set(saved) | set(given)):
        if not prefix and k in IGNORED:
            continue
        a, b = saved.get(k), given.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            if (sub := differing_field(a, b, f"{prefix}{k}.")) is not None:
                return sub
        elif a != b:
            return f"{prefix}{k}"
    return None


def continued(argv: list[str], parse) -> object:
    """The config of ``testbed.run --continue DIR [flags]``: DIR/config.toml, which the other flags may only repeat
    (``parse``: testbed.run's argv parser).  Refuses (ContinueError) a directory that cannot be continued or a flag
    that changes the config, naming it."""
    import config  # the project's config package (flags of the fields)
    given = parse(argv)
    out = Path(given.continue_dir)
    check_continuable(out)
    rest = _without_continue(argv)
    saved = parse(["--config", str(out / "config.toml")])
    merged = parse(["--config", str(out / "config.toml"), *rest])
    name = differing_field(config.to_dict(saved), config.to_dict(merged))
    if name is not None:
        flag = next((f.flag for f in config.flags(type(saved)) if ".".join(f.path) == name), name)
        raise ContinueError(f"--continue {out}: {flag} differs from the interrupted run's config ({out}/config.toml); "
                            "a continued run keeps its config (start a new run to change it)")
    return replace(merged, out=str(out), continue_dir=str(out))


def _without_continue(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--continue":
            skip = True
        elif not a.startswith("--continue="):
            out.append(a)
    return out

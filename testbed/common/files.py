"""A run's output directory: refuse to mix runs (or start clean), write files atomically, mark the run complete.

A summary is written to a temporary file beside it and renamed over it (``os.replace``), so a reader sees the
old file or the new one, never half of one; it gets the mode any other file the run writes gets (0666 less the
umask, as ``open`` gives), not mkstemp's 0600.  ``COMPLETE_FILE`` is written last: a directory without it holds a
run that was interrupted or failed (its per-round records are still there).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd

COMPLETE_FILE = "complete"  # written last, as JSON: when the run finished and what it wrote
CONFIG_FILES = ("config.json", "config.toml")  # the resolved config a run saves before its work


def _file_mode() -> int:
    """0666 less the process's umask: the mode ``open(path, "w")`` creates files with."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


FILE_MODE = _file_mode()  # read once at import (changing the umask is process-wide, so not done while running)


class OutDirError(ValueError):
    """The output directory cannot be used as asked."""


def prepare_out(out: Path, overwrite: bool, own: tuple[str, ...] = ()) -> None:
    """Create ``out``; a non-empty one is refused unless ``overwrite``, and then emptied first (never merged).
    ``own``: files a run writes before its work (its config): left by a failed run without the ``complete`` marker,
    they are removed without ``overwrite``, so that the corrected rerun goes ahead."""
    if out.exists() and not out.is_dir():
        raise OutDirError(f"--out {out} is a file, not a directory")
    entries = sorted(out.iterdir()) if out.is_dir() else []
    if entries and all(p.name in own and p.is_file() for p in entries):
        for p in entries:
            p.unlink()
        entries = []
    if entries and not overwrite:
        shown = ", ".join(p.name for p in entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise OutDirError(f"--out {out} is not empty ({len(entries)} entries: {shown}); pass --overwrite to remove "
                          "its contents first, or choose another directory")
    if entries:
        _refuse_precious(out)
        for p in entries:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _refuse_precious(out: Path) -> None:
    """--overwrite never empties the file system root, a home directory, or the working directory or its parents."""
    real = out.resolve()
    cwd = Path.cwd().resolve()
    if real == Path(real.anchor) or real == Path.home().resolve() or real == cwd or real in cwd.parents:
        raise OutDirError(f"--overwrite refuses to empty {out} (the root, home, working directory or a parent of it)")


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, doc: object) -> None:
    write_text_atomic(path, json.dumps(doc, indent=1))


def write_csv_atomic(path: Path, df: pd.DataFrame) -> None:
    write_text_atomic(path, df.to_csv(index=False))


def mark_complete(out: Path, started_s: float, wrote: list[str]) -> None:
    """The completion marker, written last: finish time, wall time and the files the run wrote."""
    write_json_atomic(out / COMPLETE_FILE, {"complete": True, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                            "wall_s": time.time() - started_s, "wrote": wrote})


def is_complete(out: Path) -> bool:
    return (out / COMPLETE_FILE).is_file()


def complete_lines(path: Path) -> list[dict]:
    """The JSON lines of a file appended line by line; a last line cut short (no newline, or not JSON) is dropped."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    rows = []
    for line in text.split("\n")[:-1]:  # what follows the last newline was never finished
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows

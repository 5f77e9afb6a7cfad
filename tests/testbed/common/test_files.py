"""A run's output directory: one file mode for everything written, and a failed run's config no block to its rerun."""
from __future__ import annotations

import os
import stat

import pandas as pd
import pytest

from testbed.common.files import (
    CONFIG_FILES,
    FILE_MODE,
    OutDirError,
    mark_complete,
    prepare_out,
    write_csv_atomic,
    write_json_atomic,
)


def test_atomic_files_get_the_mode_plain_files_get(tmp_path):
    write_json_atomic(tmp_path / "summary.json", {"a": 1})
    write_csv_atomic(tmp_path / "rounds.csv", pd.DataFrame({"a": [1]}))
    (tmp_path / "plain.txt").write_text("x")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert set(modes.values()) == {FILE_MODE}, modes
    mask = os.umask(0o022)
    os.umask(mask)
    assert FILE_MODE == 0o666 & ~mask  # 0644 under the usual umask, not mkstemp's 0600


def test_a_failed_runs_config_files_do_not_block_its_rerun(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in CONFIG_FILES:
        (out / name).write_text("{}")
    prepare_out(out, overwrite=False, own=CONFIG_FILES)  # what a run that failed before its work left
    assert list(out.iterdir()) == []


def test_a_finished_run_still_needs_overwrite(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in CONFIG_FILES:
        (out / name).write_text("{}")
    mark_complete(out, 0.0, ["summary.csv"])
    with pytest.raises(OutDirError, match="not empty"):
        prepare_out(out, overwrite=False, own=CONFIG_FILES)

"""The JSONL reader and writer the project's records use (no heavy imports)."""
from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, rows) -> None:
    """One JSON object per line."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_splits(out_dir: Path | str, splits: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Each named split as ``out_dir/NAME.jsonl`` (the folder made if need be), one line printed per file; the
    splits."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        write_jsonl(out / f"{name}.jsonl", rows)
        print(f"{name}: {len(rows)} rows -> {out / f'{name}.jsonl'}")
    return splits


def read_jsonl(path: Path) -> list[dict]:
    """Every non-blank line as a JSON object."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

"""The JSONL reader and writer the project's records use (no heavy imports)."""
from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, rows) -> None:
    """One JSON object per line."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def read_jsonl(path: Path) -> list[dict]:
    """Every non-blank line as a JSON object."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

"""The target's greedy generations for distillation, cached on disk prompt by prompt, so that a killed run skips the
prompts it has done.

One JSONL file per source and generation settings (``<cache>/distill/gen/<source>-<settings hash>.jsonl``); each line
is ``{"key": sha256 of prompt + settings, "row": [prompt length, ids, top-k ids, top-k logits]}``, appended and flushed
batch by batch.  A line cut short by a kill is ignored when read (its batch is generated again).  Batches are formed
over the whole prompt list, so a restart batches the remaining prompts as the first run would have.  No torch."""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

Row = list  # [prompt length, prompt + greedy continuation ids, top-k ids per generated position, top-k logits]


def settings_hash(settings: dict) -> str:
    """A short hash of the generation settings (target identity, generation length, top-k)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def prompt_key(prompt: str, settings: dict) -> str:
    """The cache key of one prompt under some generation settings."""
    return hashlib.sha256(json.dumps([prompt, settings], sort_keys=True).encode()).hexdigest()[:24]


def cache_path(root: Path, source: str, settings: dict) -> Path:
    """The JSONL file of one source's generations under these settings."""
    return root / f"{source}-{settings_hash(settings)}.jsonl"


def read_cache(path: Path) -> dict[str, Row]:
    """key -> row of every complete line (a torn last line, left by a kill, is skipped)."""
    out = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        out[rec["key"]] = rec["row"]
    return out


def append_cache(path: Path, entries: list[tuple[str, Row]]) -> None:
    """Append (key, row) lines and flush them to disk before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"key": k, "row": r}) + "\n" for k, r in entries)
    with path.open("a") as f:
        if f.tell() and not _ends_with_newline(path):
            f.write("\n")  # close a line torn by a kill, so it stays one unreadable line
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def cached_generate(prompts: list[str], path: Path, settings: dict, batch: int,
                    generate: Callable[[list[str]], list[Row]], tag: str = "") -> list[Row]:
    """One row per prompt, in order: from the cache where there, else from ``generate`` (called on the missing
    prompts of each batch of ``batch`` prompts) and appended to the cache."""
    done, t0, made = read_cache(path), time.perf_counter(), 0
    keys = [prompt_key(p, settings) for p in prompts]
    for i in range(0, len(prompts), batch):
        missing = [j for j in range(i, min(i + batch, len(prompts))) if keys[j] not in done]
        if not missing:
            continue
        rows = generate([prompts[j] for j in missing])
        append_cache(path, [(keys[j], r) for j, r in zip(missing, rows)])
        done |= {keys[j]: r for j, r in zip(missing, rows)}
        made += len(missing)
        print(f"[generate] {tag}{i + len(missing)}/{len(prompts)} prompts ({made} generated now), "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    print(f"[generate] {tag}{len(prompts)} prompts: {len(prompts) - made} from {path}, {made} generated", flush=True)
    return [done[k] for k in keys]

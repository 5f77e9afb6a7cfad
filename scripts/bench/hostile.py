"""Hostile-peer probe benchmark (issue 27): for each probe of testbed/hostile/probes.py, a fresh ``testbed.serve`` on
loopback, the probe against it while a good greedy UE runs, and the edge's RSS (before, peak) and the UE's round p95.

    python -m scripts.bench.hostile --out results/bench_hostile.json                      # this checkout
    git archive 2522645 | tar -x -C /tmp/before                                           # an older one, then:
    python -m scripts.bench.hostile --repo /tmp/before --label before --out results/bench_hostile.json

``--repo`` runs that checkout's edge and UE (the probes speak its wire version); each run adds its label's rows to
``--out`` (JSON: ``{label: {probe: row}}``), so before and after land in one file.  Probes in AUTH_PROBES attack an
edge with ``--auth KEYS --batch-verify`` (heartbeats on), the others one with neither.  Loopback only; every child is
stopped by its PID.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path

from protocols import wire
from testbed.hostile.probes import AUTH_PROBES, PROBES, Target, good_ue_cmd, run_beside
from testbed.live.common.auth import write_keys
from testbed.live.orchestrate.procs import Child
from wisv.models.loader import builtin_paths

ROOT = Path(__file__).resolve().parents[2]

MB = 2**20


def wire_version(repo: Path) -> int:
    """The WIRE_VERSION a checkout speaks (read from its protocols/schema.py)."""
    m = re.search(r"^WIRE_VERSION = (\d+)", (repo / "protocols" / "schema.py").read_text(), re.M)
    if m is None:
        raise SystemExit(f"bench_hostile: error: no WIRE_VERSION in {repo}/protocols/schema.py")
    return int(m.group(1))


def one(probe: str | None, repo: Path, keys: Path, work: Path, prompts: int) -> dict:
    """A fresh edge from ``repo``, ``probe`` against it beside a good UE; the row."""
    auth = probe in AUTH_PROBES
    target_dir, drafter = (str(p) for p in builtin_paths()[::-1])
    args = ["testbed.serve", "--bind", "tcp://127.0.0.1:0", "--target", target_dir, "--head", "none"]
    args += ["--auth", str(keys), "--batch-verify"] if auth else []
    tag = probe or "none"
    in_repo = ["env", "-C", str(repo), f"PYTHONPATH={repo}"]  # python -m imports from the cwd first
    edge = Child(f"edge-{tag}", args, work / f"{tag}.edge.log", prefix=in_repo)
    try:
        endpoint = edge.wait_for("READY", 180)
        t = Target(endpoint, keys if auth else None, edge.log_path, 50)
        cmd = in_repo + good_ue_cmd(endpoint, Path(drafter), work / tag, t.keys, prompts)
        t0 = time.monotonic()
        res = run_beside(probe, t, edge.proc.pid, cmd, work / tag, alive=lambda: edge.proc.poll() is None)
        crashed = None if res.edge_alive else edge.proc.returncode
    finally:
        edge.stop()
    row = {"edge_rss_before_mb": round(res.rss_before / MB, 1), "edge_rss_peak_mb": round(res.rss_peak / MB, 1),
           "edge_rss_growth_mb": round((res.rss_peak - res.rss_before) / MB, 1),
           "ue_round_p95_s": res.round_p95_s, "ue_rc": res.rc, "ue_matches_target": res.matches_target,
           "edge_alive": res.edge_alive, "edge_exit_code": crashed, "wall_s": round(time.monotonic() - t0, 1),
           "auth": auth, "probe_stats": res.probe}
    print(f"{tag:18s} rss {row['edge_rss_before_mb']:7.1f} -> {row['edge_rss_peak_mb']:7.1f} MB  "
          f"p95 {res.round_p95_s}  ue rc {res.rc}  matches {res.matches_target}  alive {res.edge_alive}", flush=True)
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench.hostile", description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(ROOT), help="checkout whose testbed.serve and testbed.ue run (default: this)")
    ap.add_argument("--label", default="after", help="key of this run's rows in --out (e.g. before, after)")
    ap.add_argument("--probes", default=",".join(PROBES), help=f"comma-separated subset of {', '.join(PROBES)}")
    ap.add_argument("--prompts", type=int, default=2, help="prompts the good UE runs (greedy, 16 tokens each)")
    ap.add_argument("--out", default="runs/bench_hostile.json",
                    help="JSON file the rows are merged into (the committed one: results/bench_hostile.json)")
    a = ap.parse_args(argv)
    repo, names = Path(a.repo).resolve(), [p for p in a.probes.split(",") if p]
    if unknown := [p for p in names if p not in PROBES]:
        ap.error(f"unknown probe(s) {unknown}; known: {', '.join(PROBES)}")
    if a.prompts < 1:
        ap.error(f"--prompts: must be >= 1, got {a.prompts}")
    if not (repo / "testbed" / "serve.py").exists():
        ap.error(f"--repo {repo}: no testbed/serve.py there; give a checkout of this project")
    wire.WIRE_VERSION = wire_version(repo)  # the probes' messages in the edge's version
    os.environ["OMP_NUM_THREADS"] = "1"
    out = Path(a.out)
    doc = json.loads(out.read_text()) if out.exists() else {}
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        work = Path(tmp)
        write_keys(work / "keys")
        rows = {"none": one(None, repo, work / "keys", work, a.prompts)}
        for probe in names:
            rows[probe] = one(probe, repo, work / "keys", work, a.prompts)
    doc[a.label] = {"repo": str(repo), "wire_version": wire.WIRE_VERSION, "probes": rows,
                    "machine": f"{os.cpu_count()} cores", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out} [{a.label}]")


if __name__ == "__main__":
    main()

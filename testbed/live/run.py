"""Orchestrator: start the edge and the UE(s) as separate processes with the link emulator between them.

Usage: ``python -m testbed.run --protocol auto`` (built-in pair, 20 test prompts, 20 Mbps / 20 ms).
``--protocol all`` runs every protocol on the same prompts and link and prints them side by side.
Writes per protocol ``rounds.csv``, ``outputs.jsonl`` and ``summary.json`` to ``--out DIR/<protocol>``,
plus ``config.json``, ``prompts.jsonl``, ``reference.jsonl`` and ``summary.csv`` to ``--out DIR``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from protocols.registry import ALL_PROTOCOLS, PROTOCOLS
from testbed.common.heads import HEAD_HELP, load_policy
from testbed.common.link import LinkSpec, resolve_rates
from testbed.common.summary import summarize, table
from testbed.live import placement
from testbed.live.procs import Child, progress_handler
from testbed.live.prompts import load_prompts, reference_outputs
from testbed.live.wakeup import cpu_wakeup_bound
from wisv.jsonl import read_jsonl, write_jsonl
from wisv.records import read_records


@dataclass
class RunConfig:
    """One testbed run (collected into config.json next to the results)."""

    protocol: str = "auto"  # greedy | reject | fh | sh | auto | all
    prompts: int = 20  # first N problems of the built-in test split (or of --prompts-file)
    prompts_file: str | None = None  # JSONL with prompt (text) or prompt_ids, optional prompt_id and answer
    draft_len: int = 8  # K
    max_new_tokens: int = 160  # budget per prompt
    out: str = ""  # output directory; default runs/<time>-<protocol>
    seed: int = 0  # sampling and link-loss seed
    link: LinkSpec = field(default_factory=LinkSpec)  # emulated link
    drafter: str | None = None  # local HF drafter directory (None: built-in)
    target: str | None = None  # local HF target directory (None: built-in)
    device: str = "cpu"  # torch device for both processes
    head: str = "default"  # decision head of the edge: default | none | accept-all | PATH (testbed/heads.py)
    tau: float | None = None  # decision threshold, reject iff p >= tau (None: the head's own tau)
    auto_rule: str = "cost"  # auto's FH/SH rule: cost | rtt
    temperature: float = 1.0  # sampling temperature (reject)
    ues: int = 1  # UE processes; prompts are dealt round-robin
    probe_bytes: int = 8192  # rate-probe size before each request (0: RTT handshake only)
    reference: bool = True  # compute target-only greedy outputs for matches_target
    rejection_predictor: str | None = None  # UEs end each block at the first predicted rejection (WISP)
    rejection_threshold: float | None = None  # predicted rejected when p(rejected) >= this (None: the predictor's)
    proactive: int = 0  # UEs draft up to this many tokens past each block while it is verified (SpecEdge)
    pipeline_depth: bool = False  # UEs pick K per round: K * tau_d + RTT ~= the edge's verify time (SpecEdge)
    batch_verify: bool = False  # edge verifies concurrent UEs' drafts in one pass (testbed.serve --batch-verify)
    kv_reuse: bool = True  # False: the edge recomputes each prefix every round (SLED baseline)
    cpu_wakeup_us: int | None = None  # hold this CPU wake-up latency bound during the run (testbed/wakeup.py)
    netns: bool = False  # edge and UEs in their own network namespaces (root), tc on the veth

    def protocols(self) -> list[str]:
        return list(ALL_PROTOCOLS) if self.protocol == "all" else [self.protocol]


def run(cfg: RunConfig) -> list[dict]:
    """Run every requested protocol on the same prompts and link; return their summaries."""
    _, tau, head_desc = load_policy(cfg.head, cfg.tau, cfg.target)  # fail fast on a bad --head
    out = Path(cfg.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{cfg.protocol}")
    out.mkdir(parents=True, exist_ok=True)
    resolved = {"out": str(out), "head_resolved": head_desc, "tau_resolved": tau}
    (out / "config.json").write_text(json.dumps(asdict(cfg) | resolved | _versions(), indent=1))
    prompts, tok = load_prompts(cfg, out / "prompts.jsonl")
    refs = reference_outputs(cfg, prompts, out / "reference.jsonl") if cfg.reference else None
    summaries = []
    with cpu_wakeup_bound(cfg.cpu_wakeup_us) as wakeup, \
            (placement.netns if cfg.netns else placement.local)(cfg, out, _edge_args(cfg)) as site:
        for note in site.notes + ([wakeup] if cfg.cpu_wakeup_us is not None else []):
            print(f"link: {note}")
        for proto in cfg.protocols():
            pdir = out / proto
            _run_ues(cfg, proto, site, out / "prompts.jsonl", pdir, len(prompts))
            s = _collect(proto, pdir, prompts, tok, refs)
            (pdir / "summary.json").write_text(json.dumps(s, indent=1))
            summaries.append(s)
    pd.DataFrame(summaries).to_csv(out / "summary.csv", index=False)
    print(f"\nlink: {_describe_link(cfg.link)}; K={cfg.draft_len}; head={head_desc}; results in {out}")
    print(table(summaries))
    return summaries


def _run_ues(cfg: RunConfig, proto: str, site: placement.Site, prompts_file: Path, pdir: Path, n: int) -> None:
    """Start cfg.ues UE processes for one protocol and wait for all of them, with one progress bar."""
    pdir.mkdir(parents=True, exist_ok=True)
    rows = read_jsonl(prompts_file)
    ues = []
    with tqdm(total=n, desc=proto, unit="prompt") as bar:
        try:
            for u in range(cfg.ues):
                part = pdir / f"prompts-ue{u}.jsonl"
                write_jsonl(part, rows[u::cfg.ues])
                ues.append(Child(f"ue{u}", _ue_args(cfg, proto, site, part, pdir / f"ue{u}", u),
                                 pdir / f"ue{u}.log", progress_handler(bar), prefix=site.ue_prefix))
            for ue in ues:
                if ue.wait() != 0:
                    raise RuntimeError(f"{ue.name} ({proto}) failed; see {ue.log_path}")
        finally:
            for ue in ues:
                ue.stop()


def _collect(proto: str, pdir: Path, prompts: pd.DataFrame, tok, refs) -> dict:
    """Merge the UEs' records into <pdir>/rounds.csv and outputs.jsonl, then summarize."""
    ue_dirs = sorted(d for d in pdir.glob("ue*") if d.is_dir())
    frames = [f for f in (read_records(d / "rounds.csv") for d in ue_dirs) if len(f)]
    rounds = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    outputs = pd.concat([pd.read_json(d / "outputs.jsonl", lines=True) for d in ue_dirs], ignore_index=True)
    rounds.to_csv(pdir / "rounds.csv", index=False)
    outputs.to_json(pdir / "outputs.jsonl", orient="records", lines=True)
    return summarize(proto, rounds, outputs, prompts, tok.decode, refs)


def _edge_args(cfg: RunConfig) -> list[str]:
    args = ["testbed.serve", "--head", cfg.head, "--device", cfg.device, "--max-draft-len", str(max(64, cfg.draft_len))]
    args += ["--tau", str(cfg.tau)] if cfg.tau is not None else []
    args += ["--batch-verify"] if cfg.batch_verify else []
    args += [] if cfg.kv_reuse else ["--no-kv-reuse"]
    return args + (["--target", cfg.target] if cfg.target else [])


def _ue_args(cfg: RunConfig, proto: str, site: placement.Site, prompts: Path, out: Path, u: int) -> list[str]:
    args = ["testbed.ue", "--connect", site.connect, "--prompts-file", str(prompts), "--out", str(out),
            "--ue-id", f"ue{u}", "--protocol", proto, "--auto-rule", cfg.auto_rule, "--draft-len", str(cfg.draft_len),
            "--max-new-tokens", str(cfg.max_new_tokens), "--temperature", str(cfg.temperature),
            "--seed", str(cfg.seed), "--probe-bytes", str(cfg.probe_bytes), "--device", cfg.device,
            "--link-json", json.dumps(asdict(cfg.link)), "--link-t0-epoch-s", repr(site.t0_epoch_s)]
    args += ["--rejection-predictor", cfg.rejection_predictor] if cfg.rejection_predictor else []
    args += ["--rejection-threshold", str(cfg.rejection_threshold)] if cfg.rejection_threshold is not None else []
    args += ["--proactive", str(cfg.proactive)] if cfg.proactive else []
    args += ["--pipeline-depth", "1"] if cfg.pipeline_depth else []
    return args + (["--drafter", cfg.drafter] if cfg.drafter else [])


def _describe_link(link: LinkSpec) -> str:
    if link.csi_trace:
        return f"trace {link.csi_trace}"
    rate = lambda r: "unlimited" if not r else f"{r:g} Mbps"  # noqa: E731
    comp = f", host overhead {link.host_overhead_ms:g} ms/direction taken out" if link.host_overhead_ms else ""
    return (f"up {rate(link.rate_up_mbps)}, down {rate(link.rate_down_mbps)}, RTT {link.rtt_ms:g} ms, "
            f"jitter {link.jitter_ms:g} ms, PER {link.per:g}{comp}")


def _versions() -> dict:
    import torch
    import transformers
    return {"versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                         "transformers": transformers.__version__}}


def parse_args(argv: list[str] | None = None) -> RunConfig:
    d, dl = RunConfig(), LinkSpec()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default=d.protocol, choices=sorted(PROTOCOLS) + ["all"])
    ap.add_argument("--prompts", type=int, default=d.prompts, help="number of prompts")
    ap.add_argument("--prompts-file", default=None, help="JSONL of prompts (default: built-in test split)")
    ap.add_argument("--draft-len", type=int, default=d.draft_len, help="K, draft tokens per round")
    ap.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    ap.add_argument("--out", default="", help="output directory (default runs/<time>-<protocol>)")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--rate-mbps", type=float, default=dl.rate_up_mbps, help="both directions; 0 = unlimited")
    ap.add_argument("--rate-up-mbps", type=float, default=None)
    ap.add_argument("--rate-down-mbps", type=float, default=None)
    ap.add_argument("--rtt-ms", type=float, default=dl.rtt_ms)
    ap.add_argument("--jitter-ms", type=float, default=dl.jitter_ms)
    ap.add_argument("--per", type=float, default=dl.per, help="packet error rate per direction")
    ap.add_argument("--csi-trace", default=None, help="CSV of t_s, rate_up_mbps, rate_down_mbps, rtt_ms, per")
    ap.add_argument("--host-overhead-ms", type=float, default=dl.host_overhead_ms,
                    help="hosts' one-way cost (sockets, wake-ups, relay) the user-space emulator takes out of each "
                         "direction's delay, so that t_comm matches the link model; scripts/bench_link.py measures it")
    ap.add_argument("--drafter", default=None, help="local HF drafter directory")
    ap.add_argument("--target", default=None, help="local HF target directory")
    ap.add_argument("--device", default=d.device)
    ap.add_argument("--head", default=d.head, help=HEAD_HELP)
    ap.add_argument("--tau", type=float, default=d.tau, help="reject a mismatch iff p >= tau (default: the head's tau)")
    ap.add_argument("--auto-rule", default=d.auto_rule, choices=["cost", "rtt"])
    ap.add_argument("--temperature", type=float, default=d.temperature)
    ap.add_argument("--ues", type=int, default=d.ues, help="UE processes sharing the edge and the link")
    ap.add_argument("--probe-bytes", type=int, default=d.probe_bytes)
    ap.add_argument("--no-reference", action="store_true", help="skip target-only greedy reference outputs")
    ap.add_argument("--netns", action="store_true",
                    help="run edge and UEs in their own network namespaces joined by a veth (needs root)")
    ap.add_argument("--rejection-predictor", default=None,
                    help="WISP rejection predictor for the UEs (scripts/rejection_predictor.py writes one)")
    ap.add_argument("--rejection-threshold", type=float, default=d.rejection_threshold,
                    help="the predictor flags a token when its p(rejected) >= this (default: the operating "
                         "point scripts/rejection_predictor.py chose and saved with it)")
    ap.add_argument("--proactive", type=int, default=d.proactive,
                    help="SpecEdge: UEs draft up to N tokens past each block while it is verified (0: off)")
    ap.add_argument("--pipeline-depth", action="store_true",
                    help="SpecEdge: UEs choose K per round so that drafting + RTT ~= the edge's verify time (K <= --draft-len)")
    ap.add_argument("--batch-verify", action="store_true", help="the edge verifies concurrent UEs' drafts in one pass")
    ap.add_argument("--no-kv-reuse", dest="kv_reuse", action="store_false",
                    help="the edge recomputes each prefix every round (SLED baseline)")
    ap.add_argument("--cpu-wakeup-us", type=int, default=None,
                    help="hold /dev/cpu_dma_latency at this many us during the run (root; 0 = CPUs poll when idle: "
                         "removes the VM's ~0.2 ms wake-up per hop at the price of spinning CPUs)")
    a = ap.parse_args(argv)
    if a.rejection_threshold is not None and not a.rejection_predictor:
        ap.error("--rejection-threshold needs --rejection-predictor")
    if a.cpu_wakeup_us is not None and a.cpu_wakeup_us < 0:
        ap.error("--cpu-wakeup-us must be >= 0")
    if not 0 <= a.host_overhead_ms < math.inf:
        ap.error("--host-overhead-ms must be finite and >= 0")
    up, down = resolve_rates(a.rate_mbps, a.rate_up_mbps, a.rate_down_mbps)
    link = LinkSpec(up, down, a.rtt_ms, a.jitter_ms, a.per, a.csi_trace, a.seed, a.host_overhead_ms)
    keep = {f.name for f in dataclasses.fields(RunConfig)} - {"link", "reference"}
    return RunConfig(link=link, reference=not a.no_reference, **{k: v for k, v in vars(a).items() if k in keep})


def main(argv: list[str] | None = None) -> None:
    try:
        run(parse_args(argv))
    except (PermissionError, FileNotFoundError) as e:  # e.g. --cpu-wakeup-us without root
        print(f"testbed.run: error: {e}", file=sys.stderr)
        sys.exit(2)

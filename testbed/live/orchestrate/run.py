"""Orchestrator: start the edge and the UE(s) as separate processes with the link emulator between them.

Usage: ``python -m testbed.run --protocol auto`` (built-in pair, 20 test prompts, 20 Mbps / 20 ms).
``--protocol all`` runs every protocol on the same prompts and link and prints them side by side.
``--edge tcp://HOST:PORT`` runs only the UEs here, against an edge serving on another host (``python -m
testbed.serve --bind tcp://0.0.0.0:PORT --auth KEYS``, with ``--auth KEYS`` here too): the real link, measured,
unless link flags ask for emulation; the target-only reference comes from the edge, and the edge's own settings
(head, tau, ...) are recorded.
The head and ``auto`` condition on the emulated link's CSI (``--csi configured``, the default: reproducible) or on
the UEs' estimate (``--csi measured``, the default on the real link to an ``--edge``); rounds record both.
Writes per protocol ``rounds.csv``, ``outputs.jsonl`` (with the text) and ``summary.json`` to ``--out DIR/<protocol>``,
plus ``config.json``, ``config.toml``, ``prompts.jsonl``, ``reference.jsonl``, ``summary.csv`` and ``run.png`` (the
report: testbed/common/plots.py) to ``--out DIR``, and last the ``complete`` marker.  ``--show N`` prints the first N
outputs beside the reference text.  A non-empty ``--out`` is refused unless ``--overwrite``; the config files a failed
run left are not counted.  SIGINT/SIGTERM stop the children and remove the namespaces
(testbed/live/orchestrate/interrupt.py); the rounds the UEs appended until then are merged into
``<protocol>/rounds.csv``.  ``--continue DIR`` goes on with an interrupted run (even one killed -9): it stops what
the run left running (``processes.jsonl``), keeps the prompts already complete and runs the rest with the same config
(testbed/live/orchestrate/cont.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd
from tqdm import tqdm

import config
from protocols.registry import ALL_PROTOCOLS, PROTOCOLS, speedup_baseline  # noqa: F401 (ALL_PROTOCOLS: read here)
from protocols.ue_side import AUTO_DRAFT_LEN, EdgeError, HandshakeError
from testbed.common.compare import (
    group_summaries,
    group_text,
    paired_rows,
    paired_text,
    prompt_groups,
    speedups,
    write_comparisons,
)
from testbed.common.files import CONFIG_FILES, mark_complete, prepare_out, write_csv_atomic, write_json_atomic
from testbed.common.heads import load_policy
from testbed.common.link import LinkSpec, add_rate_flag, apply_rate_flag  # noqa: F401 (LinkSpec: read from here)
from testbed.common.machine import machine_info
from testbed.common.plots import plot_run
from testbed.common.summary import handover_table, latency_table, prompt_correct, table, window_table
from testbed.live.edge.serveconfig import ServeConfig  # noqa: F401 (read from here too)
from testbed.live.orchestrate import placement
from testbed.live.orchestrate.cont import RECORD_FILE, Recorder, continued, stop_leftovers
from testbed.live.orchestrate.gather import collect, merge_rounds, record_edge, show_outputs
from testbed.live.orchestrate.interrupt import guarded
from testbed.live.orchestrate.procs import ON_START, Child, ChildError, progress_handler, wait_with_edge
from testbed.live.orchestrate.prompts import TargetScorer, load_prompts, reference_outputs
from testbed.live.orchestrate.runconfig import (  # RunConfig: read from here too
    PROG,
    SHARED,
    RunConfig,
    head_reads_drafter,
    refuse_unserved,
    with_pair,
)
from testbed.live.orchestrate.wakeup import cpu_wakeup_bound
from testbed.live.ue.drafting import check as check_drafter
from testbed.live.ue.lanes import PLACEHOLDER
from testbed.live.ue.retry import RetryExhausted
from testbed.live.ue.ue import PROG as UE_PROG
from testbed.live.ue.ueconfig import UEConfig
from wisv.decoding.ngram import NGRAM
from wisv.decoding.passrows import load_plan
from wisv.pairs.scorer import resolve_scorer
from wisv.tasks.jsonl import read_jsonl, write_jsonl


def _window(ue: UEConfig) -> str:
    """The draft window as the run line shows it."""
    return f"auto (<= {ue.draft_len_max})" if ue.draft_len == AUTO_DRAFT_LEN else str(ue.draft_len)


def run(cfg: RunConfig) -> list[dict]:
    """Run every requested protocol on the same prompts and link; return their summaries."""
    cfg = with_pair(cfg)
    tau, head_desc = None, "the remote edge's"
    if cfg.remote_edge is None:
        policy, tau, head_desc = load_policy(cfg.edge.head, cfg.edge.tau, cfg.edge.target)  # fail fast: a bad
        refuse_unserved(cfg.protocols(), tuple(policy.inputs), head_desc)  # --head, or one that cannot decide
    reads = cfg.ue.drafter == NGRAM and cfg.remote_edge is None and head_reads_drafter(cfg.edge.head, cfg.edge.tau,
                                                                                      cfg.edge.target)
    for proto in cfg.protocols():  # a bad --drafter-head, or --drafter ngram with a protocol that needs a model
        check_drafter(dataclasses.replace(cfg.ue, protocol=proto), reads)  # before any process starts
    if cfg.edge.pass_rows:
        load_plan(cfg.edge.pass_rows)  # and on a bad --pass-rows
    name = cfg.protocol.replace(",", "+")
    out, started = Path(cfg.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{name}"), time.time()
    if cfg.continue_dir:
        print(f"continue {out}: stopped {', '.join(stop_leftovers(out)) or 'nothing (none left running)'}")
    else:
        own = CONFIG_FILES + ("prompts.jsonl", "reference.jsonl", "edge.log", RECORD_FILE)
        prepare_out(out, cfg.overwrite, own=own)
        _write_config(cfg, out, head_desc, tau)
    ON_START[:] = [Recorder(out)]  # every child is recorded as it starts: --continue stops what a killed run left
    prompts, tok = load_prompts(cfg, out / "prompts.jsonl")
    refs = reference_outputs(cfg, prompts, out / "reference.jsonl", tok) if cfg.reference else None
    scorer = TargetScorer(cfg, prompts) if refs is not None and cfg.remote_edge is None else None  # fluency
    ext = resolve_scorer(cfg.fluency_model, device=cfg.device) if refs is not None else None  # a third LM's
    summaries, windows, by_group, correct, done = [], [], [], {}, {}
    groups = prompt_groups(prompts)
    decode = tok.decode if tok is not None else None
    with cpu_wakeup_bound(cfg.cpu_wakeup_us) as wakeup, _placement(cfg)(cfg, out, _edge_args(cfg)) as site:
        for note in site.notes + ([wakeup] if cfg.cpu_wakeup_us is not None else []):
            print(f"link: {note}")
        lanes = [cfg.protocols()] if cfg.interleave else [[p] for p in cfg.protocols()]  # what each UE set runs
        for protos in lanes:
            try:
                _run_ues(cfg, protos, site, out / "prompts.jsonl", out, len(prompts))
            finally:  # also after a failure or an interruption: every round the UEs appended
                rounds = {p: merge_rounds(out / p) for p in protos}
            for proto in protos:
                pdir = out / proto
                s, outputs = collect(proto, pdir, rounds[proto], prompts, tok, refs, scorer, ext)
                windows += [window_table(proto, rounds[proto]), handover_table(proto, rounds[proto])]
                correct[proto], done[proto] = prompt_correct(outputs, prompts, decode), outputs
                if groups is not None:
                    by_group += group_summaries(proto, rounds[proto], outputs, prompts, decode, refs, groups,
                                                nll=scorer, ext=ext)
                write_json_atomic(pdir / "summary.json", s)
                summaries.append(s)
                head_desc = record_edge(cfg, out, pdir) or head_desc
    _add_speedups(out, summaries, done)
    write_csv_atomic(out / "summary.csv", pd.DataFrame(summaries))
    budget = f"auto (<= {cfg.ue.draft_len_max})" if cfg.ue.tree_budget == AUTO_DRAFT_LEN else cfg.ue.tree_budget
    tree = f"; tree budget {budget}" if any(PROTOCOLS[p].desc.tree for p in cfg.protocols()) else ""
    print(f"\nlink: {_describe_link(cfg, site)}; K={_window(cfg.ue)}{tree}; head={head_desc}; results in {out}")
    print(table(summaries))
    print(latency_table(summaries))
    paired = paired_rows(correct, groups)
    write_comparisons(out, by_group, paired)
    for w in filter(None, [*windows, group_text(by_group), paired_text(paired)]):
        print(w)
    if cfg.show:
        print(show_outputs(cfg, out, prompts, tok, refs))
    print(f"figure: {plot_run(out)}")
    mark_complete(out, started, ["summary.csv", *(f"{p}/summary.json" for p in cfg.protocols())])
    return summaries


def _add_speedups(out: Path, summaries: list[dict], outputs: dict[str, pd.DataFrame]) -> None:
    """Where server-only ran too: each protocol's speed-up over it, paired per prompt, into its summary (and its
    summary.json again)."""
    speed = speedups(outputs, speedup_baseline(list(outputs)))
    for s in (s for s in summaries if s["protocol"] in speed):
        s |= speed[s["protocol"]]
        write_json_atomic(out / s["protocol"] / "summary.json", s)


def _write_config(cfg: RunConfig, out: Path, head_desc: str, tau: float | None) -> None:
    """config.json (flat, with what was resolved and the machine) and config.toml (--config and --continue read it)."""
    resolved = {"out": str(out), "head_resolved": head_desc, "tau_resolved": tau, "link_emulated": cfg.link.emulated,
                "csi_resolved": cfg.csi_source()}
    machine = machine_info()
    write_json_atomic(out / "config.json", cfg.flat() | resolved | _versions(machine))
    config.write_config(out, dataclasses.replace(cfg, out=str(out)), machine | resolved,
                        fresh=("out", "overwrite", "continue_dir"))


def _placement(cfg: RunConfig):
    """The placement of the run's processes: remote edge, namespaces, or loopback."""
    return placement.remote if cfg.remote_edge else placement.netns if cfg.netns else placement.local


def _run_ues(cfg: RunConfig, protos: list[str], site: placement.Site, prompts_file: Path, out: Path, n: int) -> None:
    """Start cfg.ues UE processes running ``protos`` (one, or several interleaved prompt by prompt), each writing
    out/<protocol>/ue<u>, and wait for all of them, with one progress bar."""
    for p in protos:
        (out / p).mkdir(parents=True, exist_ok=True)
    rows, pdir = read_jsonl(prompts_file), out / protos[0]
    ues, name = [], "+".join(protos)
    with tqdm(total=n * len(protos), desc=name, unit="prompt") as bar:
        try:
            for u in range(min(cfg.ues, len(rows))):  # a UE without prompts is not started
                part = pdir / f"prompts-ue{u}.jsonl"
                write_jsonl(part, rows[u::cfg.ues])
                ues.append(Child(f"ue{u}", _ue_args(cfg, protos, site, part, out, u, len(rows[u::cfg.ues])),
                                 pdir / f"ue{u}.log", progress_handler(bar), prefix=site.ue_prefix))
            wait_with_edge(ues, site.edge)  # the edge dying stops the run at once
            for ue in ues:
                if ue.wait() != 0:
                    raise ChildError(f"{ue.name} ({name}) failed{_error_line(ue.log_path)}; see {ue.log_path}")
        finally:
            for ue in ues:
                ue.stop()


def _error_line(log: Path) -> str:
    """': <the UE's error line>' from its log, or nothing."""
    mark = f"{UE_PROG}: error: "
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith(mark)]
    return f": {lines[-1].removeprefix(mark)}" if lines else ""


def _edge_args(cfg: RunConfig) -> list[str]:
    """testbed.serve's argv (placement adds --bind)."""
    k_max = max(cfg.edge.max_draft_len, cfg.ue.draft_len, cfg.ue.draft_len_max)
    edge = dataclasses.replace(cfg.edge, device=cfg.device, max_draft_len=k_max,
                               max_session_tokens=max(cfg.edge.max_session_tokens, cfg.ue.max_new_tokens),
                               **_shared(cfg))
    return ["testbed.serve", *config.to_argv(edge)]


def _ue_args(cfg: RunConfig, protos: list[str], site: placement.Site, prompts: Path, out: Path, u: int,
             n: int) -> list[str]:
    """testbed.ue's argv for UE u running ``protos`` (interleaved when several) on the n prompts of its file, into
    out/<protocol>/ue<u>."""
    link_json = None if site.measured else json.dumps(asdict(cfg.link))  # None: the UE records the measured CSI
    lanes = {"protocol": protos[0], "out": str(out / protos[0] / f"ue{u}")} if len(protos) == 1 else \
        {"interleave": protos, "out": str(out / PLACEHOLDER / f"ue{u}")}
    ue = dataclasses.replace(cfg.ue, connect=site.connect, prompts=n, prompts_file=str(prompts), **lanes,
                             ue_id=f"ue{u}", device=cfg.device, seed=cfg.seed, link_json=link_json,
                             link_t0_epoch_s=site.t0_epoch_s, reference=False,  # the run compares with the target
                             keep_done=cfg.continue_dir is not None, capture=_capture_path(cfg, protos, u),
                             vocab_dir=cfg.ue.vocab_dir or (cfg.edge.target if cfg.ue.drafter == NGRAM
                                                            and not cfg.remote_edge else None),
                             **_shared(cfg) | ({} if cfg.drafter_dtype == "same" else {"dtype": cfg.drafter_dtype}))
    return ["testbed.ue", *config.to_argv(ue)]


def _capture_path(cfg: RunConfig, protos: list[str], u: int) -> str | None:
    """--capture as given for one protocol and one UE, else FILE-<protocols>-ue<u>.pcap per UE process."""
    c = cfg.ue.capture
    if not c or (len(cfg.protocols()) == 1 and cfg.ues == 1):
        return c
    p = Path(c)
    return str(p.with_name(f"{p.stem}-{'+'.join(protos)}-ue{u}{p.suffix or '.pcap'}"))


def _shared(cfg: RunConfig) -> dict:
    """The settings the UEs and the edge take from the run alike (SHARED)."""
    return {name: getattr(cfg, name) for name in SHARED}


def _describe_link(cfg: RunConfig, site: placement.Site) -> str:
    link = cfg.link
    if site.measured:
        return f"real link to {cfg.remote_edge} (measured CSI in rounds.csv)"
    outages = f"; outages {link.outages}" if link.outages else ""
    if link.csi_trace:
        return f"trace {link.csi_trace}{outages}"
    rate = lambda r: "unlimited" if not r else f"{r:g} Mbps"  # noqa: E731
    comp = f", host overhead {link.host_overhead_ms:g} ms/direction taken out" if link.host_overhead_ms else ""
    return (f"up {rate(link.rate_up_mbps)}, down {rate(link.rate_down_mbps)}, RTT {link.rtt_ms:g} ms, "
            f"jitter {link.jitter_ms:g} ms, PER {link.per:g}{comp}{outages}")


def _versions(machine: dict) -> dict:
    return {"versions": {k: machine[k] for k in ("python", "torch", "transformers")}, "machine": machine}


def parse_args(argv: list[str] | None = None) -> RunConfig:
    ap = config.add_flags(argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0]),
                          RunConfig)
    add_rate_flag(ap)
    return config.parse(RunConfig, argv, ap, adjust=_adjust)


REAL_LINK = {"rate_up_mbps": None, "rate_down_mbps": None, "rtt_ms": 0.0}  # nothing to emulate


def _adjust(values: dict, ns: argparse.Namespace) -> None:
    """--rate-mbps; and with --edge but no link flag (nor [link] table), the real link instead of the default
    emulated one."""
    apply_rate_flag(values, ns)
    if values.get("remote_edge") and "link" not in values:
        values["link"] = dict(REAL_LINK)


def main(argv: list[str] | None = None) -> None:
    """Bad input or an unusable resource (a bad value, a malformed prompts file, an unbuilt pair, an --out in use,
    no root, no answer from --edge) is one error line and exit 2; a failed run (a UE failed, every prompt of a UE
    failed, the edge refused) is one error line and exit 1."""
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_args(argv)
    try:
        cfg = continued(argv, parse_args) if cfg.continue_dir else cfg
        guarded(PROG, lambda: run(cfg))
    except (ChildError, HandshakeError, EdgeError, TimeoutError) as e:  # before OSError: TimeoutError is one
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(1)
    except (ValueError, OSError, RetryExhausted) as e:  # OutDirError, PairError, ConfigError are ValueErrors
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)

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
import functools
import json
import math
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
from tqdm import tqdm

import config
from protocols.registry import ALL_PROTOCOLS, PROTOCOLS
from protocols.ue_side import AUTO_DRAFT_LEN, EdgeError, HandshakeError
from testbed.common.compare import (
    group_summaries,
    group_text,
    paired_rows,
    paired_text,
    prompt_groups,
    write_comparisons,
)
from testbed.common.files import (
    CONFIG_FILES,
    mark_complete,
    prepare_out,
    write_csv_atomic,
    write_json_atomic,
    write_text_atomic,
)
from testbed.common.heads import load_policy
from testbed.common.link import LinkSpec, add_rate_flag, apply_rate_flag
from testbed.common.machine import machine_info
from testbed.common.plots import plot_run
from testbed.common.summary import prompt_correct, summarize, table, window_table
from testbed.common.text import decoder, show
from testbed.live.common.liveness import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate import placement
from testbed.live.orchestrate.cont import RECORD_FILE, Recorder, continued, stop_leftovers
from testbed.live.orchestrate.interrupt import guarded
from testbed.live.orchestrate.procs import ON_START, Child, ChildError, progress_handler, wait_with_edge
from testbed.live.orchestrate.prompts import TargetScorer, load_prompts, reference_outputs
from testbed.live.orchestrate.wakeup import cpu_wakeup_bound
from testbed.live.ue.retry import RetryExhausted
from testbed.live.ue.ue import PROG as UE_PROG
from testbed.live.ue.ueconfig import UEConfig
from wisv.decoding.featdraft import read_head_config
from wisv.decoding.passrows import load_plan
from wisv.models.loader import DTYPE_CHOICES
from wisv.pairs import PAIR_NAMES, apply_pair
from wisv.pairs.scorer import SCORERS, resolve_scorer
from wisv.records.rows import read_records, read_round_log
from wisv.tasks.datasets import check_dataset
from wisv.tasks.jsonl import read_jsonl, write_jsonl

PROG = "python -m testbed.run"  # as users type it: --help and error lines
SHARED = ("auth", "heartbeat_ivl_ms", "heartbeat_timeout_ms", "dtype")  # RunConfig fields given to UEs and edge alike
# UEConfig fields the run sets for each UE process
UE_SET_BY_RUN = ("connect", "prompts", "prompts_file", "out", "ue_id", "protocol", "device", "seed", "link_json",
                 "link_t0_epoch_s", "reference", "pair", "keep_done") + SHARED
EDGE_SET_BY_RUN = ("bind", "device", "max_draft_len", "max_session_tokens", "pair", "capture",
                   "capture_iface") + SHARED  # ServeConfig fields set


@dataclass
class RunConfig:
    """One testbed run (saved as config.json and config.toml next to the results); ``[ue]``, ``[edge]`` and
    ``[link]`` hold the UEs', the edge's and the link's settings, with the same flags as the top-level ones."""

    protocol: str = field(default="auto", metadata={  # protocols, in turn on the same prompts and link,
        "choices": (*PROTOCOLS, "all"), "sep": ","})  # each paired against the first (paired.csv); all: every one
    pair: str | None = field(default=None, metadata={
        "choices": PAIR_NAMES})  # named pair (python -m wisv.pairs build NAME; a plugin's); --drafter/--target win
    prompts: int = field(default=20, metadata={
        "min": 1})  # first N problems of the built-in test split (or of --prompts-file)
    prompts_file: str | None = None  # JSONL with prompt (text) or prompt_ids, optional prompt_id and answer
    dataset: str | None = None  # a named set instead: spec-bench[:CATEGORY,...] | mt-bench | gsm8k | custom:FILE
    #   (docs/datasets.md; --prompts N: its first N questions)
    first_turn_only: bool = False  # run only the first turn of a two-turn question (MT-Bench; vLLM's and SpecEdge's)
    out: str = ""  # output directory; default runs/<time>-<protocol>
    seed: int = 0  # sampling and link-loss seed (the UEs' and the link's)
    device: str = "cpu"  # torch device of both processes
    dtype: str = field(default="auto", metadata={
        "choices": DTYPE_CHOICES})  # both models' weights, and the reference's (auto: fp32 on CPU, bf16/fp16 on CUDA)
    drafter_dtype: str = field(default="same", metadata={
        "choices": ("same", *DTYPE_CHOICES)})  # the UEs' drafter weights (same: --dtype); float16 about halves a
    #   one-token drafter step on a CPU with AVX-512 (docs/pairs.md), and moves only what the drafter proposes
    ues: int = field(default=1, metadata={
        "min": 1})  # UE processes sharing the edge and the link; prompts are dealt round-robin
    reference: bool = True  # compute target-only greedy outputs for matches_target (--no-reference: skip)
    fluency_model: str = field(  # a third LM's fluency score beside the target's
        default="none", metadata={"choices": ("auto", "none", *SCORERS)})  # (docs/fluency.md; auto: where built)
    cpu_wakeup_us: int | None = field(default=None, metadata={
        "min": 0})  # hold /dev/cpu_dma_latency at this bound during the run, us (root; 0: poll)
    netns: bool = False  # edge and UEs in their own network namespaces joined by a veth (root), tc on the veth
    overwrite: bool = False  # empty a non-empty --out first (without it, a non-empty --out is refused)
    continue_dir: str | None = field(default=None, metadata={
        "flag": "continue"})  # continue the interrupted run in this directory with its config (orchestrate/cont.py)
    show: int = field(default=0, metadata={
        "min": 0})  # print the first N outputs beside the reference text, marking where each first diverges
    remote_edge: str | None = field(default=None, metadata={
        "flag": "edge"})  # tcp://HOST:PORT of an edge serving elsewhere: only UEs run here (no link flag: real link)
    auth: str | None = None  # key dir from testbed.keys: CURVE between the UEs and the edge (None: none)
    heartbeat_ivl_ms: int = field(default=HEARTBEAT_IVL_MS, metadata={
        "min": 0})  # ZMTP heartbeat PING interval of the UEs' and the edge's sockets, ms
    heartbeat_timeout_ms: int = field(default=HEARTBEAT_TIMEOUT_MS, metadata={
        "min": 0})  # a connection silent this long after a PING is dropped, ms
    ue: UEConfig = field(default_factory=UEConfig, metadata={"skip": UE_SET_BY_RUN})  # the UEs' settings
    edge: ServeConfig = field(default_factory=ServeConfig, metadata={"skip": EDGE_SET_BY_RUN})  # the edge's settings
    link: LinkSpec = field(default_factory=LinkSpec, metadata={"skip": ("seed",)})  # emulated link (seed: the run's)

    def __post_init__(self) -> None:
        self.link = dataclasses.replace(self.link, seed=self.seed)
        if "all" in self.protocol.split(",") and self.protocol != "all":
            raise ValueError(f"--protocol {self.protocol}: 'all' already runs every protocol; give it alone")
        if self.ue.rejection_threshold is not None and not self.ue.rejection_predictor:
            raise ValueError("--rejection-threshold needs --rejection-predictor")
        if self.cpu_wakeup_us is not None and self.cpu_wakeup_us < 0:
            raise ValueError("--cpu-wakeup-us must be >= 0")
        if not 0 <= self.link.host_overhead_ms < math.inf:
            raise ValueError("--host-overhead-ms must be finite and >= 0")
        if self.dataset is not None:
            check_dataset(self.dataset, self.prompts_file)
        if self.remote_edge is not None:
            self._check_remote()
        if self.ue.csi == "configured" and self.real_link():
            raise ValueError("--csi configured needs an emulated link (give link flags); on the real link to --edge "
                             "use --csi measured")

    def _check_remote(self) -> None:
        """With --edge the edge's settings are the serving edge's: a local one given is an error naming it."""
        if not re.fullmatch(r"tcp://[^:/\s]+:\d+", self.remote_edge):
            raise ValueError(f"--edge must be tcp://HOST:PORT, got {self.remote_edge!r}")
        if self.netns:
            raise ValueError("--netns starts an edge in a namespace here; with --edge the edge already runs elsewhere")
        base = ServeConfig()
        given = [f.flag for f in config.flags(ServeConfig) if f.path[0] not in EDGE_SET_BY_RUN
                 and getattr(self.edge, f.path[0]) != getattr(base, f.path[0])]
        if given:
            raise ValueError(f"{', '.join(given)}: with --edge these are the serving edge's settings; set them on its "
                             "`python -m testbed.serve` command line (the run records what the edge reports)")

    def real_link(self) -> bool:
        """True when the UEs reach a remote edge over the real, unemulated link."""
        return self.remote_edge is not None and not self.link.emulated

    def csi_source(self) -> str:
        """What the head and auto condition on (--csi; by default configured, or measured on a real link)."""
        return self.ue.csi or ("measured" if self.real_link() else "configured")

    def protocols(self) -> list[str]:
        """The protocols this run runs: ``all`` is every one the edge's head can serve (ef needs a head that reads no
        drafter hidden states; a remote edge's head is not known here, so all of them)."""
        if self.protocol != "all":
            return self.protocol.split(",")
        hidden = self.remote_edge is None and head_reads_drafter(self.edge.head, self.edge.tau, self.edge.target)
        reads = ("h_draft",) if hidden else ()
        return [p for p in ALL_PROTOCOLS if PROTOCOLS[p].desc.serves(reads)]

    def flat(self) -> dict:
        """config.json's layout: the run's, the UEs' and the edge's settings side by side, and the link's."""
        nested = config.to_dict(self)
        return {k: v for k, v in nested.items() if k not in ("ue", "edge", "link")} | nested["ue"] | nested["edge"] \
            | {"link": asdict(self.link)}


def _window(ue: UEConfig) -> str:
    """The draft window as the run line shows it."""
    return f"auto (<= {ue.draft_len_max})" if ue.draft_len == AUTO_DRAFT_LEN else str(ue.draft_len)


def run(cfg: RunConfig) -> list[dict]:
    """Run every requested protocol on the same prompts and link; return their summaries."""
    cfg = with_pair(cfg)
    tau, head_desc = None, "the remote edge's"
    if cfg.remote_edge is None:
        _, tau, head_desc = load_policy(cfg.edge.head, cfg.edge.tau, cfg.edge.target)  # fail fast on a bad --head
    if cfg.ue.drafter_head:
        read_head_config(cfg.ue.drafter_head)  # fail fast on a bad --drafter-head, before any process starts
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
    summaries, windows, by_group, correct = [], [], [], {}
    groups = prompt_groups(prompts)
    decode = tok.decode if tok is not None else None
    with cpu_wakeup_bound(cfg.cpu_wakeup_us) as wakeup, _placement(cfg)(cfg, out, _edge_args(cfg)) as site:
        for note in site.notes + ([wakeup] if cfg.cpu_wakeup_us is not None else []):
            print(f"link: {note}")
        for proto in cfg.protocols():
            pdir = out / proto
            try:
                _run_ues(cfg, proto, site, out / "prompts.jsonl", pdir, len(prompts))
            finally:  # also after a failure or an interruption: every round the UEs appended
                rounds = _merge_rounds(pdir)
            s, outputs = _collect(proto, pdir, rounds, prompts, tok, refs, scorer, ext)
            windows.append(window_table(proto, rounds))
            correct[proto] = prompt_correct(outputs, prompts, decode)
            if groups is not None:
                by_group += group_summaries(proto, rounds, outputs, prompts, decode, refs, groups, nll=scorer, ext=ext)
            write_json_atomic(pdir / "summary.json", s)
            summaries.append(s)
            head_desc = _record_edge(cfg, out, pdir) or head_desc
    write_csv_atomic(out / "summary.csv", pd.DataFrame(summaries))
    budget = f"auto (<= {cfg.ue.draft_len_max})" if cfg.ue.tree_budget == AUTO_DRAFT_LEN else cfg.ue.tree_budget
    tree = f"; tree budget {budget}" if any(PROTOCOLS[p].desc.tree for p in cfg.protocols()) else ""
    print(f"\nlink: {_describe_link(cfg, site)}; K={_window(cfg.ue)}{tree}; head={head_desc}; results in {out}")
    print(table(summaries))
    paired = paired_rows(correct, groups)
    write_comparisons(out, by_group, paired)
    for w in filter(None, [*windows, group_text(by_group), paired_text(paired)]):
        print(w)
    if cfg.show:
        print(_show(cfg, out, prompts, tok, refs))
    print(f"figure: {plot_run(out)}")
    mark_complete(out, started, ["summary.csv", *(f"{p}/summary.json" for p in cfg.protocols())])
    return summaries


@functools.lru_cache(maxsize=8)
def head_reads_drafter(head: str, tau: float | None, target: str | None) -> bool:
    """Whether the local edge's head reads the drafter's hidden states (then it cannot serve ef)."""
    policy, _, _ = load_policy(head, tau, target)
    return "h_draft" in policy.inputs


def _write_config(cfg: RunConfig, out: Path, head_desc: str, tau: float | None) -> None:
    """config.json (flat, with what was resolved and the machine) and config.toml (--config and --continue read it)."""
    resolved = {"out": str(out), "head_resolved": head_desc, "tau_resolved": tau, "link_emulated": cfg.link.emulated,
                "csi_resolved": cfg.csi_source()}
    machine = machine_info()
    write_json_atomic(out / "config.json", cfg.flat() | resolved | _versions(machine))
    config.write_config(out, dataclasses.replace(cfg, out=str(out)), machine | resolved,
                        fresh=("out", "overwrite", "continue_dir"))


def with_pair(cfg: RunConfig) -> RunConfig:
    """--pair: its drafter for the UEs and, for a local edge, its target; with --edge the serving edge has its own
    target (the UE's drafter must share its tokenizer, which the edge checks at OPEN)."""
    return apply_pair(cfg, drafter="ue.drafter", target=None if cfg.remote_edge else "edge.target")


def _show(cfg: RunConfig, out: Path, prompts: pd.DataFrame, tok, refs) -> str:
    """--show N: the first N prompts' outputs of every protocol beside the reference text."""
    outputs = {p: pd.read_json(out / p / "outputs.jsonl", lines=True, dtype={"prompt_id": str})
               for p in cfg.protocols()}
    return show(cfg.show, prompts, outputs, refs, decoder(tok))


def _placement(cfg: RunConfig):
    """The placement of the run's processes: remote edge, namespaces, or loopback."""
    return placement.remote if cfg.remote_edge else placement.netns if cfg.netns else placement.local


def _record_edge(cfg: RunConfig, out: Path, pdir: Path) -> str | None:
    """With --edge: the edge's settings, as the UEs got them in OPEN_OK, into config.json; the head it reports."""
    path = pdir / "ue0" / "edge.json"
    if cfg.remote_edge is None or not path.exists():
        return None
    reported = json.loads(path.read_text())
    saved = json.loads((out / "config.json").read_text())
    saved |= {"edge_reported": reported, "head_resolved": reported.get("head"), "tau_resolved": reported.get("tau")}
    write_json_atomic(out / "config.json", saved)
    return reported.get("head")


def _run_ues(cfg: RunConfig, proto: str, site: placement.Site, prompts_file: Path, pdir: Path, n: int) -> None:
    """Start cfg.ues UE processes for one protocol and wait for all of them, with one progress bar."""
    pdir.mkdir(parents=True, exist_ok=True)
    rows = read_jsonl(prompts_file)
    ues = []
    with tqdm(total=n, desc=proto, unit="prompt") as bar:
        try:
            for u in range(min(cfg.ues, len(rows))):  # a UE without prompts is not started
                part = pdir / f"prompts-ue{u}.jsonl"
                write_jsonl(part, rows[u::cfg.ues])
                ues.append(Child(f"ue{u}", _ue_args(cfg, proto, site, part, pdir / f"ue{u}", u, len(rows[u::cfg.ues])),
                                 pdir / f"ue{u}.log", progress_handler(bar), prefix=site.ue_prefix))
            wait_with_edge(ues, site.edge)  # the edge dying stops the run at once
            for ue in ues:
                if ue.wait() != 0:
                    raise ChildError(f"{ue.name} ({proto}) failed{_error_line(ue.log_path)}; see {ue.log_path}")
        finally:
            for ue in ues:
                ue.stop()


def _error_line(log: Path) -> str:
    """': <the UE's error line>' from its log, or nothing."""
    mark = f"{UE_PROG}: error: "
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith(mark)]
    return f": {lines[-1].removeprefix(mark)}" if lines else ""


def _merge_rounds(pdir: Path) -> pd.DataFrame:
    """The UEs' rounds merged into <pdir>/rounds.csv: each UE's rounds.csv, or for a UE that was killed before
    writing it, the rounds it appended to rounds.jsonl as they happened."""
    frames = []
    for d in sorted(d for d in pdir.glob("ue*") if d.is_dir()):
        f = read_records(d / "rounds.csv") if (d / "rounds.csv").exists() else read_round_log(d / "rounds.jsonl")
        frames += [f] if len(f) else []
    rounds = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if pdir.is_dir():
        write_csv_atomic(pdir / "rounds.csv", rounds)
    return rounds


def _collect(proto: str, pdir: Path, rounds: pd.DataFrame, prompts: pd.DataFrame, tok, refs, scorer=None,
             ext=None) -> tuple[dict, pd.DataFrame]:
    """Merge the UEs' outputs into <pdir>/outputs.jsonl, then summarize with the merged rounds: (summary, outputs)."""
    ue_dirs = sorted(d for d in pdir.glob("ue*") if d.is_dir())
    outputs = pd.concat([pd.read_json(d / "outputs.jsonl", lines=True, dtype={"prompt_id": str}) for d in ue_dirs],
                        ignore_index=True)  # an id such as "7" stays text, as in prompts.jsonl
    write_text_atomic(pdir / "outputs.jsonl", outputs.to_json(orient="records", lines=True, force_ascii=False))
    return summarize(proto, rounds, outputs, prompts, tok.decode if tok is not None else None, refs, scorer,
                     ext), outputs


def _edge_args(cfg: RunConfig) -> list[str]:
    """testbed.serve's argv (placement adds --bind)."""
    k_max = max(cfg.edge.max_draft_len, cfg.ue.draft_len, cfg.ue.draft_len_max)
    edge = dataclasses.replace(cfg.edge, device=cfg.device, max_draft_len=k_max,
                               max_session_tokens=max(cfg.edge.max_session_tokens, cfg.ue.max_new_tokens),
                               **_shared(cfg))
    return ["testbed.serve", *config.to_argv(edge)]


def _ue_args(cfg: RunConfig, proto: str, site: placement.Site, prompts: Path, out: Path, u: int,
             n: int) -> list[str]:
    """testbed.ue's argv for UE u running proto on the n prompts of its file."""
    link_json = None if site.measured else json.dumps(asdict(cfg.link))  # None: the UE records the measured CSI
    ue = dataclasses.replace(cfg.ue, connect=site.connect, prompts=n, prompts_file=str(prompts), out=str(out),
                             ue_id=f"ue{u}", protocol=proto, device=cfg.device, seed=cfg.seed, link_json=link_json,
                             link_t0_epoch_s=site.t0_epoch_s, reference=False,  # the run compares with the target
                             keep_done=cfg.continue_dir is not None, capture=_capture_path(cfg, proto, u),
                             **_shared(cfg) | ({} if cfg.drafter_dtype == "same" else {"dtype": cfg.drafter_dtype}))
    return ["testbed.ue", *config.to_argv(ue)]


def _capture_path(cfg: RunConfig, proto: str, u: int) -> str | None:
    """--capture as given for one protocol and one UE, else FILE-<protocol>-ue<u>.pcap per UE process."""
    c = cfg.ue.capture
    if not c or (len(cfg.protocols()) == 1 and cfg.ues == 1):
        return c
    p = Path(c)
    return str(p.with_name(f"{p.stem}-{proto}-ue{u}{p.suffix or '.pcap'}"))


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

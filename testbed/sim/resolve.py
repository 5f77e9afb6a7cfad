"""What ``testbed.simulate`` resolves from its config: the pair (lazily loaded), the head, the deployment, the links."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from transformers import AutoConfig

from channel.csi import CSI, FEATURE_DIM
from channel.csitrace import load_trace
from channel.outage import Outages
from protocols.accounting import wire_payload_bits
from testbed.common.heads import default_head_dir
from testbed.sim.model import constant
from testbed.sim.traces import file_id
from wisv.decoding.speculative import MismatchPolicy
from wisv.models.loader import builtin_paths, load_pair
from wisv.timing.calibrate import load_calibration
from wisv.timing.compute import ModelDims, get_architecture
from wisv.timing.hardware import LOCAL, LOCAL_PROFILE_PATH, get_profile
from wisv.timing.latency import PayloadBits
from wisv.timing.roundtime import Deployment


class PairCache:
    """The model pair, loaded on first use: cached traces need only its id and its dimensions."""

    def __init__(self, drafter: str | None, target: str | None):
        d_default, t_default = builtin_paths()
        self.d_dir = Path(drafter) if drafter else d_default
        self.t_dir = Path(target) if target else t_default
        self.builtin = drafter is None and target is None
        self.name = "built-in toy" if self.builtin else f"{self.d_dir.name} -> {self.t_dir.name}"
        self.id = file_id(self.d_dir, self.t_dir)
        self._pair = None

    def get(self):
        """The loaded ModelPair (one torch thread)."""
        if self._pair is None:
            torch.set_num_threads(1)
            self._pair = load_pair(self.d_dir, self.t_dir)
        return self._pair

    def dims(self) -> tuple[ModelDims, ModelDims]:
        return (ModelDims.from_hf_config(AutoConfig.from_pretrained(self.d_dir)),
                ModelDims.from_hf_config(AutoConfig.from_pretrained(self.t_dir)))


@dataclass(frozen=True)
class Head:
    """The decision head of the WISV methods, or none (fh/sh then use greedy, lossless acceptance)."""

    policy: MismatchPolicy | None  # HeadPolicy, or None
    tau: float  # operating threshold
    id: str  # cache id of the head files ("" without a head)
    desc: str  # what was resolved, for the printout and config.json
    hidden: int = 256  # H, for the head's FLOPs (eq. 17)
    csi_dim: int = FEATURE_DIM  # d_c


def resolve_head(head: str, tau: float | None, pair: PairCache) -> Head:
    """``default`` (the head shipped for the named pair simulated, the built-in one or ``--pair smollm2``; a clear
    notice when it is missing), a head shipped for the pair by name (``wisv-paper``, ``edge``, the peers), ``none``,
    a plugin's policy kind that needs no weights, or a head or judge directory."""
    from wisv.head.store import check_widths, is_policy_dir, load_policy_dir, named_policy
    from wisv.pairs import pair_heads, pair_of_target
    if head == "none":
        return Head(None, 0.0, "", "none: fh/sh use greedy (lossless) acceptance")
    plugin = named_policy(head)  # a plugin's kind that needs no weights (wisv.plugins)
    if plugin is not None:
        tau = plugin.tau if tau is None else tau
        code = Path(inspect.getfile(type(plugin)))  # its defaults are its code's: cached traces follow that file
        return Head(plugin, float(tau), f"{head}-{file_id(code)}", f"{head} (plugin, tau={tau})", *plugin.flops_dims)
    named = pair_of_target(None if pair.builtin else pair.t_dir)
    path = default_head_dir(None if pair.builtin else pair.t_dir) if head == "default" else Path(head)
    if named is not None and head in pair_heads(named):  # wisv-paper, edge, the peers: shipped for the pair
        path = pair_heads(named)[head]
    if path is None:
        return Head(None, 0.0, "", "none: the default heads belong to the built-in pair and the named pairs "
                                   "(--pair); pass --head PATH")
    if not is_policy_dir(path):
        if head != "default":
            raise ValueError(f"--head {head}: not a decision-head directory (no head.json or judge.json)")
        msg = (f"no decision head at {path} (train one with `python -m labeling`); fh/sh are simulated with "
               f"greedy (lossless) acceptance instead of WISV")
        print(f"note: {msg}")
        return Head(None, 0.0, "", f"none: {msg}")
    policy, tau = load_policy_dir(path, tau)  # a head or judge (wisv/head/store.py): ef for edge features, fh/sh else
    if policy.d_draft is not None:  # it reads the drafter's hidden states: the pair's widths must be the ones it takes
        d, t = pair.dims()
        check_widths(policy, path, d.d_model, t.d_model)
    return Head(policy, float(tau), file_id(path), f"{path} (tau={tau})", *policy.flops_dims)


def deployment(cfg, pair: PairCache, head: Head) -> tuple[Deployment, dict]:
    """Dims (pair or named architectures), profiles, payload encoding and exchange overhead -> Deployment."""
    if bool(cfg.arch_drafter) != bool(cfg.arch_target):
        raise ValueError("give both --arch-drafter and --arch-target, or neither")
    if cfg.arch_drafter:
        d, t = get_architecture(cfg.arch_drafter), get_architecture(cfg.arch_target)
        dims_desc = f"{cfg.arch_drafter} -> {cfg.arch_target}"
    else:
        (d, t), dims_desc = pair.dims(), f"the {pair.name} pair's own"
    ue = get_profile(cfg.ue_profile, cfg.local_profile, end="ue")  # "local": each end's own fit, where calibrated
    edge = get_profile(cfg.edge_profile, cfg.local_profile, end="edge")
    if cfg.payload == "paper":
        pb = PayloadBits.paper(vocab=d.vocab, d_d=d.d_model)
    elif cfg.payload == "wire":
        pb = wire_payload_bits(d.d_model, d.vocab)
    else:
        raise ValueError(f"unknown payload encoding {cfg.payload!r}; use paper or wire")
    rows = getattr(cfg, "target_features", 0)
    if rows:  # the feature drafter's downlink: rows of the target's width, fp16
        tf = wire_payload_bits(d.d_model, d.vocab, target_features=rows, d_t=t.d_model).tf_bits \
            if cfg.payload == "wire" else rows * t.d_model * 16
        pb = replace(pb, tf_bits=tf)
    ex, chunk, ue_chunk = exchange_overhead_s(cfg), chunk_overhead_s(cfg), chunk_overhead_s(cfg, "ue")
    start = stream_start_overhead_s(cfg)
    dep = Deployment(d, t, ue, edge, pb, head_hidden=head.hidden, csi_dim=head.csi_dim, exchange_overhead_s=ex,
                     chunk_overhead_s=chunk, ue_chunk_overhead_s=ue_chunk, stream_start_overhead_s=start)
    resolved = {"dims": dims_desc, "drafter_dims": asdict(d), "target_dims": asdict(t), "ue": ue.to_dict(),
                "edge": edge.to_dict(), "payload": asdict(pb), "exchange_overhead_s": ex, "chunk_overhead_s": chunk,
                "ue_chunk_overhead_s": ue_chunk, "stream_start_overhead_s": start}
    return dep, resolved


def exchange_overhead_s(cfg) -> float:
    """--exchange-overhead-ms, else the calibrated value when both devices are ``local``, else 0."""
    if cfg.exchange_overhead_ms is not None:
        return cfg.exchange_overhead_ms / 1e3
    if cfg.ue_profile == LOCAL and cfg.edge_profile == LOCAL:
        return load_calibration(cfg.local_profile or LOCAL_PROFILE_PATH).exchange_overhead_s
    return 0.0


def chunk_overhead_s(cfg, end: str = "edge") -> float:
    """The calibrated host time per chunk of a stream generated on ``end`` ("edge": server-only's, "ue":
    on-device's) when that end is ``local`` (its host runs the stream), else 0."""
    if (cfg.edge_profile if end == "edge" else cfg.ue_profile) == LOCAL:
        cal = load_calibration(cfg.local_profile or LOCAL_PROFILE_PATH)
        return cal.chunk_overhead_s if end == "edge" else cal.ue_chunk_overhead_s
    return 0.0


def stream_start_overhead_s(cfg) -> float:
    """The calibrated start of a server-only stream beyond its warm model when the edge is ``local`` (its host
    idles between the round trips), else 0."""
    if cfg.edge_profile == LOCAL:
        return load_calibration(cfg.local_profile or LOCAL_PROFILE_PATH).stream_start_overhead_s
    return 0.0


@dataclass(frozen=True)
class Link:
    """One simulated link setting."""

    name: str  # label in the table
    rate_mbps: float  # symmetric rate (a trace: its mean uplink rate), Mbit/s
    rtt_ms: float  # RTT (a trace: its mean), ms
    per: float  # packet error rate (a trace: its mean uplink PER)
    csi_at: Callable[[float], CSI]  # CSI in force at simulated time t (s)
    head_csi: CSI  # the CSI WISV traces are generated with (a trace: its row mean)
    outages: Outages = Outages()  # the trace's outage periods (repeating with it): rounds pause through them
    states: tuple[CSI, ...] = ()  # the distinct CSIs the link takes (a trace's rows; a fixed link's one)


def links_of(cfg) -> list[Link]:
    """The rate x RTT grid at --per, or one looping CSI trace."""
    if cfg.csi_trace:
        tr = load_trace(cfg.csi_trace, loop=True)
        n = len(tr.csis)
        mean = CSI(*(sum(getattr(c, f) for c in tr.csis) / n
                     for f in ("rate_up_mbps", "rate_down_mbps", "rtt_ms", "per_up", "per_down")))
        return [Link(f"trace {Path(cfg.csi_trace).name}", mean.rate_up_mbps, mean.rtt_ms, mean.per_up, tr.at, mean,
                     tr.outages, tuple(tr.csis))]
    out = []
    for r in cfg.rates_mbps:
        for t in cfg.rtts_ms:
            c = CSI.symmetric(r, t, cfg.per)
            out.append(Link(f"{r:g} Mbps / {t:g} ms", float(r), float(t), cfg.per, constant(c), c, states=(c,)))
    return out

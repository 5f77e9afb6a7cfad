"""A UE run's lanes: one per protocol it runs.  Alone, the UE runs ``--protocol`` into ``--out``; with
``--interleave P1 P2 ...`` it runs each prompt under every one of them in turn before the next prompt, each into
``--out`` with ``{protocol}`` filled in, so that a timed comparison's protocols meet the same machine and link a
fraction of a second apart (one protocol after the other, minutes apart, they meet the drift of a shared VM)."""
from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import config
from channel.emulator import parse_hostport
from channel.measure import sample_tcp
from testbed.common.link import LinkSpec
from testbed.live.ue.drafting import Drafter
from testbed.live.ue.kept import Kept, keep_done
from testbed.live.ue.ueconfig import UEConfig
from wisv.records.rows import RoundLog, RoundRow
from wisv.timing.window import WindowTracker

PLACEHOLDER = "{protocol}"  # in --out with --interleave: each protocol's own directory


def lane_configs(cfg: UEConfig) -> list[UEConfig]:
    """The settings of each lane: ``cfg`` itself, or with ``interleave`` one copy per protocol (its ``protocol`` and
    its ``out``); a ValueError for a repeated protocol or an ``--out`` without the placeholder."""
    if not cfg.interleave:
        return [cfg]
    if len(set(cfg.interleave)) != len(cfg.interleave):
        raise ValueError(f"--interleave: a protocol is named twice in {' '.join(cfg.interleave)}")
    if PLACEHOLDER not in cfg.out:
        raise ValueError(f"--interleave: --out must hold {PLACEHOLDER} (each protocol writes its own directory), "
                         f"got {cfg.out}")
    return [dataclasses.replace(cfg, protocol=p, out=cfg.out.replace(PLACEHOLDER, p), interleave=[])
            for p in cfg.interleave]


def session_id(cfg: UEConfig, index: int, interleaved: bool) -> str:
    """The edge session of a lane's prompt: ``UE-INDEX``, with the protocol between when lanes share the edge."""
    return f"{cfg.ue_id}-{cfg.protocol}-{index}" if interleaved else f"{cfg.ue_id}-{index}"


@dataclass
class Local:
    """What every prompt of a UE run shares: the drafter, its vocabulary, the stop rule and the emulated link."""

    drafter: Drafter  # the drafter (a model, or prompt lookup) and the vocabulary it declares at OPEN
    link: LinkSpec | None = None  # the emulated link (None: a real one, whose measured CSI is recorded)
    stop: Callable | None = None  # WISP rejection predictor's stop rule
    window: WindowTracker | None = None  # --draft-len/--tree-budget auto: what it learnt over the prompts so far
    edge: dict = field(default_factory=dict)  # the edge's settings from its last OPEN_OK
    endpoint: str = ""  # tcp://HOST:PORT the UE connects to
    log: RoundLog | None = None  # every round appended as it happens (rounds.jsonl)

    def tcp(self) -> tuple[int, int] | None:
        """(data segments sent, retransmitted) of this host's TCP connections to the endpoint (None: unknown)."""
        if not self.endpoint.startswith("tcp://"):
            return None
        try:
            host, port = parse_hostport(self.endpoint.removeprefix("tcp://"))
            return sample_tcp(socket.gethostbyname(host), port)
        except (ValueError, OSError):  # not HOST:PORT, or a name that does not resolve
            return None


@dataclass
class Lane:
    """One protocol of a UE run: its settings and files, and what its prompts gave so far."""

    cfg: UEConfig  # the run's settings with this lane's protocol and output directory
    local: Local  # what its prompts share: the drafter, the link, its window tracker and round log
    kept: Kept  # what an interrupted run completed (--keep-done), else nothing
    outputs: TextIO  # its outputs.jsonl, appended as prompts complete
    rows: list[RoundRow | dict] = field(default_factory=list)  # every round, the kept ones first
    recs: list[dict] = field(default_factory=list)  # every output record, the kept ones first

    @property
    def out(self) -> Path:
        return Path(self.cfg.out)


def open_lane(cfg: UEConfig, ids: list[str], make_local: Callable[[RoundLog], Local]) -> Lane:
    """A lane's directory (config.toml written) and files; ``make_local(round_log)`` builds its Local."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    config.write_config(out, cfg, config.provenance())  # --config OUT/config.toml reruns it
    kept = keep_done(out, ids) if cfg.keep_done else Kept()  # testbed.run --continue: what an interrupted run did
    local = make_local(RoundLog(out / "rounds.jsonl", append=cfg.keep_done))
    f = (out / "outputs.jsonl").open("a" if cfg.keep_done else "w")
    return Lane(cfg, local, kept, f, list(kept.rows), list(kept.recs))


def record(lane: Lane, rec: dict, rows: list[RoundRow]) -> None:
    """A completed prompt's output record and rounds, its record appended to outputs.jsonl at once."""
    lane.rows += rows
    lane.recs.append(rec)
    lane.outputs.write(json.dumps(rec) + "\n")
    lane.outputs.flush()

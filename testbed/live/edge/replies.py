"""The edge's replies and what goes into them: the settings OPEN_OK reports, REFERENCE_OK, a VERDICT's suggested stop
depth, and a batched DRAFT's end (its block, or the batch's error); pure helpers of testbed/live/edge/edgeserver.py."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from protocols.edge_side import EdgeSession
from protocols.wire import WIRE_VERSION, Message, MsgType, make
from testbed.live.edge.serveconfig import ServeConfig


def edge_settings(cfg: ServeConfig, tau: float, head: str, hidden_layer: int, uploads_hidden: bool = True) -> dict:
    """The settings an edge reports in OPEN_OK (a run records them in config.json); ``uploads_hidden`` tells the UE
    whether its head reads the drafter's hidden states (auto then picks fh or sh; else ef, which uploads none)."""
    vllm = {f"vllm_{k}": v for k, v in asdict(cfg.vllm).items()} if cfg.engine == "vllm" else {}  # flat on the wire
    return {"target": cfg.target or "built-in", "head": head, "tau": float(tau), "hidden_layer": hidden_layer,
            "uploads_hidden": bool(uploads_hidden),
            "engine": cfg.engine, **vllm, "device": cfg.device, "dtype": cfg.dtype, "max_draft_len": cfg.max_draft_len,
            "max_session_tokens": cfg.max_session_tokens,
            "batch_verify": cfg.batch_verify, "scheduler": cfg.scheduler, "max_batch": cfg.max_batch,
            "kv_reuse": cfg.kv_reuse, "edge_draft": cfg.edge_draft,
            "estimator": cfg.estimator, "wire_version": WIRE_VERSION}


def reference_ok(session: str, tokens: list[int], cached: bool) -> Message:
    return make(MsgType.REFERENCE_OK, session, {"tokens": np.asarray(tokens, np.int32)}, cached=cached)  # [n]


def with_stop_depth(reply: Message, depth: int | None) -> Message:
    """A VERDICT with the WDT predictor's suggested depth for the session's next block (when it has one)."""
    if depth is not None and reply.type == MsgType.VERDICT and not reply.header.get("done"):
        reply.header["stop_depth"] = depth
    return reply


def arrival(item: tuple) -> float | None:
    """The arrival time of a ``handle_many`` item, if it carries one."""
    return item[2] if len(item) > 2 else None


def end_draft(sess: EdgeSession, block, dt: float, batch: int) -> Message:
    """Finish a held DRAFT with its batched block, or fail it with the batch's error."""
    if isinstance(block, Exception):
        sess.abort_draft()
        raise block
    return sess.end_draft(block, dt, batch)

"""Checks across a message's fields and tensors, run on decode after each field passed its own (protocols/schema.py's
``Schema.check``): a DRAFT's tree and features, a VERDICT's path, target features and the edge's tokens, GENERATE's
period, CHUNK's edge-draft counts."""
from __future__ import annotations

from typing import Any

import numpy as np

from protocols.errors import WireError
from protocols.limits import Limits


def check_tree(header: dict[str, Any], tensors: dict[str, np.ndarray], limits: Limits) -> None:
    """A DRAFT tree: every parent is -1 or an earlier node (so the tree is acyclic) and its depth is bounded."""
    parents = tensors.get("parents")
    if parents is None:
        return
    p = parents.astype(np.int64)
    bad = np.flatnonzero(p >= np.arange(p.size))
    if bad.size:
        i = int(bad[0])
        raise WireError("bad_tree", f"DRAFT tree node {i} has parent {int(p[i])}; a parent must precede its node")
    depth = np.zeros(p.size, dtype=np.int64)
    for i, q in enumerate(p):
        depth[i] = 1 if q < 0 else depth[q] + 1
    if depth.size and int(depth.max()) > limits.max_tree_depth:
        raise WireError("too_large",
                        f"DRAFT tree depth {int(depth.max())} exceeds max_tree_depth={limits.max_tree_depth}")


def check_features(header: dict[str, Any], tensors: dict[str, np.ndarray], limits: Limits) -> None:
    """DRAFT draft features [K, 3]: finite, a max probability and a margin in [0, 1], an entropy >= 0."""
    f = tensors.get("features")
    if f is None:
        return
    x = f.astype(np.float32)
    if not np.isfinite(x).all():
        raise WireError("bad_features", "DRAFT features hold a NaN or an infinity")
    for col, name, lo, hi in ((0, "max probability", 0.0, 1.0), (1, "entropy", 0.0, np.inf), (2, "margin", 0.0, 1.0)):
        bad = np.flatnonzero((x[:, col] < lo - 1e-3) | (x[:, col] > hi + 1e-3))
        if bad.size:
            i = int(bad[0])
            raise WireError("bad_features", f"DRAFT features row {i}: {name} {float(x[i, col])} outside [{lo}, {hi}]")


def check_draft(header: dict[str, Any], tensors: dict[str, np.ndarray], limits: Limits) -> None:
    check_tree(header, tensors, limits)
    check_features(header, tensors, limits)


def check_path(header: dict[str, Any], tensors: dict[str, np.ndarray], limits: Limits) -> None:
    """A VERDICT's accepted tree path has one node per accepted token."""
    path = tensors.get("path")
    if path is not None and path.shape[0] != header["n_accepted"]:
        raise WireError("shape_mismatch",
                        f"VERDICT path has {path.shape[0]} nodes, n_accepted is {header['n_accepted']}")


def check_target_features(header: dict[str, Any], tensors: dict[str, np.ndarray], limits: Limits) -> None:
    """A VERDICT's target features [n, d_t]: at most one row per committed token (n_accepted + 1), all finite."""
    f = tensors.get("features")
    if f is None:
        return
    edge = tensors.get("edge_tokens")
    committed = header["n_accepted"] + 1 + (0 if edge is None else edge.shape[0])
    if f.shape[0] > committed:
        raise WireError("shape_mismatch", f"VERDICT features have {f.shape[0]} rows, the round committed "
                                          f"{committed} tokens")
    if not np.isfinite(f.astype(np.float32)).all():
        raise WireError("bad_features", "VERDICT features hold a NaN or an infinity")


def check_edge_tokens(header: dict[str, Any], tensors: dict[str, np.ndarray], limits: Limits) -> None:
    """A VERDICT's edge extension: ``edge_drafted`` and ``edge_tokens`` both or neither, no more tokens committed than
    the edge drafted, and never after a tree (a chain's draft only)."""
    d, e = header.get("edge_drafted"), tensors.get("edge_tokens")
    if (d is None) != (e is None) or (e is not None and e.shape[0] > d):
        raise WireError("bad_field", f"VERDICT edge_drafted = {d}, edge_tokens {None if e is None else e.shape[0]}: "
                                     "both or neither, and no more tokens than drafted")
    if e is not None and "path" in tensors:
        raise WireError("bad_tensor", "VERDICT edge_tokens follow a chain's draft, not a tree's path")


def check_verdict(header: dict[str, Any], tensors: dict[str, np.ndarray], limits: Limits) -> None:
    check_path(header, tensors, limits)
    check_edge_tokens(header, tensors, limits)
    check_target_features(header, tensors, limits)


LOOKUP_STOP = ("prompt_lookup_min", "prompt_lookup_max", "stop_streak")  # GENERATE's lookup stop: all or none


def check_generate(header: dict[str, Any], tensors: dict[str, np.ndarray], limits: Limits) -> None:
    """A GENERATE's chunk period, when given, is a positive number of milliseconds; its lookup stop comes whole, on
    a handed-over round (``tokens``), with prompt_lookup_min <= prompt_lookup_max."""
    if header.get("every_ms", 1.0) <= 0:
        raise WireError("bad_field", f"GENERATE every_ms = {header['every_ms']} must be > 0")
    given = [k for k in LOOKUP_STOP if k in header]
    if not given:
        return
    lo, hi = header.get("prompt_lookup_min"), header.get("prompt_lookup_max")
    if len(given) < len(LOOKUP_STOP) or "tokens" not in header or lo > hi:
        raise WireError("bad_field", f"GENERATE lookup stop {', '.join(f'{k} = {header.get(k)}' for k in LOOKUP_STOP)}"
                                     ": all three or none, on a handed-over round (tokens), min <= max")


def check_chunk(header: dict[str, Any], tensors: dict[str, np.ndarray], limits: Limits) -> None:
    """A CHUNK's edge drafts: both counts or neither, and no more accepted than drafted."""
    d, a = header.get("drafted"), header.get("accepted")
    if (d is None) != (a is None) or (a or 0) > (d or 0):
        raise WireError("bad_field", f"CHUNK drafted = {d}, accepted = {a}: both or neither, and accepted <= drafted")

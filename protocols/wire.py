"""Encode and decode typed, pickle-free ZeroMQ multipart messages; decode validates all and raises WireError.

Frame 0 is one MsgType byte then a msgpack header {"v", "session", "tensors": [{"name", "dtype", "shape"}], ...};
frames 1..n are the raw little-endian C-contiguous tensor buffers, in descriptor order. Float tensors may hold
NaN/inf: the wire carries bytes and does not judge values; float header fields may not (+inf only where allowed).
What each type may carry lives in schema.SCHEMAS.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np

from protocols.schema import (
    DTYPES,
    SCHEMAS,
    WIRE_VERSION,
    Limits,
    MsgType,
    Schema,
    Tensor,
    WireError,
    brief,
    type_names,
)

__all__ = [
    "WIRE_VERSION", "MsgType", "Limits", "WireError", "Message", "SCHEMAS",
    "make", "error_message", "encode", "decode", "frame_bytes",
]

SESSION_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_DEPTH = 8  # nesting allowed inside header values (e.g. "meta")
MAX_ERROR_TEXT = 4096  # chars of ERROR text kept by error_message
Shape = tuple[int, ...]


@dataclass
class Message:
    """One wire message. header holds only the type-specific fields (not "v", "session" or "tensors")."""

    type: MsgType
    session: str  # 1..64 chars of [A-Za-z0-9_.-]
    header: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, np.ndarray] = field(default_factory=dict)  # name -> array, in frame order


def make(type: MsgType | int, session: str, tensors: dict[str, Any] | None = None, **header: Any) -> Message:
    """Build a Message without spelling out the dataclass: make(MsgType.PING, "s1", seq=0, t_send=0.0)."""
    return Message(_msg_type(type), session, dict(header), dict(tensors or {}))


def error_message(session: str, code: str, text: str) -> Message:
    """ERROR message; an invalid session id becomes "unknown" and text is cut to MAX_ERROR_TEXT chars."""
    if not _valid_session(session):
        session = "unknown"
    return make(MsgType.ERROR, session, code=str(code), text=str(text)[:MAX_ERROR_TEXT])


def frame_bytes(frames: Sequence[Any]) -> int:
    """Total bytes of all frames (header frame included), for byte accounting."""
    return sum(memoryview(f).nbytes for f in frames)


# ---------------------------------------------------------------------------------------------- encode


def encode(msg: Message) -> list[bytes]:
    """Message -> frames. Checks everything that does not need Limits (types, fields, dtypes, ranks)."""
    mtype = _msg_type(msg.type)
    schema = SCHEMAS[mtype]
    _check_session(msg.session)
    header = {k: _plain(v) for k, v in msg.header.items()}
    _check_keys(header, "header", 0)
    _check_fields(mtype, schema, header, None)
    arrays = {name: _wire_array(mtype, schema, name, value) for name, value in msg.tensors.items()}
    _check_tensor_set(mtype, schema, {name: arr.shape for name, arr in arrays.items()})
    descs = [{"name": n, "dtype": a.dtype.name, "shape": list(a.shape)} for n, a in arrays.items()]
    full = {"v": WIRE_VERSION, "session": msg.session, "tensors": descs, **header}
    try:
        packed = msgpack.packb(full, use_bin_type=True, default=_plain_or_fail)
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireError("bad_field", f"{mtype.name}: header is not msgpack-encodable: {exc}") from exc
    return [bytes([mtype]) + packed, *(a.tobytes() for a in arrays.values())]


def _wire_array(mtype: MsgType, schema: Schema, name: str, value: Any) -> np.ndarray:
    spec = _tensor_spec(mtype, schema, name)
    arr = np.asarray(value)
    where = f"{mtype.name} tensor {name!r}"
    spec.check_dtype(where, arr.dtype.name)
    spec.check_shape(where, arr.shape, None)
    return np.ascontiguousarray(arr, dtype=DTYPES[arr.dtype.name])  # little-endian, C order


def _plain(value: Any) -> Any:
    """numpy scalars -> Python scalars, so np.int64(5) is an int field like 5."""
    return value.item() if isinstance(value, np.generic) else value


def _plain_or_fail(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot encode {type(value).__name__}")


# ---------------------------------------------------------------------------------------------- decode


def decode(frames: Sequence[Any], limits: Limits) -> Message:
    """Frames -> Message, validating framing, header, shapes (before reading buffers) and token ranges."""
    views = _frame_views(frames, limits)
    mtype = _msg_type(views[0][0])
    schema = SCHEMAS[mtype]
    raw = _unpack_header(views[0][1:], limits)
    version = raw.pop("v", None)
    if type(version) is not int or (version != WIRE_VERSION and mtype != MsgType.ERROR):  # ERROR's schema is frozen
        raise WireError("bad_version", f"{mtype.name}: sent in wire-protocol version {brief(version)}, "
                                       f"the receiver speaks version {WIRE_VERSION}")
    session = raw.pop("session", None)
    _check_session(session)
    descs = raw.pop("tensors", None)
    header = _check_fields(mtype, schema, raw, limits)
    tensors = _decode_tensors(mtype, schema, descs, views[1:], limits)
    if schema.check is not None:
        schema.check(header, tensors, limits)
    return Message(mtype, session, header, tensors)


def _frame_views(frames: Sequence[Any], limits: Limits) -> list[memoryview]:
    if not isinstance(frames, (list, tuple)):
        raise WireError("bad_frame", f"expected a list of frames, got {type(frames).__name__}")
    if not frames:
        raise WireError("empty", "no frames: expected at least frame 0 (type byte + header)")
    views = [_byte_view(f, i) for i, f in enumerate(frames)]
    if views[0].nbytes == 0:
        raise WireError("empty", "frame 0 is empty: expected a type byte then a msgpack header")
    for i, view in enumerate(views):
        if view.nbytes > limits.max_frame_bytes:
            cap = limits.max_frame_bytes
            raise WireError("too_large", f"frame {i} is {view.nbytes} bytes > max_frame_bytes={cap}")
    return views


def _byte_view(frame: Any, index: int) -> memoryview:
    """Read-only flat byte view of any buffer (bytes, bytearray, memoryview, zmq.Frame): no copy."""
    try:
        view = memoryview(frame)
    except TypeError:
        raise WireError("bad_frame", f"frame {index} is {type(frame).__name__}, expected bytes") from None
    if not view.c_contiguous:
        raise WireError("bad_frame", f"frame {index} is not a contiguous buffer")
    return view.toreadonly().cast("B")


def _unpack_header(data: memoryview, limits: Limits) -> dict[str, Any]:
    if data.nbytes > limits.max_header_bytes:
        raise WireError("too_large", f"header is {data.nbytes} bytes > max_header_bytes={limits.max_header_bytes}")
    try:
        header = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise WireError("bad_header", f"header is not valid msgpack: {type(exc).__name__}: {exc}") from exc
    if not isinstance(header, dict):
        raise WireError("bad_header", f"header must be a msgpack map, got {type(header).__name__}")
    _check_keys(header, "header", 0)
    return header


def _decode_tensors(
    mtype: MsgType, schema: Schema, descs: Any, bufs: list[memoryview], limits: Limits
) -> dict[str, np.ndarray]:
    if type(descs) is not list:
        raise WireError("bad_header", f"{mtype.name}: header 'tensors' must be a list, got {brief(descs)}")
    if len(descs) != len(bufs):
        text = f"header describes {len(descs)} tensor(s) but {len(bufs)} tensor frame(s) follow"
        raise WireError("frame_count", f"{mtype.name}: {text}")
    declared: dict[str, tuple[str, Shape]] = {}
    for i, (desc, buf) in enumerate(zip(descs, bufs)):
        name, dtype, shape = _check_descriptor(mtype, schema, i, desc, limits)
        if name in declared:
            raise WireError("bad_tensor", f"{mtype.name}: tensor {name!r} appears twice")
        _check_length(f"{mtype.name} tensor {name!r}", DTYPES[dtype], shape, buf, limits)
        declared[name] = (dtype, shape)
    _check_tensor_set(mtype, schema, {name: shape for name, (_, shape) in declared.items()})
    tensors = {}
    for (name, (dtype, shape)), buf in zip(declared.items(), bufs):
        arr = np.frombuffer(buf, dtype=DTYPES[dtype]).reshape(shape)  # read-only, zero-copy view of the frame
        schema.tensors[name].check_values(f"{mtype.name} tensor {name!r}", arr, limits)
        tensors[name] = arr
    return tensors


def _check_descriptor(
    mtype: MsgType, schema: Schema, index: int, desc: Any, limits: Limits
) -> tuple[str, str, Shape]:
    if type(desc) is not dict or set(desc) != {"name", "dtype", "shape"}:
        text = f"descriptor must be a map of name, dtype, shape; got {brief(desc)}"
        raise WireError("bad_header", f"{mtype.name} tensor #{index}: {text}")
    name, dtype, shape = desc["name"], desc["dtype"], desc["shape"]
    spec = _tensor_spec(mtype, schema, name)
    where = f"{mtype.name} tensor {name!r}"
    spec.check_dtype(where, dtype)
    if type(shape) is not list or any(type(d) is not int or d < 0 for d in shape):
        raise WireError("bad_shape", f"{where}: shape must be a list of non-negative ints, got {brief(shape)}")
    spec.check_shape(where, tuple(shape), limits)
    return name, dtype, tuple(shape)


# ---------------------------------------------------------------------------------------------- checks


def _msg_type(value: Any) -> MsgType:
    try:
        return MsgType(value)
    except ValueError:
        known = f"1..{int(max(MsgType))}"
        raise WireError("bad_type", f"unknown message type byte {brief(value)}; known: {known}") from None


def _valid_session(session: Any) -> bool:
    return type(session) is str and SESSION_RE.fullmatch(session) is not None


def _check_session(session: Any) -> None:
    if not _valid_session(session):
        rule = "a str of 1..64 chars of [A-Za-z0-9_.-]"
        raise WireError("bad_session", f"session id {brief(session)} must be {rule}")


def _check_keys(value: Any, path: str, depth: int) -> None:
    """Every map key, at any depth, must be a str; nesting is capped at MAX_DEPTH."""
    if depth > MAX_DEPTH:
        raise WireError("bad_header", f"{path}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if type(key) is not str:
                raise WireError("bad_header", f"{path}: map key {brief(key)} is not a str")
            _check_keys(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_keys(item, f"{path}[{i}]", depth + 1)


def _check_fields(mtype: MsgType, schema: Schema, header: dict[str, Any], limits: Limits | None) -> dict[str, Any]:
    unknown = sorted(set(header) - set(schema.fields))
    if unknown:
        allowed = sorted(schema.fields)
        raise WireError("bad_field", f"{mtype.name}: unknown header field(s) {unknown}; allowed {allowed}")
    out = {}
    for name, spec in schema.fields.items():
        if name in header:
            out[name] = spec.check(f"{mtype.name} header field {name!r}", header[name], limits)
        elif spec.required:
            want = type_names(spec.types)
            raise WireError("missing_field", f"{mtype.name}: missing header field {name!r} ({want})")
    return out


def _tensor_spec(mtype: MsgType, schema: Schema, name: Any) -> Tensor:
    if type(name) is not str or name not in schema.tensors:
        allowed = sorted(schema.tensors)
        raise WireError("bad_tensor", f"{mtype.name}: unknown tensor {brief(name)}; allowed {allowed}")
    return schema.tensors[name]


def _check_length(where: str, dtype: np.dtype, shape: Shape, buf: memoryview, limits: Limits) -> None:
    expected = math.prod(shape) * dtype.itemsize
    if expected > limits.max_frame_bytes:
        raise WireError("too_large", f"{where}: shape {list(shape)} needs {expected} bytes > max_frame_bytes")
    if buf.nbytes != expected:
        code = "truncated" if buf.nbytes < expected else "overlong"
        formula = f"prod({list(shape)}) * {dtype.itemsize}"
        raise WireError(code, f"{where}: frame is {buf.nbytes} bytes, expected {expected} = {formula}")


def _check_tensor_set(mtype: MsgType, schema: Schema, shapes: dict[str, Shape]) -> None:
    """Required tensors are present, and tensors tied to another one agree on dim 0."""
    for name, spec in schema.tensors.items():
        if spec.required and name not in shapes:
            raise WireError("missing_tensor", f"{mtype.name}: missing required tensor {name!r}")
        if spec.rows_like is not None and name in shapes and spec.rows_like in shapes:
            rows, want = shapes[name][0], shapes[spec.rows_like][0]
            if rows != want:
                text = f"dim 0 = {rows}, expected {want} = len({spec.rows_like!r})"
                raise WireError("shape_mismatch", f"{mtype.name} tensor {name!r}: {text}")

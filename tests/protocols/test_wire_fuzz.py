"""Fuzz decode: any frame list yields a valid Message or a WireError, never another exception."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocols.schema import SCHEMAS, WIRE_VERSION
from protocols.wire import Limits, Message, MsgType, WireError, decode, encode, make

LIMITS = Limits(vocab_size=50, max_draft_len=8, max_hidden_dim=16, max_prompt_len=16, max_positions=4,
                max_frame_bytes=4096, max_header_bytes=1024)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FIELD_NAMES = sorted({name for s in SCHEMAS.values() for name in s.fields} | {"v", "session", "tensors"})
TENSOR_NAMES = sorted({name for s in SCHEMAS.values() for name in s.tensors})

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=8),
    st.binary(max_size=8), st.sampled_from([1, 0, -1, 3, 8, "s1", "fh", "int32", "float16", "uint8"]),
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
descriptors = st.lists(
    st.fixed_dictionaries({
        "name": st.sampled_from(TENSOR_NAMES) | st.text(max_size=4),
        "dtype": st.sampled_from(["int32", "int64", "float16", "float32", "uint8", "bool", "<i4"]) | values,
        "shape": st.lists(st.integers(-2, 10) | st.sampled_from([2**40, 2**63]) | values, max_size=3),
    }),
    max_size=3,
)
headers = st.dictionaries(st.sampled_from(FIELD_NAMES), values, max_size=10).flatmap(
    lambda h: st.fixed_dictionaries(
        {"v": st.sampled_from([WIRE_VERSION, WIRE_VERSION, WIRE_VERSION + 1, 1, True]),
         "session": st.sampled_from(["s1", "", "a b"]), "tensors": descriptors},
    ).map(lambda base: {**h, **base})
)


def check(frames: list[Any]) -> None:
    """decode either raises WireError, or returns a Message that re-encodes to the same bytes."""
    try:
        msg = decode(frames, LIMITS)
    except WireError:
        return
    assert isinstance(msg, Message)
    again = encode(msg)
    assert encode(decode(again, LIMITS)) == again




TYPED = {
    int: st.integers(-1, 10), float: st.floats(), bool: st.booleans(),
    str: st.text(max_size=4) | st.sampled_from(["0" * 64, "ab" * 32, "AB" * 32]),  # vocab_hash: hex or not
    type(None): st.none(),
    dict: st.dictionaries(st.text(max_size=3), st.floats() | st.integers(-(2**63), 2**64 - 1), max_size=2),
}


@st.composite
def near_valid(draw: st.DrawFn) -> list[bytes]:
    """Mostly well-formed messages of a real type, so fuzzing reaches the tensor and range checks."""
    mtype = draw(st.sampled_from(list(MsgType)))
    schema = SCHEMAS[mtype]
    header: dict[str, Any] = {"v": WIRE_VERSION, "session": "s1"}
    for name, spec in schema.fields.items():
        if spec.required or draw(st.booleans()):
            wild = draw(st.integers(0, 9)) == 0  # now and then a value of any type
            header[name] = draw(values if wild else st.one_of(*(TYPED[t] for t in spec.types)))
    descs, bufs = [], []
    for name, spec in schema.tensors.items():
        if not (spec.required or draw(st.booleans())):
            continue
        dtype = draw(st.sampled_from(spec.dtypes))
        shape = draw(st.lists(st.integers(0, 5), min_size=len(spec.dims), max_size=len(spec.dims)))
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        descs.append({"name": name, "dtype": dtype, "shape": shape})
        bufs.append(draw(st.binary(min_size=size, max_size=size) | st.binary(max_size=8)))
    header["tensors"] = descs
    return [bytes([mtype]) + msgpack.packb(header, use_bin_type=True), *bufs]


@pytest.mark.slow
@FUZZ
@given(near_valid())
def test_near_valid_messages(frames: list[bytes]) -> None:
    check(frames)


def seed_frames() -> list[list[bytes]]:
    block = {"tokens": np.array([1, 2], np.int32), "hidden": np.ones((2, 4), np.float16)}  # [K], [K, d]
    draft = make(MsgType.DRAFT, "s1", block, round=0, t_draft_s=0.1, csi={"snr": 1.0})
    open_ = make(MsgType.OPEN, "s1", {"prompt": np.array([3, 4, 5], np.int64)}, protocol="fh", draft_len=4,
                 max_new_tokens=8, meta={"a": [1, {"b": 2}]})
    req = make(MsgType.HIDDEN_REQ, "s1", {"positions": np.array([0, 3], np.int32)}, round=1)
    hello = make(MsgType.OPEN, "s1", {"prompt": np.array([3, 4], np.int32)}, protocol="sh", draft_len=4,
                 max_new_tokens=8, vocab_size=50, vocab_hash="ab" * 32)
    ok = make(MsgType.OPEN_OK, "s1", target_hidden=8, vocab_size=50, vocab_hash="cd" * 32,
              edge={"head": "none", "tau": 0.5, "batch_verify": False, "estimator": None})
    ref = make(MsgType.REFERENCE, "s1", {"prompt": np.array([3, 4], np.int32)}, max_new_tokens=8)
    ref_ok = make(MsgType.REFERENCE_OK, "s1", {"tokens": np.array([5, 6], np.int32)}, cached=False)
    return [encode(m) for m in (draft, open_, req, hello, ok, ref, ref_ok)]


@st.composite
def mutated(draw: st.DrawFn) -> list[bytes]:
    """A valid message with a few bits flipped, its tail cut or bytes inserted in one of its frames."""
    frames = draw(st.sampled_from(seed_frames()))
    index = draw(st.integers(0, len(frames) - 1))
    frame = bytearray(frames[index])
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(frame)))
        action = draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip" and pos < len(frame):
            frame[pos] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del frame[pos:]
        else:
            frame[pos:pos] = draw(st.binary(min_size=1, max_size=4))
    return [*frames[:index], bytes(frame), *frames[index + 1:]]


@FUZZ
@given(st.lists(st.binary(max_size=64), max_size=5))
def test_random_frames(frames: list[bytes]) -> None:
    check(frames)


@pytest.mark.slow
@FUZZ
@given(st.integers(0, 255), headers, st.lists(st.binary(max_size=48), max_size=3))
def test_structured_headers(type_byte: int, header: dict[str, Any], bufs: list[bytes]) -> None:
    check([bytes([type_byte]) + msgpack.packb(header, use_bin_type=True), *bufs])


@FUZZ
@given(mutated())
def test_mutated_valid_messages(frames: list[bytes]) -> None:
    check(frames)


random_frames = st.lists(st.binary(max_size=64), max_size=5)
structured = st.builds(lambda t, h, bufs: [bytes([t]) + msgpack.packb(h, use_bin_type=True), *bufs],
                       st.integers(0, 255), headers, st.lists(st.binary(max_size=48), max_size=3))
CORPUS = {"random_frames": random_frames, "structured_headers": structured, "near_valid": near_valid(),
          "mutated": mutated()}  # the fuzz corpus's strategies, also sent to a live edge (tests/testbed/live)


def test_an_open_naming_an_unknown_protocol_is_refused_on_decode() -> None:
    """The edge once answered such an OPEN with an internal error; decode now names the field."""
    msg = make(MsgType.OPEN, "s1", {"prompt": np.arange(3, dtype=np.int32)}, protocol="0" * 64, draft_len=4,
               max_new_tokens=9, drafter_hidden=3)
    with pytest.raises(WireError) as e:
        decode(encode(msg), Limits(vocab_size=64, max_draft_len=8))
    assert e.value.code == "bad_field" and "protocol" in str(e.value)

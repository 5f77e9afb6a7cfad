"""Wire format: round trips for every message type, a table of corrupted messages, and byte accounting."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import pytest

from protocols.wire import (
    SCHEMAS,
    WIRE_VERSION,
    Limits,
    Message,
    MsgType,
    WireError,
    decode,
    encode,
    error_message,
    frame_bytes,
    make,
)

VOCAB = 100
HASH = "0123456789abcdef" * 4  # a sha256 hex digest
LIMITS = Limits(vocab_size=VOCAB, max_draft_len=8, max_hidden_dim=32, max_prompt_len=16, max_positions=4)


def tokens(*ids: int, dtype: Any = np.int32) -> np.ndarray:
    return np.array(ids, dtype=dtype)  # [K]


def valid_messages() -> dict[str, Message]:
    rng = np.random.default_rng(0)
    hidden16 = rng.standard_normal((3, 8)).astype(np.float16)  # [K, d]
    hidden16[0, 0] = np.nan  # NaN/inf travel as plain bytes
    probs = rng.random((3, VOCAB)).astype(np.float32)  # [K, V]
    return {
        "open": make(MsgType.OPEN, "ue-1", {"prompt": tokens(5, 6, 7, dtype=np.int64)},
                     protocol="sh", draft_len=4, max_new_tokens=32, drafter_hidden=8, head=None, temperature=0.7,
                     meta={"task": "gsm8k", "ids": [1, 2]}),
        "open_vocab": make(MsgType.OPEN, "ue-1", {"prompt": tokens(5, 6)}, protocol="fh", draft_len=4,
                           max_new_tokens=32, vocab_size=VOCAB, vocab_hash=HASH),
        "open_ok": make(MsgType.OPEN_OK, "ue-1", target_hidden=16, vocab_size=VOCAB),
        "open_ok_settings": make(MsgType.OPEN_OK, "ue-1", target_hidden=16, vocab_size=VOCAB, vocab_hash=HASH,
                                 edge={"head": "none", "tau": 0.5, "max_batch": 16, "batch_verify": False,
                                       "estimator": None}),
        "reference": make(MsgType.REFERENCE, "ue-1", {"prompt": tokens(5, 6, 7)}, max_new_tokens=32),
        "reference_vocab": make(MsgType.REFERENCE, "ue-1", {"prompt": tokens(5)}, max_new_tokens=8, vocab_size=VOCAB,
                                vocab_hash=HASH),
        "reference_ok": make(MsgType.REFERENCE_OK, "ue-1", {"tokens": tokens(8, 9, 99)}, cached=True),
        "reference_ok_empty": make(MsgType.REFERENCE_OK, "ue-1", {"tokens": tokens()}, cached=False),
        "ping": make(MsgType.PING, "ue-1", {"payload": np.arange(256, dtype=np.uint8)}, seq=3, t_send=12.5),
        "ping_empty_payload": make(MsgType.PING, "ue-1", {"payload": np.zeros(0, np.uint8)}, seq=0, t_send=0.0),
        "pong": make(MsgType.PONG, "ue-1", seq=3, t_send=12.5),
        "draft_empty": make(MsgType.DRAFT, "ue-1", {"tokens": tokens()}, round=0, t_draft_s=0.0,
                            protocol="greedy"),  # prompt lookup without a match: a plain decode step
        "draft_fh": make(MsgType.DRAFT, "ue-1", {"tokens": tokens(1, 2, 99), "hidden": hidden16},
                         round=0, t_draft_s=0.01, csi={"rate_mbps": 10.0, "rtt_ms": 20.0}, protocol="fh"),
        "draft_probs": make(MsgType.DRAFT, "ue-1", {"tokens": tokens(0, 1, 2, dtype=np.int64), "probs": probs},
                            round=1, t_draft_s=0.02),
        "hidden_req": make(MsgType.HIDDEN_REQ, "ue-1", {"positions": tokens(0, 7)}, round=2),
        "hidden": make(MsgType.HIDDEN, "ue-1", {"hidden": rng.standard_normal((2, 32)).astype(np.float32)},
                       round=2),  # [m, d]
        "verdict": make(MsgType.VERDICT, "ue-1", round=2, n_accepted=3, next_token=42, mismatches=1, queried=1,
                        t_verify_s=0.1, t_head_s=0.001, t_edge_s=0.2, done=False),
        "generate": make(MsgType.GENERATE, "ue-1", round=3, every_tokens=4, every_ms=12.5),
        "chunk": make(MsgType.CHUNK, "ue-1", {"tokens": tokens(8, 9)}, round=3, t_decode_s=0.01, t_edge_s=0.02,
                      batch=2, done=False),
        "close": make(MsgType.CLOSE, "ue-1"),
        "closed": make(MsgType.CLOSED, "ue-1"),
        "error": error_message("ue-1", "bad_dtype", "tokens must be int"),
    }


@pytest.mark.parametrize("name", list(valid_messages()))
def test_round_trip_every_type(name: str) -> None:
    msg = valid_messages()[name]
    got = decode(encode(msg), LIMITS)
    assert (got.type, got.session, got.header) == (msg.type, msg.session, msg.header)
    assert list(got.tensors) == list(msg.tensors)
    for key, arr in msg.tensors.items():
        assert got.tensors[key].dtype == arr.dtype and got.tensors[key].shape == arr.shape
        assert got.tensors[key].tobytes() == arr.tobytes()  # byte-exact, NaN included


def test_all_types_covered() -> None:
    assert {m.type for m in valid_messages().values()} == set(MsgType)


def test_decoded_arrays_are_read_only_views() -> None:
    frames = encode(valid_messages()["draft_fh"])
    arr = decode(frames, LIMITS).tensors["hidden"]
    assert not arr.flags.writeable and not arr.flags.owndata


def test_decode_accepts_bytearray_and_memoryview_frames() -> None:
    frames = encode(valid_messages()["draft_fh"])
    got = decode([bytearray(frames[0]), *map(memoryview, frames[1:])], LIMITS)
    assert got.tensors["tokens"].tolist() == [1, 2, 99]


def test_zmq_inproc_copy_free_frames() -> None:
    zmq = pytest.importorskip("zmq")
    ctx = zmq.Context()
    tx, rx = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        tx.bind("inproc://wire-test")
        rx.connect("inproc://wire-test")
        frames = encode(valid_messages()["hidden"])
        tx.send_multipart(frames)
        received = rx.recv_multipart(copy=False)  # zmq.Frame objects, decoded without copying
        assert frame_bytes(received) == frame_bytes(frames)
        assert decode(received, LIMITS).tensors["hidden"].tobytes() == frames[1]
    finally:
        tx.close(linger=0)
        rx.close(linger=0)
        ctx.term()


def test_encode_normalises_byte_order_and_numpy_scalars() -> None:
    big_endian = np.array([1, 2, 3], dtype=">i4")
    msg = make(MsgType.DRAFT, "s", {"tokens": big_endian[::-1]}, round=np.int64(4), t_draft_s=np.float32(0.5))
    got = decode(encode(msg), LIMITS)
    assert got.tensors["tokens"].tolist() == [3, 2, 1] and got.tensors["tokens"].dtype == np.dtype("<i4")
    assert got.header["round"] == 4 and type(got.header["round"]) is int


def test_float_fields_accept_ints_and_decode_as_float() -> None:
    got = decode(encode(make(MsgType.PING, "s", seq=1, t_send=7)), LIMITS)
    assert got.header["t_send"] == 7.0 and type(got.header["t_send"]) is float


def test_frame_bytes_counts_all_frames() -> None:
    frames = encode(valid_messages()["draft_fh"])
    assert len(frames) == 3
    assert frame_bytes(frames) == sum(len(f) for f in frames)
    assert frame_bytes(frames) > 3 * 4 + 3 * 8 * 2  # header + tokens [3] int32 + hidden [3, 8] float16


def test_an_error_of_another_version_still_decodes() -> None:
    """ERROR's schema is frozen, so a peer that speaks another version can read why it was refused."""
    header = {"v": WIRE_VERSION + 1, "session": "s1", "tensors": [], "code": "bad_version", "text": "why"}
    got = decode(pack(MsgType.ERROR, header, []), LIMITS)
    assert (got.type, got.header["code"], got.header["text"]) == (MsgType.ERROR, "bad_version", "why")


def test_error_message_sanitises_session_and_caps_text() -> None:
    msg = error_message("bad session!", "bad_header", "x" * 10_000)
    got = decode(encode(msg), LIMITS)
    assert got.session == "unknown" and got.header["code"] == "bad_header" and len(got.header["text"]) == 4096


@pytest.mark.parametrize(
    "msg, code",
    [
        (make(MsgType.DRAFT, "s", {"tokens": np.zeros(2, np.float64)}, round=0, t_draft_s=0.0), "bad_dtype"),
        (make(MsgType.DRAFT, "s", round=0, t_draft_s=0.0), "missing_tensor"),
        (make(MsgType.DRAFT, "s", {"tokens": tokens(1), "junk": tokens(1)}, round=0, t_draft_s=0.0), "bad_tensor"),
        (make(MsgType.DRAFT, "s", {"tokens": tokens(1)}, round=True, t_draft_s=0.0), "bad_field"),
        (make(MsgType.PING, "s", seq=0, t_send=0.0, extra=1), "bad_field"),
        (make(MsgType.PING, "s", seq=0, t_send=0.0, v=2), "bad_field"),
        (make(MsgType.CLOSE, "s/1"), "bad_session"),
        (make(MsgType.OPEN, "s", {"prompt": tokens(1)}, protocol="fh", draft_len=4, max_new_tokens=1,
              meta={1: "x"}), "bad_header"),
        (make(MsgType.OPEN, "s", {"prompt": tokens(1)}, protocol="fh", draft_len=4, max_new_tokens=1,
              meta={"x": object()}), "bad_field"),
    ],
)
def test_encode_rejects_invalid_messages(msg: Message, code: str) -> None:
    with pytest.raises(WireError) as err:
        encode(msg)
    assert err.value.code == code


def test_make_rejects_unknown_type() -> None:
    with pytest.raises(WireError, match="bad_type"):
        make(99, "s")


# ------------------------------------------------------------------------------------------ corruption table

Frames = list[bytes]
Header = dict[str, Any]


def draft_parts() -> tuple[int, Header, list[bytes]]:
    """A valid DRAFT with tokens [3] int32 and hidden [3, 8] float16, split into (type byte, header, buffers)."""
    msg = make(MsgType.DRAFT, "s1", {"tokens": tokens(1, 2, 3), "hidden": np.zeros((3, 8), np.float16)},
               round=0, t_draft_s=0.1)
    frames = encode(msg)
    return frames[0][0], msgpack.unpackb(frames[0][1:]), frames[1:]


def pack(type_byte: int, header: Any, bufs: list[bytes]) -> Frames:
    return [bytes([type_byte]) + msgpack.packb(header, use_bin_type=True), *bufs]


def corrupt(edit: Callable[[Header, list[bytes]], Any]) -> Callable[[], Frames]:
    """Build frames from a valid DRAFT after edit(header, bufs) mutates it in place."""
    def build() -> Frames:
        type_byte, header, bufs = draft_parts()
        edit(header, bufs)
        return pack(type_byte, header, bufs)
    return build


def set_tokens(header: Header, bufs: list[bytes], ids: list[int]) -> None:
    header["tensors"][0]["shape"] = [len(ids)]
    header["tensors"][1]["shape"] = [len(ids), 8]
    bufs[0], bufs[1] = np.array(ids, np.int32).tobytes(), np.zeros((len(ids), 8), np.float16).tobytes()


def set_hidden_rows(header: Header, bufs: list[bytes], rows: int) -> None:
    header["tensors"][1]["shape"] = [rows, 8]
    bufs[1] = np.zeros((rows, 8), np.float16).tobytes()


def nested(depth: int) -> Any:
    return [nested(depth - 1)] if depth else {}


def drop_tokens(header: Header, bufs: list[bytes]) -> None:
    del header["tensors"][0], bufs[0]


def verdict_frames(**fields: Any) -> Frames:
    base = dict(round=0, n_accepted=0, next_token=1, mismatches=0, queried=0, t_verify_s=0.0, t_head_s=0.0,
                done=True)
    header = {"v": WIRE_VERSION, "session": "s1", "tensors": [], **base, **fields}
    return pack(MsgType.VERDICT, header, [])


def positions_frames(*positions: int) -> Frames:
    header = {"v": WIRE_VERSION, "session": "s1", "round": 0,
              "tensors": [{"name": "positions", "dtype": "int32", "shape": [len(positions)]}]}
    return pack(MsgType.HIDDEN_REQ, header, [np.array(positions, np.int32).tobytes()])


def open_frames(**fields: Any) -> Frames:
    header = {"v": WIRE_VERSION, "session": "s1", "protocol": "fh", "draft_len": 4, "max_new_tokens": 8,
              "tensors": [{"name": "prompt", "dtype": "int32", "shape": [2]}], **fields}
    return pack(MsgType.OPEN, header, [np.array([1, 2], np.int32).tobytes()])


def open_ok_frames(**fields: Any) -> Frames:
    header = {"v": WIRE_VERSION, "session": "s1", "tensors": [], "target_hidden": 8, "vocab_size": VOCAB, **fields}
    return pack(MsgType.OPEN_OK, header, [])


def reference_frames(**fields: Any) -> Frames:
    header = {"v": WIRE_VERSION, "session": "s1", "tensors": [{"name": "prompt", "dtype": "int32", "shape": [1]}],
              **fields}
    return pack(MsgType.REFERENCE, header, [np.array([1], np.int32).tobytes()])


def reference_ok_frames(ids: list[int], cached: Any = False) -> Frames:
    header = {"v": WIRE_VERSION, "session": "s1", "cached": cached,
              "tensors": [{"name": "tokens", "dtype": "int32", "shape": [len(ids)]}]}
    return pack(MsgType.REFERENCE_OK, header, [np.array(ids, np.int32).tobytes()])


CASES: list[tuple[str, Callable[[], Frames], str, str]] = [
    # (id, frames builder, expected .code, text the message must contain)
    ("no_frames", lambda: [], "empty", "no frames"),
    ("empty_frame0", lambda: [b""], "empty", "frame 0"),
    ("unknown_type", lambda: [b"\xee" + msgpack.packb({})], "bad_type", "238"),
    ("random_header", lambda: [b"\x05\xc1\x93garbage"], "bad_header", "msgpack"),
    ("header_not_map", lambda: pack(MsgType.DRAFT, [1, 2], []), "bad_header", "map"),
    ("int_map_key", lambda: pack(MsgType.CLOSE, {1: 2}, []), "bad_header", "map key"),
    ("bytes_map_key", lambda: pack(MsgType.CLOSE, {b"v": 1}, []), "bad_header", "map key"),
    ("wrong_version", corrupt(lambda h, b: h.update(v=WIRE_VERSION + 1)), "bad_version",
     f"version {WIRE_VERSION + 1}, the receiver speaks version {WIRE_VERSION}"),
    ("missing_version", corrupt(lambda h, b: h.pop("v")), "bad_version", "version None"),
    ("bad_session_chars", corrupt(lambda h, b: h.update(session="a b/c")), "bad_session", "session"),
    ("session_too_long", corrupt(lambda h, b: h.update(session="x" * 65)), "bad_session", "session"),
    ("bool_as_int", corrupt(lambda h, b: h.update(round=True)), "bad_field", "'round'"),
    ("str_as_float", corrupt(lambda h, b: h.update(t_draft_s="0.1")), "bad_field", "'t_draft_s'"),
    ("missing_field", corrupt(lambda h, b: h.pop("t_draft_s")), "missing_field", "'t_draft_s'"),
    ("unknown_field", corrupt(lambda h, b: h.update(color=1)), "bad_field", "'color'"),
    ("csi_value_str", corrupt(lambda h, b: h.update(csi={"snr": "x"})), "bad_field", "'csi'"),
    ("negative_round", corrupt(lambda h, b: h.update(round=-1)), "bad_field", "'round'"),
    ("tensors_not_list", corrupt(lambda h, b: h.update(tensors={})), "bad_header", "'tensors'"),
    ("descriptor_count", corrupt(lambda h, b: b.pop()), "frame_count", "2 tensor(s) but 1"),
    ("descriptor_keys", corrupt(lambda h, b: h["tensors"][0].pop("dtype")), "bad_header", "tensor #0"),
    ("unknown_tensor", corrupt(lambda h, b: h["tensors"][1].update(name="bogus")), "bad_tensor", "'bogus'"),
    ("duplicate_tensor", corrupt(lambda h, b: h["tensors"][1].update(name="tokens", shape=[6],
                                                                     dtype="int64")), "bad_tensor", "twice"),
    ("missing_tensor", corrupt(drop_tokens), "missing_tensor", "'tokens'"),
    ("tokens_float32", corrupt(lambda h, b: h["tensors"][0].update(dtype="float32")), "bad_dtype", "'tokens'"),
    ("dtype_not_str", corrupt(lambda h, b: h["tensors"][0].update(dtype=5)), "bad_dtype", "'tokens'"),
    ("negative_shape", corrupt(lambda h, b: h["tensors"][0].update(shape=[-3])), "bad_shape", "'tokens'"),
    ("float_shape", corrupt(lambda h, b: h["tensors"][0].update(shape=[3.0])), "bad_shape", "'tokens'"),
    ("bool_shape", corrupt(lambda h, b: h["tensors"][0].update(shape=[True])), "bad_shape", "'tokens'"),
    ("wrong_rank", corrupt(lambda h, b: h["tensors"][0].update(shape=[3, 1])), "bad_shape", "rank"),
    ("zero_tokens_with_data", corrupt(lambda h, b: h["tensors"][0].update(shape=[0])), "overlong", "'tokens'"),
    ("giant_shape", corrupt(lambda h, b: h["tensors"][0].update(shape=[10**9])), "too_large", "max_draft_len"),
    ("giant_hidden", corrupt(lambda h, b: h["tensors"][1].update(shape=[3, 2**62])), "too_large", "hidden_dim"),
    ("deep_nesting", corrupt(lambda h, b: h.update(csi=nested(20))), "bad_header", "nested deeper"),
    ("truncated_frame", corrupt(lambda h, b: b.__setitem__(0, b[0][:-1])), "truncated", "'tokens'"),
    ("extra_bytes", corrupt(lambda h, b: b.__setitem__(1, b[1] + b"\0")), "overlong", "'hidden'"),
    ("token_too_big", corrupt(lambda h, b: set_tokens(h, b, [1, 2, VOCAB])), "token_range", "'tokens'"),
    ("token_negative", corrupt(lambda h, b: set_tokens(h, b, [-1, 2])), "token_range", "-1"),
    ("hidden_rows", corrupt(lambda h, b: set_hidden_rows(h, b, 2)), "shape_mismatch", "'hidden'"),
    ("next_token_range", lambda: verdict_frames(next_token=VOCAB), "token_range", "'next_token'"),
    ("n_accepted_over_k", lambda: verdict_frames(n_accepted=9), "bad_field", "'n_accepted'"),
    ("done_not_bool", lambda: verdict_frames(done=1), "bad_field", "'done'"),
    ("position_range", lambda: positions_frames(0, 8), "position_range", "'positions'"),
    ("too_many_positions", lambda: positions_frames(0, 1, 2, 3, 4), "too_large", "max_positions"),
    ("vocab_hash_not_hex", lambda: open_frames(vocab_hash="z" * 64), "bad_field", "'vocab_hash'"),
    ("vocab_hash_short", lambda: open_frames(vocab_hash="ab"), "bad_field", "'vocab_hash'"),
    ("vocab_hash_upper", lambda: open_frames(vocab_hash=HASH.upper()), "bad_field", "'vocab_hash'"),
    ("vocab_size_zero", lambda: open_frames(vocab_size=0), "bad_field", "'vocab_size'"),
    ("vocab_size_bool", lambda: open_frames(vocab_size=True), "bad_field", "'vocab_size'"),
    ("edge_setting_list", lambda: open_ok_frames(edge={"head": ["x"]}), "bad_field", "'edge'"),
    ("edge_not_map", lambda: open_ok_frames(edge="none"), "bad_field", "'edge'"),
    ("reference_budget_zero", lambda: reference_frames(max_new_tokens=0), "bad_field", "'max_new_tokens'"),
    ("reference_vocab_hash", lambda: reference_frames(max_new_tokens=4, vocab_hash="x"), "bad_field", "'vocab_hash'"),
    ("reference_ok_token", lambda: reference_ok_frames([1, VOCAB]), "token_range", "'tokens'"),
    ("reference_ok_cached", lambda: reference_ok_frames([1], cached=1), "bad_field", "'cached'"),
    ("not_a_list", lambda: b"\x05", "bad_frame", "list"),
    ("frame_not_bytes", lambda: ["\x05"], "bad_frame", "frame 0"),
]


@pytest.mark.parametrize("build, code, text", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_corrupted_messages_raise_named_wire_error(build: Callable[[], Frames], code: str, text: str) -> None:
    with pytest.raises(WireError) as err:
        decode(build(), LIMITS)
    assert err.value.code == code, str(err.value)
    assert text in str(err.value)
    assert isinstance(err.value, ValueError)


def test_size_limits_checked_before_parsing() -> None:
    frames = encode(valid_messages()["draft_probs"])
    with pytest.raises(WireError, match="max_header_bytes") as err:
        decode(frames, Limits(vocab_size=VOCAB, max_header_bytes=8))
    assert err.value.code == "too_large"
    with pytest.raises(WireError, match="frame 2 .* max_frame_bytes") as err:
        decode(frames, Limits(vocab_size=VOCAB, max_frame_bytes=1024))
    assert err.value.code == "too_large"


def ping_frames(**fields: Any) -> Frames:
    header = {"v": WIRE_VERSION, "session": "s1", "tensors": [], "seq": 0, "t_send": 0.0, **fields}
    return pack(MsgType.PING, header, [])


def test_ping_reply_bytes_capped_at_max_probe_bytes() -> None:
    """A PING of a few dozen bytes may not ask for a PONG of max_frame_bytes (an amplification)."""
    frames = ping_frames(reply_bytes=64 * 2**20)
    assert frame_bytes(frames) < 100
    with pytest.raises(WireError, match="'reply_bytes' = 67108864 out of range") as err:
        decode(frames, LIMITS)
    assert err.value.code == "too_large"
    assert decode(ping_frames(reply_bytes=LIMITS.max_probe_bytes), LIMITS).header["reply_bytes"] == 2**20
    assert decode(ping_frames(reply_bytes=8192), Limits(vocab_size=VOCAB)).header["reply_bytes"] == 8192  # UE default
    with pytest.raises(WireError, match="reply_bytes"):
        decode(ping_frames(reply_bytes=4097), Limits(vocab_size=VOCAB, max_probe_bytes=4096))


FLOAT_FIELDS = [(name, key) for name, msg in valid_messages().items() for key, value in msg.header.items()
                if type(value) is float]


def test_every_float_header_field_is_checked_for_finiteness() -> None:
    floats = {(t.name, k) for t, schema in SCHEMAS.items() for k, f in schema.fields.items() if float in f.types}
    assert floats == {(valid_messages()[name].type.name, key) for name, key in FLOAT_FIELDS}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("name, key", FLOAT_FIELDS, ids=[f"{n}.{k}" for n, k in FLOAT_FIELDS])
def test_float_header_fields_must_be_finite(name: str, key: str, bad: float) -> None:
    msg = valid_messages()[name]
    frames = encode(msg)
    header = msgpack.unpackb(frames[0][1:])
    header[key] = bad
    with pytest.raises(WireError, match=f"'{key}' = {bad} is not a finite number") as err:
        decode(pack(frames[0][0], header, frames[1:]), LIMITS)
    assert err.value.code == "bad_field"
    msg.header[key] = bad
    with pytest.raises(WireError, match="not a finite number"):  # the sender learns it first
        encode(msg)


def draft_with_csi(**csi: float) -> Frames:
    header = {"v": WIRE_VERSION, "session": "s1", "round": 0, "t_draft_s": 0.0, "csi": csi,
              "tensors": [{"name": "tokens", "dtype": "int32", "shape": [1]}]}
    return pack(MsgType.DRAFT, header, [tokens(1).tobytes()])


def test_float_dict_values_reject_nan_but_csi_may_say_unlimited_rate() -> None:
    unlimited = decode(draft_with_csi(rate_up_mbps=math.inf, rtt_ms=3.0), LIMITS)
    assert unlimited.header["csi"]["rate_up_mbps"] == math.inf  # the CSI of a UE without rate probes
    for bad in (math.nan, -math.inf):
        with pytest.raises(WireError, match=r"'csi'\['rtt_ms'\] = .* is not a finite number") as err:
            decode(draft_with_csi(rtt_ms=bad), LIMITS)
        assert err.value.code == "bad_field"


def test_probs_wider_than_vocab_rejected() -> None:
    frames = encode(valid_messages()["draft_probs"])
    with pytest.raises(WireError, match="'probs'.*vocab_size=50") as err:
        decode(frames, Limits(vocab_size=50))
    assert err.value.code == "too_large"

"""Message schemas as data (types, limits, header fields, tensors); each spec checks one value against itself."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocols.errors import WireError
from protocols.limits import Limits  # noqa: F401 (decode's bounds, read from here too)
from protocols.msgchecks import check_chunk, check_draft, check_generate, check_verdict
from protocols.registry import ALL_PROTOCOLS
from protocols.typed import OpenOk, Verdict  # noqa: F401 (the decoded messages' typed fields, read from here too)

WIRE_VERSION = 10  # bump on any incompatible change to SCHEMAS or to the framing (2: OPEN's vocabulary facts,
#                  REFERENCE; 3: OPEN's first round, for a session resumed with its committed prefix; 4: the edge's
#                  session token, which DRAFT, HIDDEN and CLOSE carry; 5: target features, asked for in OPEN,
#                  granted in OPEN_OK, carried by the VERDICT; 6: GENERATE and CHUNK, server-only's stream; 7:
#                  GENERATE's tokens, a speculative session's round handed to the edge; 8: CHUNK's drafted and
#                  accepted, the edge's own drafts for server-only; 9: VERDICT's edge_drafted and edge_tokens,
#                  the edge's extension of a greedy draft; 10: GENERATE's lookup stop, CHUNK's stopped)
UNBOUNDED = 2**63  # upper bound for ints that have no protocol limit


class MsgType(enum.IntEnum):
    """The one-byte message type that starts frame 0."""

    OPEN = 1  # UE -> edge: start a session, carries the prompt
    OPEN_OK = 2  # edge -> UE: session accepted, target model facts
    PING = 3  # either way: RTT / rate probe
    PONG = 4  # reply to PING, echoes seq
    DRAFT = 5  # UE -> edge: a block of K draft tokens (+ hidden states or probs, per protocol)
    HIDDEN_REQ = 6  # edge -> UE (SH): ask for drafter hidden states at some positions
    HIDDEN = 7  # UE -> edge (SH): the requested hidden states
    VERDICT = 8  # edge -> UE: result of verifying one round
    CLOSE = 9  # UE -> edge: end the session
    CLOSED = 10  # edge -> UE: session ended
    ERROR = 11  # either way: the peer sent something wrong
    REFERENCE = 12  # UE -> edge: ask for the target-only greedy output of a prompt (no session state)
    REFERENCE_OK = 13  # edge -> UE: that output's tokens
    GENERATE = 14  # UE -> edge (server-only): stream the target's greedy output from a chunk on, chunked as asked
    CHUNK = 15  # edge -> UE (server-only): one chunk of that output


# Wire dtypes, always little-endian and C-contiguous. numpy has no bfloat16:
# send bf16 activations as float16 or float32 (the sender chooses and pays the bytes).
DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name).newbyteorder("<") for name in ("uint8", "int32", "int64", "float16", "float32")
}
INT_IDS = ("int32", "int64")
FLOATS = ("float16", "float32")


@dataclass(frozen=True)
class Range:
    """An allowed integer interval [lo, hi), resolved against the Limits in force."""

    code: str  # WireError code raised when a value falls outside
    bounds: Callable[[Limits], tuple[int, int]]  # limits -> (lo, hi), hi exclusive


TOKEN = Range("token_range", lambda lim: (0, lim.vocab_size))
POSITION = Range("position_range", lambda lim: (0, lim.max_draft_len))
DRAFT_LEN = Range("bad_field", lambda lim: (1, lim.max_draft_len + 1))
COUNT = Range("bad_field", lambda lim: (0, lim.max_draft_len + 1))  # per-round counts: 0..K
HIDDEN_DIM = Range("bad_field", lambda lim: (1, lim.max_hidden_dim + 1))
NONNEG = Range("bad_field", lambda lim: (0, UNBOUNDED))
POSITIVE = Range("bad_field", lambda lim: (1, UNBOUNDED))
LAYER = Range("bad_field", lambda lim: (-1024, 1025))  # hidden-state layer index (negative: from the end)
REPLY_BYTES = Range("too_large", lambda lim: (0, lim.max_probe_bytes + 1))
PROTOCOL_NAME = "|".join(map(re.escape, ALL_PROTOCOLS))  # a protocol field names one in protocols/registry.py
FEATURE_ROWS = Range("bad_field", lambda lim: (0, lim.max_feature_rows + 1))  # OPEN/OPEN_OK "features": 0 = none
MAX_LOOKUP_N = 16  # longest n-gram a GENERATE's lookup stop may match: bounds the edge's work per token it generates
LOOKUP_N = Range("bad_field", lambda lim: (1, MAX_LOOKUP_N + 1))
PARENT = Range("bad_tree", lambda lim: (-1, lim.max_draft_len))  # a tree node's parent index; -1: the root


@dataclass(frozen=True)
class Field:
    """One header field. Types are matched exactly after msgpack decode, so bool is never an int."""

    types: tuple[type, ...]  # accepted Python types; a float field also takes int (decoded as float)
    required: bool = True
    rng: Range | None = None  # for int fields: allowed interval
    values: tuple[type, ...] | None = None  # for dict fields: accepted value types (keys are always str)
    pattern: str | None = None  # for str fields: a regex the whole value must match
    inf_ok: bool = False  # floats (and float dict values) may be +inf (an unlimited rate); NaN and -inf never are

    def check(self, where: str, value: Any, limits: Limits | None) -> Any:
        """Return the value (int -> float for float fields) or raise; ranges are skipped when limits is None."""
        if type(value) not in self.types:
            got = f"{type(value).__name__} {brief(value)}"
            raise WireError("bad_field", f"{where} must be {type_names(self.types)}, got {got}")
        self._check_finite(where, value)
        if self.values is not None:
            for key, item in value.items():
                if type(item) not in self.values:
                    want = type_names(self.values)
                    raise WireError("bad_field", f"{where}[{key!r}] must be {want}, got {brief(item)}")
                self._check_finite(f"{where}[{key!r}]", item)
        if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
            raise WireError("bad_field", f"{where} = {brief(value)} does not match {self.pattern}")
        if self.rng is not None and limits is not None:
            lo, hi = self.rng.bounds(limits)
            if not lo <= value < hi:
                raise WireError(self.rng.code, f"{where} = {value} out of range [{lo}, {hi})")
        return float(value) if float in self.types and type(value) is int else value

    def _check_finite(self, where: str, value: Any) -> None:
        """A float must be finite (or +inf where inf_ok): a NaN deadline or time would poison every sum it joins."""
        if type(value) is float and not math.isfinite(value) and not (self.inf_ok and value == math.inf):
            raise WireError("bad_field", f"{where} = {value} is not a finite number")


@dataclass(frozen=True)
class Tensor:
    """One allowed tensor: dtypes, and per dim (min, name of the Limits field giving the inclusive max)."""

    dtypes: tuple[str, ...]  # allowed keys of DTYPES
    dims: tuple[tuple[int, str], ...]  # rank == len(dims); dim i in [dims[i][0], getattr(limits, dims[i][1])]
    required: bool = True
    rows_like: str | None = None  # dim 0 must equal dim 0 of this other tensor
    rng: Range | None = None  # allowed values, for integer tensors

    def check_dtype(self, where: str, dtype: Any) -> None:
        if type(dtype) is not str or dtype not in self.dtypes:
            allowed = list(self.dtypes)
            raise WireError("bad_dtype", f"{where}: dtype {brief(dtype)} not allowed, expected one of {allowed}")

    def check_shape(self, where: str, shape: tuple[int, ...], limits: Limits | None) -> None:
        """Rank and per-dim bounds of a declared shape; upper bounds are skipped when limits is None."""
        if len(shape) != len(self.dims):
            rank = f"has rank {len(shape)}, expected {len(self.dims)}"
            raise WireError("bad_shape", f"{where}: shape {list(shape)} {rank}")
        for axis, (size, (lo, limit_name)) in enumerate(zip(shape, self.dims)):
            hi = getattr(limits, limit_name) if limits is not None else None
            if hi is not None and size > hi:
                raise WireError("too_large", f"{where}: dim {axis} = {size} exceeds {limit_name}={hi}")
            if size < lo:
                raise WireError("bad_shape", f"{where}: dim {axis} = {size} below minimum {lo}")

    def check_values(self, where: str, arr: np.ndarray, limits: Limits) -> None:
        """Integer values within rng, naming the first offender."""
        if self.rng is None or arr.size == 0:
            return
        lo, hi = self.rng.bounds(limits)
        flat = arr.reshape(-1).astype(np.int64)
        bad = np.flatnonzero((flat < lo) | (flat >= hi))
        if bad.size:
            i = int(bad[0])
            raise WireError(self.rng.code, f"{where}: value {int(flat[i])} at index {i} out of range [{lo}, {hi})")


@dataclass(frozen=True)
class Schema:
    """Header fields and tensors of one message type (besides "v", "session" and "tensors")."""

    fields: dict[str, Field] = field(default_factory=dict)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    check: Callable[[dict[str, Any], dict[str, np.ndarray], Limits], None] | None = None  # checks across fields


INT = (int,)
FLOAT = (float, int)
SHA256_HEX = r"[0-9a-f]{64}"  # a sha256 digest in lowercase hex
TOKEN_HEX = r"[0-9a-f]{32}"  # a session token: 128 random bits from the edge, lowercase hex
SETTING = (str, int, float, bool, type(None))  # value types of the edge's reported settings

SCHEMAS: dict[MsgType, Schema] = {
    MsgType.OPEN: Schema(
        fields={
            "protocol": Field((str,), pattern=PROTOCOL_NAME),
            "draft_len": Field(INT, rng=DRAFT_LEN),
            "max_new_tokens": Field(INT, rng=POSITIVE),
            "drafter_hidden": Field(INT, required=False, rng=HIDDEN_DIM),
            "head": Field((str, type(None)), required=False),
            "temperature": Field(FLOAT, required=False),  # sampling temperature (reject)
            "seed": Field(INT, required=False, rng=NONNEG),  # edge sampling seed (reject)
            "meta": Field((dict,), required=False),
            "vocab_size": Field(INT, required=False, rng=POSITIVE),  # drafter's tokenizer size (no tokenizer: model's)
            "vocab_hash": Field((str,), required=False, pattern=SHA256_HEX),  # sha256 of its (token, id) pairs
            "round": Field(INT, required=False, rng=NONNEG),  # the first DRAFT's round (resumed: past 0; default 0)
            "token": Field((str,), required=False, pattern=TOKEN_HEX),  # the session this OPEN resumes (replaces)
            "keepalive_ms": Field(INT, required=False, rng=NONNEG),  # the UE keeps the session alive this often (0: no)
            "features": Field(INT, required=False, rng=FEATURE_ROWS),  # target-feature rows per VERDICT (0: none)
        },
        tensors={"prompt": Tensor(INT_IDS, ((1, "max_prompt_len"),), rng=TOKEN)},
    ),
    MsgType.OPEN_OK: Schema(
        fields={"target_hidden": Field(INT, rng=HIDDEN_DIM), "vocab_size": Field(INT, rng=POSITIVE),
                "hidden_layer": Field(INT, required=False, rng=LAYER),  # layer the edge's head reads (default -1)
                "vocab_hash": Field((str,), required=False, pattern=SHA256_HEX),  # the target tokenizer's hash
                "edge": Field((dict,), required=False, values=SETTING, inf_ok=True),  # the edge's settings
                "token": Field((str,), required=False, pattern=TOKEN_HEX),  # the session token (this edge: always)
                "features": Field(INT, required=False, rng=FEATURE_ROWS)},  # target-feature rows granted (if asked)
    ),
    MsgType.PING: Schema(
        fields={
            "seq": Field(INT, rng=NONNEG),
            "t_send": Field(FLOAT),
            "reply_bytes": Field(INT, required=False, rng=REPLY_BYTES),  # PONG payload size (downlink probe)
            "token": Field((str,), required=False, pattern=TOKEN_HEX),  # a keepalive for this session (keepalive.py)
        },
        tensors={"payload": Tensor(("uint8",), ((0, "max_frame_bytes"),), required=False)},
    ),
    MsgType.PONG: Schema(
        fields={"seq": Field(INT, rng=NONNEG), "t_send": Field(FLOAT)},
        tensors={"payload": Tensor(("uint8",), ((0, "max_frame_bytes"),), required=False)},
    ),
    MsgType.DRAFT: Schema(
        fields={
            "round": Field(INT, rng=NONNEG),
            "t_draft_s": Field(FLOAT),
            "csi": Field((dict,), required=False, values=FLOAT, inf_ok=True),  # CSI.to_dict(); inf: unlimited rate
            "protocol": Field((str,), required=False, pattern=PROTOCOL_NAME),
            "token": Field((str,), required=False, pattern=TOKEN_HEX),  # OPEN_OK's token (the edge requires it)
        },
        tensors={
            "tokens": Tensor(INT_IDS, ((0, "max_draft_len"),), rng=TOKEN),  # [K]; K = 0: no draft (prompt lookup
            #   without a match), the round is a plain decode step of the target
            "hidden": Tensor(  # [K, d] drafter hidden states (FH)
                FLOATS, ((1, "max_draft_len"), (1, "max_hidden_dim")), required=False, rows_like="tokens"
            ),
            "probs": Tensor(  # [K, V], V <= vocab_size (drafter vocab may be smaller; missing ids = prob 0)
                FLOATS, ((1, "max_draft_len"), (1, "vocab_size")), required=False, rows_like="tokens"
            ),
            "parents": Tensor(  # [K] tree: parent index of each token (-1: the last committed token), tree protocol
                INT_IDS, ((1, "max_draft_len"),), required=False, rows_like="tokens", rng=PARENT
            ),
            "features": Tensor(  # [K, 3] optional drafter confidence per token: max prob, entropy (nats), top1-top2
                ("float16",), ((1, "max_draft_len"), (3, "draft_features")), required=False, rows_like="tokens"
            ),
        },
        check=check_draft,
    ),
    MsgType.HIDDEN_REQ: Schema(
        fields={"round": Field(INT, rng=NONNEG)},
        tensors={"positions": Tensor(("int32",), ((1, "max_positions"),), rng=POSITION)},  # [m]
    ),
    MsgType.HIDDEN: Schema(
        fields={"round": Field(INT, rng=NONNEG), "token": Field((str,), required=False, pattern=TOKEN_HEX)},
        tensors={"hidden": Tensor(FLOATS, ((1, "max_positions"), (1, "max_hidden_dim")))},  # [m, d]
    ),
    MsgType.VERDICT: Schema(
        fields={
            "round": Field(INT, rng=NONNEG),
            "n_accepted": Field(INT, rng=COUNT),
            "next_token": Field(INT, rng=TOKEN),
            "mismatches": Field(INT, rng=COUNT),
            "queried": Field(INT, rng=COUNT),
            "t_verify_s": Field(FLOAT),
            "t_head_s": Field(FLOAT),
            "t_edge_s": Field(FLOAT, required=False),  # all edge handling this round (decode..reply), s
            "batch": Field(INT, required=False, rng=POSITIVE),  # requests verified in the same target pass
            "stop_depth": Field(INT, required=False, rng=DRAFT_LEN),  # the edge's suggested K for the next block
            "edge_drafted": Field(INT, required=False, rng=COUNT),  # the edge's own tokens after the draft (with
            #   edge_tokens): verified in the same pass
            "done": Field((bool,)),
        },
        tensors={
            "path": Tensor(("int32",), ((0, "max_draft_len"),), required=False, rng=POSITION),  # tree: nodes
            "features": Tensor(  # [n, d_t] the target's final-layer hidden states at the last n committed positions
                ("float16",), ((1, "max_feature_rows"), (1, "max_hidden_dim")), required=False),
            "edge_tokens": Tensor(  # [e] of the edge's tokens, those committed after the wholly accepted draft and
                INT_IDS, ((0, "max_draft_len"),), required=False, rng=TOKEN),  # before next_token (e <= edge_drafted)
        },
        check=check_verdict,
    ),
    MsgType.CLOSE: Schema(fields={"token": Field((str,), required=False, pattern=TOKEN_HEX)}),
    MsgType.CLOSED: Schema(),
    MsgType.ERROR: Schema(fields={"code": Field((str,)), "text": Field((str,))}),  # frozen: any version decodes it
    MsgType.REFERENCE: Schema(
        fields={"max_new_tokens": Field(INT, rng=POSITIVE),  # the session's generation budget, tokens
                "vocab_size": Field(INT, required=False, rng=POSITIVE),  # as in OPEN: checked before any work
                "vocab_hash": Field((str,), required=False, pattern=SHA256_HEX)},
        tensors={"prompt": Tensor(INT_IDS, ((1, "max_prompt_len"),), rng=TOKEN)},
    ),
    MsgType.REFERENCE_OK: Schema(
        fields={"cached": Field((bool,))},  # the edge answered from its cache
        tensors={"tokens": Tensor(INT_IDS, ((0, "max_prompt_len"),), rng=TOKEN)},  # [n] new tokens, EOS included
    ),
    MsgType.GENERATE: Schema(
        fields={"round": Field(INT, rng=NONNEG),  # the first chunk wanted: the chunks the UE holds (resent from it)
                "every_tokens": Field(INT, required=False, rng=POSITIVE),  # a chunk ends at this many tokens
                "every_ms": Field(FLOAT, required=False),  # or this long after the previous one, ms (none: 1 token)
                "tokens": Field(INT, required=False, rng=POSITIVE),  # a speculative session's round handed to the
                #   edge: it generates this many tokens alone (fewer at the budget or EOS), in CHUNKs of every_tokens
                #   (none: one CHUNK), each a round of its own
                "prompt_lookup_min": Field(INT, required=False, rng=LOOKUP_N),  # with tokens, from a UE that drafts by
                "prompt_lookup_max": Field(INT, required=False, rng=LOOKUP_N),  # prompt lookup (these n-grams): the
                "stop_streak": Field(INT, required=False, rng=POSITIVE),  # run ends after this many tokens in a row
                #   the lookup named first (its output copies again: the UE speculates); all three or none
                "token": Field((str,), required=False, pattern=TOKEN_HEX)},  # OPEN_OK's token
        check=check_generate,
    ),
    MsgType.CHUNK: Schema(
        fields={"round": Field(INT, rng=NONNEG),  # the chunk's index in the session's stream
                "t_decode_s": Field(FLOAT),  # the target's passes that decoded its tokens, s
                "t_edge_s": Field(FLOAT),  # edge time since the previous chunk went out (or GENERATE came in), s
                "batch": Field(INT, required=False, rng=POSITIVE),  # most sessions decoded in one of those passes
                "drafted": Field(INT, required=False, rng=NONNEG),  # tokens the edge drafted for those passes
                "accepted": Field(INT, required=False, rng=NONNEG),  # of them, tokens committed (<= drafted)
                "done": Field((bool,)),  # the stream ended (budget or EOS)
                "stopped": Field((bool,), required=False)},  # a handed-over run ended here, before its tokens: the
        #   UE's prompt lookup named the last stop_streak tokens (none: false)
        tensors={"tokens": Tensor(INT_IDS, ((1, "max_prompt_len"),), rng=TOKEN)},  # [n] the chunk's tokens
        check=check_chunk,
    ),
}


def type_names(types: tuple[type, ...]) -> str:
    return " or ".join("None" if t is type(None) else t.__name__ for t in types)


def brief(value: Any, width: int = 60) -> str:
    """repr cut to width chars, so error messages stay short whatever the peer sent."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."

"""Real vocabularies on the wire: a reject DRAFT of K full distributions at 128k / 151k tokens passes the wire limits
and the ZeroMQ frame bound at the largest K an edge accepts by default."""
from __future__ import annotations

import numpy as np
import pytest

from protocols.accounting import message_bytes
from protocols.wire import Limits, MsgType, decode, encode, make
from testbed.live.common.sockbounds import max_frame


@pytest.mark.parametrize("vocab", [128256, 151936], ids=["llama3-128k", "qwen2.5-151k"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_reject_draft_at_a_real_vocabulary_passes_the_default_limits(vocab: int, dtype) -> None:
    limits = Limits(vocab_size=vocab)
    k = limits.max_draft_len
    probs = np.zeros((k, vocab), dtype)
    probs[:, -1] = 1.0
    msg = make(MsgType.DRAFT, "ue0-0", {"tokens": np.full(k, vocab - 1, np.int32), "probs": probs}, round=0,
               t_draft_s=0.0, protocol="reject")
    frames = encode(msg)
    assert max(len(f) for f in frames) <= max_frame(limits)  # ZeroMQ's MAXMSGSIZE would not drop it
    got = decode(frames, limits)
    assert got.tensors["probs"].shape == (k, vocab) and got.tensors["probs"][0, -1] == 1.0
    per_token = np.dtype(dtype).itemsize * vocab
    assert k * per_token < message_bytes(msg) < k * per_token + 1024  # about 2 V bytes per drafted token in fp16

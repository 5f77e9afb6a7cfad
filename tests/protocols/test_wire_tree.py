"""DRAFT trees on the wire: decode accepts well-formed trees and refuses cycles, out-of-range parents, oversized
and too-deep trees; a VERDICT's path matches n_accepted."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.wire import Limits, MsgType, WireError, decode, encode, make

LIMITS = Limits(vocab_size=50, max_draft_len=8, max_tree_depth=5)
TREE = settings(max_examples=200, deadline=None)


def _draft(tokens, parents) -> list[bytes]:
    t = {"tokens": np.asarray(tokens, np.int32), "parents": np.asarray(parents, np.int32)}
    return encode(make(MsgType.DRAFT, "s1", t, round=0, t_draft_s=0.0, protocol="tree"))


def _depth(parents: list[int]) -> int:
    d: list[int] = []
    for p in parents:
        d.append(1 if p < 0 else d[p] + 1)
    return max(d)


@st.composite
def trees(draw, max_n: int = 8) -> list[int]:
    """Valid parent lists: each node's parent is -1 or an earlier node."""
    n = draw(st.integers(1, max_n))
    return [draw(st.integers(-1, i - 1)) for i in range(n)]


@TREE
@given(trees())
def test_valid_trees_round_trip_or_are_too_deep(parents):
    frames = _draft([1] * len(parents), parents)
    if _depth(parents) > LIMITS.max_tree_depth:
        with pytest.raises(WireError) as e:
            decode(frames, LIMITS)
        assert e.value.code == "too_large"
        return
    assert decode(frames, LIMITS).tensors["parents"].tolist() == parents


@TREE
@given(trees(), st.data())
def test_a_parent_at_or_after_its_node_is_refused(parents, data):
    i = data.draw(st.integers(0, len(parents) - 1))
    parents[i] = data.draw(st.integers(i, LIMITS.max_draft_len - 1))  # self-loop or forward edge: a cycle possible
    with pytest.raises(WireError) as e:
        decode(_draft([1] * len(parents), parents), LIMITS)
    assert e.value.code == "bad_tree"


@TREE
@given(trees(), st.data())
def test_out_of_range_parents_are_refused(parents, data):
    i = data.draw(st.integers(0, len(parents) - 1))
    parents[i] = data.draw(st.integers(-(2**31), -2) | st.integers(LIMITS.max_draft_len, 2**31 - 1))
    with pytest.raises(WireError) as e:
        decode(_draft([1] * len(parents), parents), LIMITS)
    assert e.value.code == "bad_tree"


@TREE
@given(st.integers(LIMITS.max_draft_len + 1, 40))
def test_oversized_trees_are_refused(n):
    with pytest.raises(WireError) as e:
        decode(_draft([1] * n, [-1] * n), LIMITS)
    assert e.value.code == "too_large"


def test_parents_and_tokens_must_agree_in_length():
    frames = _draft([1, 2, 3], [-1, 0, 1])
    bad = encode(make(MsgType.DRAFT, "s1", {"tokens": np.asarray([1, 2, 3], np.int32)}, round=0, t_draft_s=0.0))
    assert "parents" not in decode(bad, LIMITS).tensors  # a chain DRAFT stays valid
    with pytest.raises(WireError):
        encode(make(MsgType.DRAFT, "s1",
                    {"tokens": np.asarray([1, 2], np.int32), "parents": np.asarray([-1], np.int32)},
                    round=0, t_draft_s=0.0))
    assert decode(frames, LIMITS).tensors["parents"].tolist() == [-1, 0, 1]


def _verdict(path, n_accepted) -> list[bytes]:
    return encode(make(MsgType.VERDICT, "s1", {"path": np.asarray(path, np.int32)}, round=0, n_accepted=n_accepted,
                       next_token=3, mismatches=0, queried=0, t_verify_s=0.0, t_head_s=0.0, done=False))


def test_verdict_path():
    assert decode(_verdict([1, 4], 2), LIMITS).tensors["path"].tolist() == [1, 4]
    assert decode(_verdict([], 0), LIMITS).tensors["path"].tolist() == []
    with pytest.raises(WireError) as e:
        decode(_verdict([1, 4], 1), LIMITS)
    assert e.value.code == "shape_mismatch"
    with pytest.raises(WireError) as e:
        decode(_verdict([9], 1), LIMITS)
    assert e.value.code == "position_range"

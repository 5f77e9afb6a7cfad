"""SpecEdge rules: proactive tokens are reused only on full acceptance with a matching bonus; depth by hand."""
import pytest

from wisv.decoding.specedge import pipeline_depth, proactive_reuse


@pytest.mark.parametrize("k,acc,nxt,pro,reused", [
    (4, 4, 7, [7, 8, 9], [8, 9]),  # all accepted, bonus == p_1: reuse p_2..
    (4, 4, 5, [7, 8, 9], []),  # bonus differs from p_1
    (4, 3, 7, [7, 8, 9], []),  # a rejection inside the block
    (4, 4, 7, [], []),  # nothing drafted proactively
    (4, 4, 7, [7], []),  # only p_1: it became the bonus, nothing left to reuse
])
def test_proactive_reuse(k, acc, nxt, pro, reused):
    assert proactive_reuse(k, acc, nxt, pro) == reused


def test_pipeline_depth_hand_values():
    # 50 ms verify, 10 ms RTT, 5 ms per drafted token -> 8 tokens
    assert pipeline_depth(0.050, 0.010, 0.005) == 8
    assert pipeline_depth(0.005, 0.010, 0.005) == 1  # verification shorter than the round trip: k_min
    assert pipeline_depth(10.0, 0.0, 0.001, k_max=32) == 32
    with pytest.raises(ValueError):
        pipeline_depth(0.05, 0.01, 0.0)

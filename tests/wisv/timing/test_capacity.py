"""The capacity and cost model (wisv/timing/capacity.py) on hand-checked numbers: memory-bound passes cost the same for
1 and K + 1 rows, compute-bound ones grow with rows; speculation's throughput ratio is AAL + 1 while memory-bound."""
import pytest

from wisv.timing.capacity import Prices, capacity, cost_row, params, pass_s, tokens_per_usd
from wisv.timing.compute import get_architecture
from wisv.timing.hardware import HardwareProfile, get_profile

LLAMA8B = get_architecture("llama-3.1-8b")
A100 = get_profile("a100")


def test_params_of_llama_8b_is_about_8_billion():
    assert 7.5e9 < params(LLAMA8B) < 8.5e9


def test_a_memory_bound_pass_costs_one_weight_read_whatever_its_rows():
    one, nine = pass_s(LLAMA8B, 1, 0, A100), pass_s(LLAMA8B, 9, 0, A100)
    assert one == pytest.approx(2 * params(LLAMA8B) / 2039e9) and nine == one


def test_a_compute_bound_pass_grows_with_its_rows():
    big, bigger = pass_s(LLAMA8B, 512, 0, A100), pass_s(LLAMA8B, 1024, 0, A100)
    assert bigger == pytest.approx(2 * big, rel=1e-9) and big > pass_s(LLAMA8B, 1, 0, A100)


def test_overhead_and_kv_add_to_the_pass():
    slow = HardwareProfile("x", 312.0, 0.05, "test", mem_bw_gbps=2039.0, pass_overhead_s=0.001)
    assert pass_s(LLAMA8B, 1, 0, slow) == pytest.approx(pass_s(LLAMA8B, 1, 0, A100) + 0.001)
    assert pass_s(LLAMA8B, 1, 4096, A100, batch=8) > pass_s(LLAMA8B, 1, 4096, A100, batch=1)


@pytest.mark.parametrize("aal", [0.0, 0.74, 3.0])
def test_memory_bound_speculation_gains_aal_plus_one(aal):
    c = capacity(LLAMA8B, A100, 4, 8, aal, 256)
    assert c.ratio == pytest.approx(aal + 1)


def test_a_compute_bound_batch_loses_part_of_the_gain():
    c = capacity(LLAMA8B, A100, 64, 8, 1.0, 256)
    assert c.verify_s > c.decode_s and c.ratio < 2.0


def test_tokens_per_usd_and_the_cost_row():
    assert tokens_per_usd(100.0, 4, Prices(3.6, 0.9), False) == pytest.approx(100_000.0)
    assert tokens_per_usd(100.0, 4, Prices(3.6, 0.9), True) == pytest.approx(50_000.0)
    row = cost_row(capacity(LLAMA8B, A100, 2, 8, 1.0, 0), Prices(1.0, 0.0))
    assert row["cost_efficiency_ratio"] == pytest.approx(row["throughput_ratio"])  # free devices: cost = throughput


@pytest.mark.parametrize("kw, msg", [({"rows": 0}, "rows >= 1"), ({"context": -1}, "context >= 0")])
def test_bad_pass_is_refused(kw, msg):
    args = {"rows": 1, "context": 0} | kw
    with pytest.raises(ValueError, match=msg):
        pass_s(LLAMA8B, args["rows"], args["context"], A100)


def test_bad_capacity_and_prices_are_refused():
    with pytest.raises(ValueError, match="0 <= aal <= k"):
        capacity(LLAMA8B, A100, 1, 4, 5.0, 0)
    with pytest.raises(ValueError, match="prices"):
        Prices(0.0, 0.1)
    with pytest.raises(ValueError, match="no mem_bw_gbps"):
        pass_s(LLAMA8B, 1, 0, HardwareProfile("x", 1.0, 0.5, "test"))

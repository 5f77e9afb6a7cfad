"""Tests for CSI traces: loading, saving, piecewise-constant lookup, looping and error messages."""
import pytest

from channel.csi import CSI
from channel.csitrace import CSITrace, load_trace, save_trace

HEADER = "t_s,rate_up_mbps,rate_down_mbps,rtt_ms,per\n"


def write(tmp_path, text, name="trace.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def trace_path(tmp_path):
    return write(tmp_path, HEADER + "0,10,20,30,0.01\n1.5,5,8,60,0.1\n4,100,100,5,0\n")


def test_load_rows(trace_path):
    tr = load_trace(trace_path)
    assert tr.t_s == (0.0, 1.5, 4.0)
    assert tr.csis[1] == CSI(5, 8, 60, 0.1, 0.1)


@pytest.mark.parametrize("t_s,row", [(-1.0, 0), (0.0, 0), (1.49, 0), (1.5, 1), (3.99, 1), (4.0, 2), (1e6, 2)])
def test_at_is_piecewise_constant(trace_path, t_s, row):
    tr = load_trace(trace_path)
    assert tr.at(t_s) == tr.csis[row]


def test_before_first_row_uses_first(tmp_path):
    tr = load_trace(write(tmp_path, HEADER + "2,10,20,30,0\n3,1,2,3,0\n"))
    assert tr.at(0.5) == tr.csis[0]


@pytest.mark.parametrize("t_s,row", [(4.0, 2), (6.49, 2), (6.5, 0), (8.0, 1), (6.5 * 3 + 5, 2)])
def test_loop_repeats_with_last_row_held_like_the_one_before(trace_path, t_s, row):
    tr = load_trace(trace_path, loop=True)
    assert tr.period_s == 6.5
    assert tr.at(t_s) == tr.csis[row]


def test_single_row_trace_is_constant():
    c = CSI.symmetric(10, 20)
    tr = CSITrace.constant(c)
    assert tr.at(-5) == tr.at(1e9) == c and len(tr) == 1


def test_split_per_columns(tmp_path):
    tr = load_trace(write(tmp_path, "per_down,t_s,rate_up_mbps,rate_down_mbps,rtt_ms,per_up,note\n0.2,0,1,2,3,0.1,x\n"))
    assert tr.csis[0] == CSI(1, 2, 3, 0.1, 0.2)


@pytest.mark.parametrize("csis", [
    (CSI.symmetric(10, 20, 0.01), CSI(1, 2, 3, 0.0, 0.0)),
    (CSI(10, 20, 30, 0.01, 0.2), CSI(1.5, 2.25, 0.1, 0.3, 0.0)),
])
def test_save_load_round_trip(tmp_path, csis):
    tr = CSITrace((0.0, 0.7), csis)
    save_trace(tr, tmp_path / "out.csv")
    assert load_trace(tmp_path / "out.csv") == tr


@pytest.mark.parametrize("text,match", [
    ("", "empty file"),
    (HEADER, "no rows"),
    ("t_s,rate_up_mbps,rtt_ms,per\n0,1,2,0\n", r"missing columns \['rate_down_mbps'\]"),
    ("t_s,rate_up_mbps,rate_down_mbps,rtt_ms\n0,1,2,3\n", r"missing columns \['per'\]"),
    ("t_s,rate_up_mbps,rate_down_mbps,rtt_ms,per_up\n0,1,2,3,0\n", r"missing columns \['per_down'\]"),
    ("t_s,rate_up_mbps,rate_down_mbps,rtt_ms,per,per_up\n0,1,2,3,0,0\n", "not both"),
    (HEADER + "0,1,2,3,0\n0,1,2,3,0\n", "line 3: column 't_s': not increasing"),
    (HEADER + "0,1,2,3,0\n-1,1,2,3,0\n", "line 3: column 't_s'"),
    (HEADER + "0,1,fast,3,0\n", "line 2: column 'rate_down_mbps': not a number: 'fast'"),
    (HEADER + "0,1,2,,0\n", "line 2: column 'rtt_ms': missing value"),
    (HEADER + "0,1,2,3,0\n1,1,2,3,1.5\n", "line 3: CSI.per_up must be in"),
    (HEADER + "0,1,2,3,0\n1,0,2,3,0\n", "line 3: CSI.rate_up_mbps"),
])
def test_load_errors_name_line_and_column(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        load_trace(write(tmp_path, text))


@pytest.mark.parametrize("t_s,n_csis,match", [
    ((), 0, ">= 1 row"), ((0.0, 1.0), 1, "equal lengths"), ((0.0, 0.0), 2, "strictly increasing"), ((-1.0,), 1, ">= 0"),
])
def test_trace_constructor_validates(t_s, n_csis, match):
    with pytest.raises(ValueError, match=match):
        CSITrace(t_s, (CSI.ideal(),) * n_csis)

"""Tests for the CSI type: validation, features, quality, serialization times and dict round trips."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from channel.csi import CSI, FEATURE_DIM, serialization_s

GOOD = dict(rate_up_mbps=20.0, rate_down_mbps=50.0, rtt_ms=20.0, per_up=0.01, per_down=0.02)


@pytest.mark.parametrize("field,value", [
    ("rate_up_mbps", 0.0), ("rate_up_mbps", -1.0), ("rate_down_mbps", math.nan),
    ("rtt_ms", -0.1), ("rtt_ms", math.inf), ("rtt_ms", math.nan),
    ("per_up", -0.01), ("per_up", 1.0), ("per_down", 1.5), ("per_down", "high"),
])
def test_invalid_field_raises_naming_it(field, value):
    with pytest.raises(ValueError, match=field):
        CSI(**{**GOOD, field: value})


def test_values_are_coerced_to_float():
    c = CSI(10, np.float64(20), 5, 0, 0)
    assert all(type(v) is float for v in c.to_dict().values())


def test_symmetric_and_ideal():
    assert CSI.symmetric(10, 30, 0.1) == CSI(10, 10, 30, 0.1, 0.1)
    assert CSI.ideal().is_ideal and not CSI.symmetric(1000, 0).is_ideal


@pytest.mark.parametrize("csi,expected", [
    (CSI(0.1, 1000, 0, 0, 0.5), [0, 1, 0, 0, 0.5]),
    (CSI(10, 1, 100, 0.1, 0.2), [0.5, 0.25, 0.5, 0.1, 0.2]),
    (CSI(0.01, 1e5, 500, 0, 0), [0, 1, 1, 0, 0]),  # clipped
    (CSI.ideal(), [1, 1, 0, 0, 0]),
])
def test_features_values(csi, expected):
    f = csi.features()
    assert f.shape == (FEATURE_DIM,) and f.dtype == np.float32
    np.testing.assert_allclose(f, expected, atol=1e-6)


rates = st.floats(1e-3, 1e6)
csis = st.builds(CSI, rates, rates, st.floats(0, 1e4), st.floats(0, 0.999), st.floats(0, 0.999))


@given(csis)
def test_features_and_quality_in_range(c):
    f = c.features()
    assert np.all((f >= 0) & (f <= 1))
    assert 0 < c.quality() <= 1


@pytest.mark.parametrize("field,worse,better", [
    ("rate_up_mbps", 1.0, 2.0), ("rate_down_mbps", 5.0, 500.0), ("rate_up_mbps", 100.0, math.inf),
    ("rtt_ms", 80.0, 10.0), ("rtt_ms", 1.0, 0.0),
    ("per_up", 0.3, 0.1), ("per_down", 0.01, 0.0),
])
def test_quality_is_monotone(field, worse, better):
    assert CSI(**{**GOOD, field: worse}).quality() < CSI(**{**GOOD, field: better}).quality()


def test_quality_extremes():
    assert CSI.ideal().quality() == 1.0
    assert CSI.symmetric(1000, 1).quality() > 0.95
    assert CSI.symmetric(0.5, 150, 0.2).quality() < 0.1


@pytest.mark.parametrize("nbytes,rate,per,expected_s", [
    (1250, 1.0, 0.0, 0.01), (1250, 1.0, 0.5, 0.02), (0, 1.0, 0.3, 0.0), (10**6, math.inf, 0.1, 0.0),
])
def test_serialization_time(nbytes, rate, per, expected_s):
    assert serialization_s(nbytes, rate, per) == pytest.approx(expected_s)


def test_uplink_and_downlink_use_their_direction():
    c = CSI(rate_up_mbps=1, rate_down_mbps=10, rtt_ms=50, per_up=0.2, per_down=0.0)
    assert c.uplink_s(1000) == pytest.approx(8000 / (1e6 * 0.8))
    assert c.downlink_s(1000) == pytest.approx(8000 / 1e7)
    with pytest.raises(ValueError, match="nbytes"):
        c.uplink_s(-1)


def test_dict_round_trip_and_errors():
    c = CSI(**GOOD)
    assert CSI.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="rtt_ms"):
        CSI.from_dict({k: v for k, v in GOOD.items() if k != "rtt_ms"})
    with pytest.raises(ValueError, match="rtt_s"):
        CSI.from_dict({**GOOD, "rtt_s": 1.0})

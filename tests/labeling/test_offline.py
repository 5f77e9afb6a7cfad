"""The offline check's accept rates by label, by hand."""
import numpy as np
import pandas as pd
import pytest

from labeling.offline import accept_rates


def test_accept_rates_split_by_label():
    labels = pd.DataFrame({"harmful": [1, 1, 0, 0, 0], "helpful": [0, 0, 1, 0, 0]})
    p = np.array([0.9, 0.2, 0.1, 0.3, 0.8])  # accepted at tau 0.5: rows 1, 2, 3
    r = accept_rates(p, labels, 0.5)
    assert r == pytest.approx({"accepted": 0.6, "accepted_harmful": 0.5, "accepted_helpful": 1.0,
                               "accepted_harmless": 0.5})
    assert accept_rates(p, labels, 0.0)["accepted"] == 0.0  # tau 0: greedy SD, nothing accepted
    assert np.isnan(accept_rates(p[:2], labels[:2], 0.5)["accepted_helpful"])

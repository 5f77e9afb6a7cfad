"""The harm label: one table of (target right?, forced right?, perplexity ratio) cases."""
import math

import pytest

from labeling.harm import harm_label, window_ppl_ratio

MAX = 2.0


@pytest.mark.parametrize("target_ok, forced_ok, ratio, harmful, helpful, changed, disfluent", [
    (True, True, 1.1, 0, 0, 0, 0),    # a synonym: answer kept, text as likely
    (True, False, 1.1, 1, 0, 1, 0),   # turns a right answer wrong
    (False, True, 1.1, 0, 1, 1, 0),   # turns a wrong answer right: helpful, never harmful
    (False, False, 1.1, 0, 0, 0, 0),  # wrong either way: no harm done by the draft
    (True, True, 5.0, 1, 0, 0, 1),    # a word fragment after the answer: the checker is happy, fluency is not
    (False, True, 5.0, 1, 0, 1, 1),   # fixes the answer but ruins the text: harmful, not counted helpful
    (True, True, math.nan, 0, 0, 0, 0),  # nothing to compare: not disfluent
    (True, True, MAX, 0, 0, 0, 0),    # the bound itself is allowed
])
def test_harm_label_table(target_ok, forced_ok, ratio, harmful, helpful, changed, disfluent):
    lab = harm_label(target_ok, forced_ok, ratio, MAX)
    assert (lab["harmful"], lab["helpful"], lab["changed"], lab["disfluent"]) == (harmful, helpful, changed, disfluent)


def test_window_ratio_reads_only_the_window():
    own = [0.1, 0.2, 0.3, 0.4]
    forced = [0.1 + math.log(9), 0.2, 9.0, 9.0]  # the forced token 9x less likely; the tokens after the window differ
    assert window_ppl_ratio(forced, own, 2) == pytest.approx(3.0)  # sqrt(9): mean over 2 tokens
    assert window_ppl_ratio(own, own, 4) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        window_ppl_ratio(own, own, 0)
    with pytest.raises(ValueError):
        harm_label(True, True, 1.0, 1.0)

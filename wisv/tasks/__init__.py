"""Tasks the pairs are run on: prompt sets with checkable answers, and the pools they are split into."""

"""Trace-to-head pipeline for the WISV decision head: collect, label, relabel, train, evaluate."""

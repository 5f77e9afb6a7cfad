"""The raw data: the one per-round record type (``rows.RoundRow``) and the one summary over it (``summary``).

Every producer (the live UE, the load generator, the simulator's traces, the in-process loop) writes ``RoundRow``s;
tables and plots are computed from them through ``summary``.  May import: nothing of the project (a bottom room of
``wisv``); producers import it, never the other way.
"""

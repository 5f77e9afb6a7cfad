"""Tools that stand against the live processes: hostile-peer probes (probes) and the bare ZeroMQ floor (zmqfloor)."""

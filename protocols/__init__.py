"""Wire format (typed, pickle-free messages) and the per-protocol state machines: greedy, reject, fh, sh, auto."""

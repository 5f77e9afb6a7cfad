"""The plumbing both ends of the link share: CurveZMQ keys, heartbeats and keepalives, socket bounds, defaults."""

"""Default bounds and intervals of the live processes, apart from the code that uses them (no zmq, no torch here):
the config dataclasses read them as their fields' defaults."""

MAX_QUEUE_MSGS = 1024  # default bound of the edge's queue to its serving loop (testbed/live/edge/inbox.py), messages
PEER_QUEUE_BYTES = 64 * 2**20  # default bytes one peer's arrivals may hold in that queue
TOTAL_QUEUE_BYTES = 512 * 2**20  # default bytes all arrivals together may hold in it
HEARTBEAT_IVL_MS = 1000  # default ZMTP PING interval (testbed/live/common/liveness.py), ms
HEARTBEAT_TIMEOUT_MS = 6000  # default: a silent connection is closed this long after a PING, ms (> a 5 s outage)

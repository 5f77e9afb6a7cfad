"""The ``topk`` protocol: a WISV chain whose DRAFT carries token ids only (as ``ef``), for a judge that reads only
what the edge computes itself, such as the ``topk`` judge (wisv_topk_plugin.judge).

Imports only wisv.timing.protodesc: it is imported at the end of that module's import.
"""
from wisv.timing.protodesc import EDGE_INPUTS, ProtocolDesc

TOPK = ProtocolDesc(name="topk", rule="wisv", head_inputs=EDGE_INPUTS)  # the wisv_testbed.protocols entry point

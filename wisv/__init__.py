"""WISV core: model pairs, acceptance rules and the in-process speculative loop (no sockets, no processes)."""
from wisv.models import ModelPair, PairError, load_pair
from wisv.speculative import AcceptAll, RejectAll, RoundRecord, SpecOutput, speculative_generate

__all__ = ["AcceptAll", "ModelPair", "PairError", "RejectAll", "RoundRecord", "SpecOutput", "load_pair",
           "speculative_generate"]

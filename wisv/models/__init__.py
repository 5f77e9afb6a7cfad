"""Models: loading a drafter/target pair with its tokenizer (``loader``) and the drafter's restricted LM head.

May import: nothing of the project but its own modules (a bottom room of ``wisv``).  ``wisv.pairs`` (named pairs and
their builds) sits above it.  ``from wisv.models import load_pair`` is ``wisv.models.loader.load_pair``.
"""
from wisv.models.loader import ModelPair, PairError, load_model, load_pair

__all__ = ["ModelPair", "PairError", "load_model", "load_pair"]

"""Models: loading a drafter/target pair with its tokenizer (``loader``) and the drafter's restricted LM head.

May import: nothing of the project but its own modules (a bottom room of ``wisv``).  ``wisv.pairs`` (named pairs and
their builds) sits above it.  ``from wisv.models import load_pair`` is ``wisv.models.loader.load_pair``, loaded on
first use, so that ``wisv.models.choices`` imports without torch.
"""
import importlib

__all__ = ["ModelPair", "PairError", "load_model", "load_pair"]  # from wisv.models.loader, on first use (PEP 562)


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(f"module 'wisv.models' has no attribute {name!r}")
    return getattr(importlib.import_module("wisv.models.loader"), name)

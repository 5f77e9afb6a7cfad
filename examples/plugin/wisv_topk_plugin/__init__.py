"""An example wisv-testbed plugin (docs/extend.md): the ``topk`` protocol, the ``topk`` judge and the ``toy-copy``
pair.  Each lives in a module of its own, which the testbed imports through its entry point while the registry it
extends is itself being imported; so each imports only that registry's low-rank module, and this file imports
nothing.
"""

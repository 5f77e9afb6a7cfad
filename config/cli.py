"""Configs on the command line: one flag per field (with help), ``--config`` under the flags, and child argv."""
from __future__ import annotations

import argparse
import os
import sys
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

from config.fields import NONE_TEXT, ConfigError, Flag, argv_tokens, check_value, coerce, flags, from_values
from config.toml import load_toml


def cli_prog(argv0: str | None = None, main_spec: str | None = None) -> str:
    """The program as users type it: ``python -m testbed.ue`` (run with -m) or ``python scripts/x.py``."""
    if main_spec is None:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        main_spec = spec.name if spec is not None else None
    if main_spec:
        return "python -m " + main_spec.removesuffix(".__main__")
    argv0 = argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")
    return f"python {os.path.relpath(argv0) if os.path.isabs(argv0) else argv0}"


def one_line_errors(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Usage errors as one line, ``PROG: error: MESSAGE`` (exit 2), without the usage block; a parser named after
    a file (argparse's default: ``__main__.py``, ``x.py``) is renamed to what users type (``cli_prog``)."""
    if ap.prog.endswith(".py"):
        ap.prog = cli_prog()
    ap.error = lambda message: ap.exit(2, f"{ap.prog}: error: {message}\n")  # type: ignore[method-assign]
    return ap


def add_flags(ap: argparse.ArgumentParser, cls: type) -> argparse.ArgumentParser:
    """Add --config and one flag per settable field of cls (defaults stay out of the namespace: see resolve);
    usage errors become one line (``one_line_errors``)."""
    one_line_errors(ap)
    ap.add_argument("--config", metavar="FILE.toml", default=None,
                    help="TOML file of these settings (keys as in a saved config.toml); flags given override it")
    for f in flags(cls):
        kw: dict[str, Any] = {"dest": f.dest, "default": argparse.SUPPRESS, "help": f.help}
        if f.meta.get("positional"):
            ap.add_argument(f.dest, metavar=f.path[-1].upper(), help=f.help)
            continue
        if f.tp is bool:
            kw["action"] = _Switch
        elif "parse" in f.meta or "sep" in f.meta or _is_seq(f.tp):
            kw |= {"nargs": "*", "metavar": _metavar(f)}
        else:
            kw["metavar"] = _metavar(f)
        ap.add_argument(f.flag, **kw)
    return ap


class _Switch(argparse.BooleanOptionalAction):
    """``--x`` sets True and ``--no-x`` False, also for a field named ``no_x`` (``--no-x`` / ``--no-no-x``)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, option_string == self.option_strings[0])


def _is_seq(tp: Any) -> bool:
    inner = [a for a in typing.get_args(tp) if a is not type(None)] if typing.get_origin(tp) in (
        types.UnionType, typing.Union) else [tp]
    return typing.get_origin(inner[0]) in (list, tuple)


def _metavar(f: Flag) -> str:
    choices = f.meta.get("choices")
    return "{" + ",".join(map(str, choices)) + "}" if choices else f.path[-1].upper()


def _from_flag(f: Flag, raw: Any) -> Any:
    """A flag's parsed text as the field's value."""
    if "parse" in f.meta:
        return f.meta["parse"](raw)
    if "sep" in f.meta:  # several choices in one str field: "--protocol greedy auto" or "--protocol greedy,auto"
        parts = [t.strip() for tok in ([raw] if isinstance(raw, str) else raw) for t in tok.split(f.meta["sep"])]
        return f.meta["sep"].join(dict.fromkeys(t for t in parts if t))
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and _is_seq(f.tp):  # a positional list
        raw = [raw]
    if isinstance(raw, list):  # several values, each may be comma-separated
        raw = [t.strip() for tok in raw for t in tok.split(",") if t.strip()]
        if len(raw) == 1 and raw[0].lower() == NONE_TEXT:
            raw = raw[0]
    try:
        typed = _typed_text(raw, f.tp)
    except ConfigError as e:
        raise ConfigError(f"{f.flag}: {e}") from None
    return coerce(typed, f.tp, f.flag)


def _typed_text(raw: Any, tp: Any) -> Any:
    """Command-line text converted toward tp's scalar type (coerce checks the result)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(raw, str) and raw.lower() == NONE_TEXT and type(None) in args:
        return None
    if origin in (types.UnionType, typing.Union):
        return _typed_text(raw, [a for a in args if a is not type(None)][0])
    if isinstance(raw, list):
        fixed = origin is tuple and args[-1] is not Ellipsis
        return [_typed_text(t, args[i] if fixed and i < len(args) else args[0]) for i, t in enumerate(raw)]
    try:
        return {int: int, float: float}.get(tp, str)(raw)
    except ValueError:
        raise ConfigError(f"expected {tp.__name__}, got {raw!r}") from None


def resolve(cls: type, ns: argparse.Namespace) -> dict:
    """Nested values from --config FILE (if given) with the flags given on top, all checked."""
    values = load_toml(cls, ns.config) if getattr(ns, "config", None) else {}
    given = vars(ns)
    for f in flags(cls):
        if f.dest in given:
            value = _from_flag(f, given[f.dest])
            check_value(value, f.meta, f.flag)
            node = values
            for key in f.path[:-1]:
                node = node.setdefault(key, {})
            node[f.path[-1]] = value
    return values


def parse(cls: type, argv: Sequence[str] | None = None, ap: argparse.ArgumentParser | None = None,
          adjust: Callable[[dict, argparse.Namespace], None] | None = None, **parser_kw: Any) -> Any:
    """Parse argv into a cls config: defaults < --config FILE < flags; adjust(values, ns) may apply special flags
    before the config is built.  Errors exit through ap.error with a message naming the flag or the file's key."""
    ap = ap if ap is not None else add_flags(argparse.ArgumentParser(**parser_kw), cls)
    ns = ap.parse_args(argv)
    try:
        values = resolve(cls, ns)
        if adjust is not None:
            adjust(values, ns)
        return from_values(cls, values)
    except ValueError as e:
        ap.error(str(e))


def to_argv(cfg: Any) -> list[str]:
    """The flags that rebuild cfg in a child process (only the fields that differ from the defaults)."""
    out: list[str] = []
    for f in flags(type(cfg)):
        value = cfg
        for key in f.path:
            value = getattr(value, key)
        if value == f.default and not f.meta.get("positional"):
            continue
        if f.meta.get("positional"):
            out.append(",".join(argv_tokens(value)))
        elif isinstance(value, bool):
            out.append(f.flag if value else "--no-" + f.flag[2:])
        else:
            out += [f.flag] + (list(f.meta["format"](value)) if "format" in f.meta else argv_tokens(value))
    return out



"""Config fields: a dataclass's fields as flags (name, type, help from the trailing comment) and value checks.

The dataclass side of the config system, shared by the TOML reader (``config.toml``) and the argparse side
(``config.cli``): each field's help text, the flattened ``Flag`` list of a nested config, and the coercion and
choice checks that a value from a file or a flag must pass.  Imports nothing of the project.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import operator
import re
import textwrap
import tokenize
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

NONE_TEXT = "none"  # None on the command line and in TOML files (TOML has no null)
CONTINUED = "#   "  # a comment line below a field that opens so goes on with the field's comment (its help text)


class ConfigError(ValueError):
    """A bad config file or value; the message names the file or flag and the key."""


@dataclass(frozen=True)
class Flag:
    """One command-line flag of a (possibly nested) config field."""

    path: tuple[str, ...]  # field names from the root config down to this field
    flag: str  # the option string, e.g. "--rtt-ms"
    tp: Any  # the field's resolved annotation
    default: Any  # the field's value in the root config's default instance
    help: str  # the field's trailing comment, with the default and choices appended
    meta: Mapping  # the field's metadata

    @property
    def dest(self) -> str:
        return ".".join(self.path)


@functools.cache
def field_help(cls: type) -> dict[str, str]:
    """Each field's trailing ``# comment`` in the class source; a field without one is an error.

    A field whose statement spans several lines may carry a comment on each, and the comment may go on below it on
    lines of their own that open with ``#   `` (three spaces); all are joined with spaces."""
    src = textwrap.dedent(inspect.getsource(cls))
    src_lines = src.splitlines()
    raw = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(src).readline)
           if tok.type == tokenize.COMMENT}
    body = ast.parse(src).body[0].body
    out = {}
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            nums = [n for n in range(node.lineno, node.end_lineno + 1) if n in raw]
            n = node.end_lineno + 1
            while n in raw and raw[n].startswith(CONTINUED) and src_lines[n - 1].lstrip().startswith("#"):
                nums, n = nums + [n], n + 1
            out[node.target.id] = " ".join(raw[n].lstrip("#").strip() for n in nums)
    missing = [f.name for f in fields(cls) if not out.get(f.name)]
    if missing:
        raise ConfigError(f"{cls.__qualname__}: fields {missing} have no trailing '# comment' (their --help text)")
    return out


@functools.cache
def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def sub_config(cls: type, name: str) -> type | None:
    """The dataclass type of a nested config field, or None for a plain field."""
    tp = hints(cls)[name]
    return tp if isinstance(tp, type) and is_dataclass(tp) else None


def settable(cls: type, skip: Sequence[str] = ()) -> list[dataclasses.Field]:
    """The fields of cls a file or a flag may set (all but the parent's skip list)."""
    return [f for f in fields(cls) if f.name not in skip]


@functools.cache
def flags(cls: type) -> tuple[Flag, ...]:
    """Every flag of cls, nested configs flattened; two fields with one flag name are an error."""
    out: list[Flag] = []
    _collect(cls, cls(), (), (), out)
    seen: dict[str, str] = {}
    for f in out:
        if f.flag in seen:
            raise ConfigError(f"{cls.__qualname__}: {f.dest} and {seen[f.flag]} both want {f.flag}")
        seen[f.flag] = f.dest
    return tuple(out)


def _collect(cls: type, base: Any, path: tuple[str, ...], skip: Sequence[str], out: list[Flag]) -> None:
    docs = field_help(cls)
    for f in settable(cls, skip):
        sub, value = sub_config(cls, f.name), getattr(base, f.name)
        if sub is not None:
            _collect(sub, value, path + (f.name,), f.metadata.get("skip", ()), out)
            continue
        if typing.get_origin(hints(cls)[f.name]) is dict and "parse" not in f.metadata:
            raise ConfigError(f"{cls.__qualname__}.{f.name}: a dict field needs parse/format metadata to be a flag")
        name = f.metadata.get("flag", f.name.replace("_", "-"))
        out.append(Flag(path + (f.name,), name if f.metadata.get("positional") else "--" + name, hints(cls)[f.name],
                        value, _help_text(docs[f.name], _shown(value, f.metadata), f.metadata), f.metadata))


def _shown(value: Any, meta: Mapping) -> str:
    """A default as --help shows it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value == "":
        return '""'
    return " ".join(meta["format"](value) if "format" in meta else argv_tokens(value)) or NONE_TEXT


BOUNDS = {"min": (">=", operator.ge), "max": ("<=", operator.le), "above": (">", operator.gt),
          "below": ("<", operator.lt)}  # field metadata key -> (sign, test)


def _help_text(doc: str, default: str, meta: Mapping) -> str:
    many = "one or more (comma or space separated)" if meta.get("sep") else "one"
    text = doc + (f"; {many} of: {', '.join(map(str, meta['choices']))}" if meta.get("choices") else "")
    text += f"; also: {', '.join(map(str, meta['also']))}" if meta.get("also") else ""  # names added at run time
    text += "".join(f"; {sign} {meta[k]:g}" for k, (sign, _) in BOUNDS.items() if k in meta)
    text += f"; at least {meta['min_len']} value(s) when given" if meta.get("min_len") else ""
    text += "" if meta.get("positional") else f" (default: {default})"
    return text.replace("%", "%%")


# ----- values: coercion and checks (shared by files and flags) -----

def coerce(value: Any, tp: Any, where: str) -> Any:
    """value as annotation tp (TOML or flag values; ints pass as floats), or a ConfigError naming where."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        if value is None or (isinstance(value, str) and value.lower() == NONE_TEXT):
            return None
        inner = [a for a in args if a is not type(None)]
        return coerce(value, inner[0], where)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        fixed = origin is tuple and args[-1] is not Ellipsis
        if fixed and len(value) != len(args):
            raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
        items = [coerce(v, args[i] if fixed else args[0], f"{where}[{i}]") for i, v in enumerate(value)]
        return origin(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {value!r}")
        return {str(k): coerce(v, args[1], f"{where}.{k}") for k, v in value.items()}
    return _scalar(value, tp, where)


def _scalar(value: Any, tp: Any, where: str) -> Any:
    ok = {bool: isinstance(value, bool), int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool), str: isinstance(value, str)}
    if tp not in ok:
        raise ConfigError(f"{where}: unsupported config type {tp!r}")
    if not ok[tp]:
        raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
    return float(value) if tp is float else value


def check_choices(value: Any, choices: Sequence | None, where: str, sep: str | None = None) -> None:
    """A ConfigError unless value (each element of a list; with ``sep``, each part of a str) is one of choices."""
    items = value if isinstance(value, (list, tuple)) else value.split(sep) if sep and isinstance(value, str) \
        else [value]
    bad = [v for v in items if choices and v is not None and v not in choices]
    if bad:
        raise ConfigError(f"{where}: {bad[0]!r} is not one of {list(choices)}")


def check_value(value: Any, meta: Mapping, where: str) -> None:
    """A ConfigError naming ``where`` when value (each element of a list; with ``sep``, of a str field holding several
    choices) is not one of the field's ``choices``, is out of its bounds (``min``, ``max``, ``above``, ``below``), does
    not match its ``pattern``, or is a list shorter than its ``min_len``; None passes."""
    check_choices(value, meta.get("choices"), where, meta.get("sep"))
    if isinstance(value, (list, tuple)) and len(value) < meta.get("min_len", 0):
        raise ConfigError(f"{where}: give at least {meta['min_len']} value(s), got {len(value)}")
    for v in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            for key, (sign, ok) in BOUNDS.items():
                if key in meta and not ok(v, meta[key]):
                    raise ConfigError(f"{where}: must be {sign} {meta[key]:g}, got {v:g}")
        if isinstance(v, str) and "pattern" in meta and not re.fullmatch(meta["pattern"], v):
            raise ConfigError(f"{where}: expected the form {meta.get('example', meta['pattern'])}, got {v!r}")


def to_values(cls: type, doc: Mapping, where: str, skip: Sequence[str] = ()) -> dict:
    """A nested mapping (a parsed TOML file) checked against cls: known keys, right types, choices and bounds."""
    known = {f.name: f for f in settable(cls, skip)}
    out = {}
    for key, value in doc.items():
        f = known.get(key)
        if f is None:
            raise ConfigError(f"{where}: unknown key {key!r} ({cls.__qualname__} has no such setting; "
                              f"known: {', '.join(known)})")
        sub = sub_config(cls, key)
        if sub is not None:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {key} must be a table [{key}]")
            out[key] = to_values(sub, value, f"{where} [{key}]", f.metadata.get("skip", ()))
            continue
        out[key] = coerce(value, hints(cls)[key], f"{where}: {key}")
        check_value(out[key], f.metadata, f"{where}: {key}")
    return out


def from_values(cls: type, values: Mapping, base: Any = None) -> Any:
    """The config: base (default cls()) with the checked nested values put in (__post_init__ checks run)."""
    base = cls() if base is None else base
    kw = {}
    for key, value in values.items():
        sub = sub_config(cls, key)
        kw[key] = from_values(sub, value, getattr(base, key)) if sub is not None else value
    return replace(base, **kw)


def to_dict(cfg: Any, skip: Sequence[str] = ()) -> dict:
    """The settable fields of cfg as a nested dict (tuples as lists), the inverse of from_values."""
    out = {}
    for f in settable(type(cfg), skip):
        value = getattr(cfg, f.name)
        out[f.name] = to_dict(value, f.metadata.get("skip", ())) if is_dataclass(value) else _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value



def argv_tokens(value: Any) -> list[str]:
    if value is None:
        return [NONE_TEXT]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return [f"{k}={v}" for k, v in value.items()]
    return [str(value)]

"""Config dataclasses <-> command-line flags, child-process argv and TOML files: the one config system of every CLI.

It lives in ``channel/``, the bottom layer, because ``channel.emulator``'s CLI uses it and nothing lower may import
higher; it imports nothing of the project.  A config is a dataclass whose every field has a default and a one-line
trailing ``# comment``: that comment, with its unit, is the flag's ``--help`` (a field without one is an error).
The flag's type comes from the annotation: int, float, str, bool (``--x/--no-x``), ``X | None`` (``none`` on the
command line or in a file gives None), lists and tuples (several values, or one comma-separated), ``dict[str, X]``
(a TOML table).  A nested dataclass field is a TOML table whose fields keep their own flag names (no prefix), so a
config that nests others has the same flags as a flat one.  Field metadata, all optional:

- ``choices``: the allowed values (of each element, for a list);
- ``flag``: the flag's name when it is not the field's (without ``--``);
- ``positional``: a positional argument instead of a flag (one token; a list's values comma-separated);
- ``skip``: on a nested dataclass field, its sub-fields that the parent sets itself (no flag, no TOML key);
- ``parse`` / ``format``: a field's own text form on the command line (tokens -> value, value -> tokens);
- ``example``: a valid non-default value, for a text field whose form is checked (the config tests use it);
- ``min`` / ``max`` / ``above`` / ``below``: bounds of a number (>=, <=, >, <; of each element of a list; None
  passes), and ``pattern``: a regular expression a text must match.  Flags and TOML files are checked against them
  when parsed (``check_value``), and ``--help`` shows them.

Precedence: the dataclass defaults, then ``--config FILE.toml``, then the flags given.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import inspect
import io
import json
import math
import operator
import os
import platform
import re
import subprocess
import sys
import textwrap
import tokenize
import tomllib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # the repository (for its git commit)
NONE_TEXT = "none"  # None on the command line and in TOML files (TOML has no null)


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
    """Each field's trailing ``# comment`` in the class source; a field without one is an error."""
    src = textwrap.dedent(inspect.getsource(cls))
    comments = {tok.start[0]: tok.string.lstrip("#").strip()
                for tok in tokenize.generate_tokens(io.StringIO(src).readline) if tok.type == tokenize.COMMENT}
    body = ast.parse(src).body[0].body
    out = {}
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            lines = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
            out[node.target.id] = lines[-1] if lines else ""
    missing = [f.name for f in fields(cls) if not out.get(f.name)]
    if missing:
        raise ConfigError(f"{cls.__qualname__}: fields {missing} have no trailing '# comment' (their --help text)")
    return out


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _sub_config(cls: type, name: str) -> type | None:
    """The dataclass type of a nested config field, or None for a plain field."""
    tp = _hints(cls)[name]
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
        sub, value = _sub_config(cls, f.name), getattr(base, f.name)
        if sub is not None:
            _collect(sub, value, path + (f.name,), f.metadata.get("skip", ()), out)
            continue
        if typing.get_origin(_hints(cls)[f.name]) is dict and "parse" not in f.metadata:
            raise ConfigError(f"{cls.__qualname__}.{f.name}: a dict field needs parse/format metadata to be a flag")
        name = f.metadata.get("flag", f.name.replace("_", "-"))
        out.append(Flag(path + (f.name,), name if f.metadata.get("positional") else "--" + name, _hints(cls)[f.name],
                        value, _help_text(docs[f.name], _shown(value, f.metadata), f.metadata), f.metadata))


def _shown(value: Any, meta: Mapping) -> str:
    """A default as --help shows it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value == "":
        return '""'
    return " ".join(meta["format"](value) if "format" in meta else _argv_tokens(value)) or NONE_TEXT


BOUNDS = {"min": (">=", operator.ge), "max": ("<=", operator.le), "above": (">", operator.gt),
          "below": ("<", operator.lt)}  # field metadata key -> (sign, test)


def _help_text(doc: str, default: str, meta: Mapping) -> str:
    text = doc + (f"; one of: {', '.join(map(str, meta['choices']))}" if meta.get("choices") else "")
    text += "".join(f"; {sign} {meta[k]:g}" for k, (sign, _) in BOUNDS.items() if k in meta)
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


def _check_choices(value: Any, choices: Sequence | None, where: str) -> None:
    items = value if isinstance(value, (list, tuple)) else [value]
    bad = [v for v in items if choices and v is not None and v not in choices]
    if bad:
        raise ConfigError(f"{where}: {bad[0]!r} is not one of {list(choices)}")


def check_value(value: Any, meta: Mapping, where: str) -> None:
    """A ConfigError naming ``where`` when value (each element of a list) is not one of the field's ``choices``, is
    out of its bounds (``min``, ``max``, ``above``, ``below``) or does not match its ``pattern``; None passes."""
    _check_choices(value, meta.get("choices"), where)
    for v in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            for key, (sign, ok) in BOUNDS.items():
                if key in meta and not ok(v, meta[key]):
                    raise ConfigError(f"{where}: must be {sign} {meta[key]:g}, got {v:g}")
        if isinstance(v, str) and "pattern" in meta and not re.fullmatch(meta["pattern"], v):
            raise ConfigError(f"{where}: expected the form {meta.get('example', meta['pattern'])}, got {v!r}")


def to_values(cls: type, doc: Mapping, where: str, skip: Sequence[str] = ()) -> dict:
    """A nested mapping (a parsed TOML file) checked against cls: known keys, right types, allowed choices."""
    known = {f.name: f for f in settable(cls, skip)}
    out = {}
    for key, value in doc.items():
        f = known.get(key)
        if f is None:
            raise ConfigError(f"{where}: unknown key {key!r} ({cls.__qualname__} has no such setting; "
                              f"known: {', '.join(known)})")
        sub = _sub_config(cls, key)
        if sub is not None:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {key} must be a table [{key}]")
            out[key] = to_values(sub, value, f"{where} [{key}]", f.metadata.get("skip", ()))
            continue
        out[key] = coerce(value, _hints(cls)[key], f"{where}: {key}")
        check_value(out[key], f.metadata, f"{where}: {key}")
    return out


def from_values(cls: type, values: Mapping, base: Any = None) -> Any:
    """The config: base (default cls()) with the checked nested values put in (__post_init__ checks run)."""
    base = cls() if base is None else base
    kw = {}
    for key, value in values.items():
        sub = _sub_config(cls, key)
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


# ----- TOML -----

def load_toml(cls: type, path: str | Path) -> dict:
    """A TOML file's checked values for cls; a missing file, bad syntax or unknown key is a ConfigError."""
    try:
        doc = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    return to_values(cls, doc, str(path))


def to_toml(cfg: Any, header: Mapping[str, Any] | None = None) -> str:
    """cfg as TOML text that --config reads back; header entries become comment lines at the top."""
    lines = [f"# {k} = {_toml_value(v)}" for k, v in (header or {}).items()]
    return "\n".join(lines + _toml_table(to_dict(cfg), ())) + "\n"


def _toml_table(d: Mapping, path: tuple[str, ...]) -> list[str]:
    lines = [f"[{'.'.join(map(_toml_key, path))}]"] if path else []
    subs = {k: v for k, v in d.items() if isinstance(v, dict)}
    for k, v in d.items():
        if k not in subs:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    for k, v in subs.items():
        lines += [""] + _toml_table(v, path + (k,))
    return lines


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _toml_value(v: Any) -> str:
    if v is None:
        return json.dumps(NONE_TEXT)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(v, str):
        return json.dumps(v)  # JSON's string escapes are TOML's basic-string escapes
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise ConfigError(f"cannot write {v!r} to TOML")


def provenance() -> dict:
    """What a saved config ran on, without torch: CPU count, platform, Python, git commit (testbed adds versions)."""
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain"))}


def _git(*args: str) -> str | None:
    """git's stdout in the repository, or None when git is missing or fails."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        p = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=10)
        return p.stdout.strip() if p.returncode == 0 else None
    return None


def write_config(out: str | Path, cfg: Any, header: Mapping[str, Any] | None = None) -> Path:
    """Save cfg as ``out/config.toml`` (``--config`` reads it back), header (e.g. git commit) as comments."""
    path = Path(out) / "config.toml"
    path.write_text(to_toml(cfg, header))
    return path


def write_config_beside(result: str | Path, cfg: Any, header: Mapping[str, Any] | None = None) -> Path:
    """Save cfg beside one result file as ``<its stem>_config.toml`` (bench.json -> bench_config.toml)."""
    path = Path(result).with_name(Path(result).stem + "_config.toml")
    path.write_text(to_toml(cfg, header))
    return path


# ----- argparse -----

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
        elif "parse" in f.meta or _is_seq(f.tp):
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
    return run_reporting(f"{prog.removeprefix('python -m ')} {ns.command}", lambda: fn(cfg), errors)


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
            out.append(",".join(_argv_tokens(value)))
        elif isinstance(value, bool):
            out.append(f.flag if value else "--no-" + f.flag[2:])
        else:
            out += [f.flag] + (list(f.meta["format"](value)) if "format" in f.meta else _argv_tokens(value))
    return out


def _argv_tokens(value: Any) -> list[str]:
    if value is None:
        return [NONE_TEXT]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return [f"{k}={v}" for k, v in value.items()]
    return [str(value)]

"""Config dataclasses <-> command-line flags, child-process argv and TOML files: the one config system of every CLI.

It is the bottom layer of the project: every package may import it, and it imports nothing of the project.
Its modules, by job: ``fields`` (a dataclass's fields as flags, value checks), ``toml`` (files), ``cli``
(flags on argparse, child argv), ``shell`` (one-line errors, subcommands), ``provenance`` (what a result ran on).
Callers use the names below: ``import config`` then ``config.parse(...)``.

A config is a dataclass whose every field has a default and a one-line
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

from config.cli import add_flags, cli_prog, one_line_errors, parse, resolve, to_argv
from config.fields import (
                           NONE_TEXT,
                           ConfigError,
                           Flag,
                           check_value,
                           coerce,
                           field_help,
                           flags,
                           from_values,
                           settable,
                           to_dict,
                           to_values,
)
from config.provenance import ROOT, provenance, write_config, write_config_beside
from config.shell import run_reporting, run_subcommand
from config.toml import load_toml, to_toml

__all__ = ["NONE_TEXT", "ROOT", "ConfigError", "Flag", "add_flags", "check_value", "cli_prog", "coerce", "field_help",
           "flags", "from_values", "load_toml", "one_line_errors", "parse", "provenance", "resolve", "run_reporting",
           "run_subcommand", "settable", "to_argv", "to_dict", "to_toml", "to_values", "write_config",
           "write_config_beside"]

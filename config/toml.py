"""Configs as TOML: read a file into checked values (``--config FILE.toml``) and write a config back as TOML."""
from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from config.fields import NONE_TEXT, ConfigError, to_dict, to_values


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


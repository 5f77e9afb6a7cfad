"""Named drafter/target pairs (``--pair toy|smollm2``): where each lives and the one resolver to its directories.

A package adds a pair through the ``wisv_testbed.pairs`` entry point (wisv.plugins; docs/extend.md): it loads a
``PluginPair``, whose ``resolve`` finds the directories and whose ``heads`` names the heads shipped for it.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wisv import plugins
from wisv.models.loader import BUILTIN_DIR, PairError, builtin_paths

CACHE_ENV = "WISV_CACHE_DIR"  # environment variable overriding the default cache directory
DEFAULT_CACHE = Path("~/.cache/wisv-testbed")  # pip downloads and built pairs live here unless overridden
BUILTIN_PAIRS = ("toy", "smollm2")  # the pairs shipped here (python -m wisv.pairs build NAME)
DONE_FILE = "build.json"  # written last by a finished build: its presence marks the pair as built
ASSETS_DIR = Path(__file__).resolve().parents[1] / "assets"  # files shipped with the package
QA_DIR = ASSETS_DIR / "qa"  # the short-answer QA task's splits (calib/test): --prompts-file, no longer a default
LONGFORM_DIR = ASSETS_DIR / "longform"  # the SmolLM2 pair's default prompts: the long-form task's pools
HEAD_DIRS = {"toy": BUILTIN_DIR / "head", "smollm2": ASSETS_DIR / "smollm2-head"}  # each pair's WISV-paper head
JUDGE_DIRS = {"smollm2": ASSETS_DIR / "smollm2-judges"}  # each pair's named judges (wisv/head/judges.py), one dir each
DEFAULT_JUDGE = "edge"  # the judge --head default picks where a pair ships it (else the paper head)


class PairNotBuilt(PairError):
    """A named pair whose directories have not been built yet."""


@dataclass(frozen=True)
class PairPaths:
    """Where a named pair's drafter and target directories are."""

    name: str  # the pair's name (PAIR_NAMES)
    drafter: Path  # HF directory of the drafter
    target: Path  # HF directory of the target


@dataclass(frozen=True)
class PluginPair:
    """A named pair a plugin adds (a ``wisv_testbed.pairs`` entry point loads one; the entry point names it)."""

    resolve: Callable[[Path], tuple[Path, Path]]  # cache dir -> (drafter dir, target dir); PairNotBuilt if absent
    heads: Mapping[str, Path] = field(default_factory=dict)  # --head NAME -> a head or judge dir shipped for it
    default_head: str | None = None  # the one of ``heads`` that --head default loads (None: greedy-equivalent)
    prompts_file: Path | None = None  # its default prompts, JSONL (None: the toy task's built-in split)


def add_plugin(name: str, loaded: object) -> None:
    """Add what a ``wisv_testbed.pairs`` entry point ``name`` loads (a PluginPair); a name already taken is refused
    (wisv.plugins reports it and skips the plugin)."""
    if not isinstance(loaded, PluginPair):
        raise TypeError(f"entry point {name!r} loads {loaded!r}, not a wisv.pairs.PluginPair")
    if name in BUILTIN_PAIRS or name in PLUGIN_PAIRS:
        raise ValueError(f"pair {name!r} already exists")
    PLUGIN_PAIRS[name] = loaded


PLUGIN_PAIRS: dict[str, PluginPair] = {}  # pairs added by entry points, by name
plugins.load(plugins.PAIRS, add_plugin)
PAIR_NAMES = (*BUILTIN_PAIRS, *PLUGIN_PAIRS)  # the names --pair accepts


def cache_dir(override: str | Path | None = None) -> Path:
    """The cache directory: ``override``, else $WISV_CACHE_DIR, else ~/.cache/wisv-testbed."""
    raw = override or os.environ.get(CACHE_ENV) or DEFAULT_CACHE
    return Path(raw).expanduser()


def pair_dir(name: str, cache: str | Path | None = None) -> Path:
    """The directory a built pair lives in (the toy pair's is in the package; a plugin's pair resolves its own)."""
    _check_name(name)
    if name in PLUGIN_PAIRS:
        raise PairError(f"pair {name!r} is a plugin's: it has no build directory here (resolve_pair finds its dirs)")
    return BUILTIN_DIR if name == "toy" else cache_dir(cache) / "pairs" / name


def build_command(name: str) -> str:
    """The command that builds a pair."""
    return f"python -m wisv.pairs build {name}"


def resolve_pair(name: str, cache: str | Path | None = None) -> PairPaths:
    """The pair's (drafter, target) directories; PairNotBuilt, naming the build command, if it is not built."""
    _check_name(name)
    if name in PLUGIN_PAIRS:
        return PairPaths(name, *PLUGIN_PAIRS[name].resolve(cache_dir(cache)))
    if name == "toy":
        d, t = builtin_paths()
        return PairPaths(name, d, t)
    root = pair_dir(name, cache)
    if not (root / DONE_FILE).is_file():
        raise PairNotBuilt(f"pair {name!r} is not built (no {root / DONE_FILE}): run `{build_command(name)}` first"
                           f" (cache: --cache-dir or ${CACHE_ENV})")
    return PairPaths(name, root / "drafter", root / "target")


def pair_head_dir(name: str) -> Path | None:
    """The directory of the decision head shipped for a named pair (``--head default``)."""
    _check_name(name)
    return pair_default_head(name) if name in PLUGIN_PAIRS else HEAD_DIRS[name]


def pair_heads(name: str) -> dict[str, Path]:
    """Every head shipped for a named pair, by its --head name: ``wisv-paper`` (the paper's CSI-aware head over
    [h_d ; h_t ; csi]) and each judge directory (``edge``, the default where present, and the peers)."""
    _check_name(name)
    if name in PLUGIN_PAIRS:
        return dict(PLUGIN_PAIRS[name].heads)
    judges = JUDGE_DIRS.get(name)
    named = {"wisv-paper": HEAD_DIRS[name]}
    if judges is not None and judges.is_dir():
        named |= {d.name: d for d in sorted(judges.iterdir()) if (d / "judge.json").is_file()}
    return named


def pair_default_head(name: str) -> Path | None:
    """The directory ``--head default`` loads for a named pair: its edge judge where shipped, else the paper head (a
    plugin pair's: its ``default_head``; None when it names none)."""
    if name in PLUGIN_PAIRS:
        plugin = PLUGIN_PAIRS[name]
        return None if plugin.default_head is None else Path(plugin.heads[plugin.default_head])
    return pair_heads(name).get(DEFAULT_JUDGE, HEAD_DIRS[name])


def pair_of_target(target: str | Path | None, cache: str | Path | None = None) -> str | None:
    """The named pair whose target directory is ``target`` (None: the built-in toy's); None for any other."""
    if target is None:
        return "toy"
    t = Path(target).expanduser().resolve()
    return next((n for n in PAIR_NAMES if _target_of(n, cache) == t), None)


def _target_of(name: str, cache: str | Path | None) -> Path | None:
    """A named pair's target dir, resolved (None: a plugin's pair that is not there)."""
    if name in BUILTIN_PAIRS:
        return (pair_dir(name, cache) / "target").resolve()
    try:
        return PLUGIN_PAIRS[name].resolve(cache_dir(cache))[1].resolve()
    except PairError:
        return None


def default_prompts_file(pair: str | None, split: str = "test") -> str | None:
    """The pair's default prompt file (None: the toy task's built-in split): the long-form task's ``split`` pool
    (``test``; ``calib`` for the decision head's collection); missing: an error naming the file."""
    if pair in PLUGIN_PAIRS:
        plugin_file = PLUGIN_PAIRS[pair].prompts_file
        return None if plugin_file is None else str(plugin_file)
    if pair in (None, "toy"):
        return None
    path = LONGFORM_DIR / f"{split}.jsonl"
    if not path.is_file():
        raise PairError(f"pair {pair!r}: its default prompt set {path} is missing; give --prompts-file FILE")
    return str(path)


def _check_name(name: str) -> None:
    if name not in PAIR_NAMES:
        raise PairError(f"unknown pair {name!r}: expected one of {PAIR_NAMES}")



def _replace_at(cfg, path: str, value):
    """cfg with the (dotted) field ``path`` set to ``value``."""
    head, _, rest = path.partition(".")
    inner = value if not rest else _replace_at(getattr(cfg, head), rest, value)
    return dataclasses.replace(cfg, **{head: inner})


def _get_at(cfg, path: str):
    for key in path.split("."):
        cfg = getattr(cfg, key)
    return cfg


def apply_pair(cfg, drafter: str | None = "drafter", target: str | None = "target", split: str = "test"):
    """A CLI config with the dotted ``drafter``/``target`` fields and ``prompts_file`` filled from ``cfg.pair``
    where they are not given (--drafter/--target win; a named ``dataset`` leaves ``prompts_file`` unset); the config
    itself when no pair is named."""
    if getattr(cfg, "pair", None) is None:
        return cfg
    paths = resolve_pair(cfg.pair)
    for path, value in ((drafter, paths.drafter), (target, paths.target)):
        if path is not None and _get_at(cfg, path) is None:
            cfg = _replace_at(cfg, path, str(value))
    if hasattr(cfg, "prompts_file") and cfg.prompts_file is None and not getattr(cfg, "dataset", None):
        cfg = dataclasses.replace(cfg, prompts_file=default_prompts_file(cfg.pair, split))
    return cfg

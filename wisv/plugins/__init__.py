"""The one loader of plugins: entry points of three groups, each read at the import of the registry it extends.

A package installed beside the testbed (``pip install``) extends it through entry points (``[project.entry-points]``
in its pyproject.toml; docs/extend.md walks through examples/plugin/):

- ``wisv_testbed.protocols``: a ``ProtocolDesc`` (wisv.timing.protodesc) or a list of them, added to ``DESCRIPTIONS``
  at the end of protodesc's import, so the registry, the latency model, the simulator, the byte models and every
  CLI's choices see it;
- ``wisv_testbed.policies``: a stored-policy ``Kind`` (wisv.head.policy) named by the entry point, added to the
  store's ``KINDS``: directories whose config names that kind load, and a kind that needs no weights is also a
  ``--head NAME``;
- ``wisv_testbed.pairs``: a ``PluginPair`` (wisv.pairs) named by the entry point, added to ``PAIR_NAMES``.

Each registry calls ``load(group, add)`` as it is imported, in every process (the UE's and the edge's too), and
``add`` refuses a name that already exists.  A plugin that fails (its import raises, or ``add`` refuses it) is one line
on stderr naming the entry point and why, once per process tree, and the built-ins work as before.  A plugin's module
imports only what sits at or below the registry it extends (a protocol: wisv.timing.protodesc; a policy:
wisv.head.policy; a pair: wisv.pairs): it is imported while that registry is still being imported.  This module
imports nothing of the project.
"""
from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from importlib import metadata

PROTOCOLS = "wisv_testbed.protocols"  # entry point -> a ProtocolDesc or a list of them
POLICIES = "wisv_testbed.policies"  # entry point NAME -> a Kind: stored policies of kind NAME (and --head NAME)
PAIRS = "wisv_testbed.pairs"  # entry point NAME -> a PluginPair: --pair NAME
REPORTED_ENV = "WISV_PLUGINS_REPORTED"  # set once a process has reported its broken plugins: its children stay quiet

BROKEN: list[str] = []  # this process's lines about plugins it skipped
QUIET = bool(os.environ.get(REPORTED_ENV))  # a parent process has reported them already


@functools.cache
def _installed() -> metadata.EntryPoints:
    """Every installed entry point, read once per process (the three groups share one scan)."""
    return metadata.entry_points()


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The installed entry points of ``group``, by name (tests replace this to plant plugins)."""
    return sorted(_installed().select(group=group), key=lambda ep: ep.name)


def broken_line(group: str, ep: metadata.EntryPoint, err: BaseException) -> str:
    """The one line that reports a skipped plugin: the entry point, its package and why."""
    dist = f" from {ep.dist.name}" if ep.dist is not None else ""
    why = " ".join(f"{type(err).__name__}: {err}".split())
    return f"wisv-testbed: skipped plugin {ep.name} = {ep.value} ({group}{dist}): {why}"


def load(group: str, add: Callable[[str, object], None]) -> list[str]:
    """Load each entry point of ``group`` and hand ``add(name, object)`` what it names; returns the names added.  A
    plugin whose import or ``add`` raises is skipped with one line on stderr (not repeated in child processes)."""
    added = []
    for ep in entry_points(group):
        try:
            add(ep.name, ep.load())
        except Exception as err:  # anything a third party's import or a refusal raises: report it, go on
            line = broken_line(group, ep, err)
            BROKEN.append(line)
            if not QUIET:
                print(line, file=sys.stderr)
                os.environ[REPORTED_ENV] = "1"
        else:
            added.append(ep.name)
    return added

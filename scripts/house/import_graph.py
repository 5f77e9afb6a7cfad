"""Import graph of the project by ast (nothing is imported): print package edges, fail on an upward import, a module
or package cycle, or a project module imported by name through importlib.

Rooms, lowest first (docs/architecture.md draws them): config -> channel -> wisv.tasks | wisv.records |
wisv.models | wisv.plugins -> wisv.timing -> wisv.head -> wisv.decoding -> wisv.serving | wisv.pairs -> wisv (its
lazy facade) -> protocols | labeling -> testbed -> scripts.  A module may import its own room or a lower-ranked one;
rooms of one rank (tasks, records, models and plugins; serving and pairs; protocols and labeling) may not import each
other.  A module's room is the longest entry of RANK that names it or a package above it.  Every import counts, also
those inside functions, and those under ``if TYPE_CHECKING:`` too: they never run, but a cycle through one is still
two modules that depend on each other (an interface that names one of its implementations), so it counts.
``importlib.import_module("a.b")`` with a literal name is an import of a.b like any other; outside a package's lazy
``__getattr__`` (its ``__init__.py``) it is also an error: it would hide the edge from a reader, and a cycle with it.
A package cycle (packages are directories with an ``__init__.py``; a package's own modules are one node) is an error
too: two rooms that import each other are one room.

    python -m scripts.house.import_graph          # exit status 1 on a violation
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import config  # imports nothing else of the project

ROOT = Path(__file__).resolve().parents[2]  # the repository this script lies in

PACKAGES = ("config", "channel", "wisv", "protocols", "labeling", "testbed", "scripts")
RANK = {"config": 0, "channel": 1,  # rooms by rank: a room imports only its own modules and lower ranks
        "wisv.tasks": 2, "wisv.records": 2, "wisv.models": 2, "wisv.plugins": 2, "wisv.timing": 3, "wisv.head": 4,
        "wisv.decoding": 5, "wisv.serving": 6, "wisv.pairs": 6, "wisv": 7, "protocols": 8, "labeling": 8, "testbed": 9,
        "scripts": 10}


def room(module: str) -> str:
    """The RANK entry that holds a module: wisv.timing.latency -> wisv.timing; wisv -> wisv;
    testbed.sim.x -> testbed."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in RANK:
            return ".".join(parts[:n])
    raise KeyError(f"{module}: in no room of RANK")


@dataclass(frozen=True)
class Edge:
    src: str  # importing module, dotted
    dst: str  # imported project module, dotted
    typing_only: bool  # under `if TYPE_CHECKING:`, never executed
    by_name: bool = False  # importlib.import_module("...") with a literal name
    lazy: bool = False  # ... inside a package's module-level __getattr__ (its lazy facade): allowed


@dataclass
class GraphConfig:
    """Which tree to check."""

    root: str = str(ROOT)  # the repository root


def module_name(path: Path, root: Path) -> str:
    """wisv/timing/latency.py -> wisv.timing.latency; testbed/sim/__init__.py -> testbed.sim."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def find_modules(root: Path) -> dict[str, Path]:
    """Every .py module under the project packages, by dotted name."""
    return {module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _raw_imports(tree: ast.AST, typing_only: bool = False) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    """(import node, under TYPE_CHECKING) for every import in the tree, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, typing_only
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _raw_imports(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from _raw_imports(ast.Module(body=[child], type_ignores=[]), typing_only)
        else:
            yield from _raw_imports(node, typing_only)


def _is_import_module(func: ast.expr) -> bool:
    """``importlib.import_module`` or a bare ``import_module``."""
    return (isinstance(func, ast.Attribute) and func.attr == "import_module"
            and isinstance(func.value, ast.Name) and func.value.id == "importlib") or \
        (isinstance(func, ast.Name) and func.id == "import_module")


def _by_name(tree: ast.Module, is_package: bool) -> Iterable[tuple[str, bool]]:
    """(literal module name, inside a package's module-level ``__getattr__``) for every
    ``importlib.import_module("...")`` call whose first argument is a string literal."""
    lazy_bodies = [node for node in tree.body if is_package and isinstance(node, ast.FunctionDef)
                   and node.name == "__getattr__"]
    lazy_calls = {id(n) for fn in lazy_bodies for n in ast.walk(fn)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_import_module(node.func) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            yield node.args[0].value, id(node) in lazy_calls


def _resolve(name: str, modules: Iterable[str]) -> str | None:
    """The longest known module that `name` is or lies in (wisv.timing.latency.t_fh -> wisv.timing.latency), else
    None."""
    known = set(modules)
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return None


def imports_of(source: str, module: str, is_package: bool, modules: Iterable[str]) -> list[Edge]:
    """The project modules that `module` (whose text is `source`) imports."""
    known = set(modules)
    edges: set[Edge] = set()
    tree = ast.parse(source)
    for name, lazy in _by_name(tree, is_package):
        dst = _resolve(name, known)
        if dst is not None and dst != module:
            edges.add(Edge(module, dst, False, by_name=True, lazy=lazy))
    for node, typing_only in _raw_imports(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            dst = _resolve(target, known)
            if dst is not None and dst != module:
                edges.add(Edge(module, dst, typing_only))
    return sorted(edges, key=lambda e: (e.dst, e.typing_only, e.by_name, e.lazy))


def build_graph(root: Path) -> list[Edge]:
    """All project-internal import edges of the tree at `root`."""
    modules = find_modules(root)
    return [e for name, path in modules.items()
            for e in imports_of(path.read_text(), name, path.name == "__init__.py", modules)]


def upward_imports(edges: Iterable[Edge]) -> list[Edge]:
    """Edges into another room of the same or a higher rank."""
    return [e for e in edges
            if room(e.dst) != room(e.src) and RANK[room(e.dst)] >= RANK[room(e.src)]]


def hidden_imports(edges: Iterable[Edge]) -> list[Edge]:
    """Project modules imported by name through importlib outside a package's lazy ``__getattr__``."""
    return [e for e in edges if e.by_name and not e.lazy]


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node, or a self-loop (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(graph) | {d for ds in graph.values() for d in ds})
    succ = {n: sorted(set(graph.get(n, ()))) for n in nodes}
    for start in nodes:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(succ[node]):
                work.append((node, i + 1))
                nxt = succ[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1 or node in succ[node]:
                    found.append(sorted(comp))
    return sorted(found)


def module_graph(edges: Iterable[Edge], runtime_only: bool = False) -> dict[str, set[str]]:
    """Module -> the modules it imports (``runtime_only``: leave TYPE_CHECKING imports out)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if not (runtime_only and e.typing_only):
            graph.setdefault(e.src, set()).add(e.dst)
    return graph


def package_of(module: str, packages: set[str]) -> str:
    """The package that holds `module` (testbed.sim.cli -> testbed.sim; a package is its own)."""
    return module if module in packages else module.rsplit(".", 1)[0]


def package_graph(edges: Iterable[Edge], root: Path) -> dict[str, set[str]]:
    """Edges between packages (directories with an __init__.py), self-edges dropped."""
    packages = {module_name(p, root) for pkg in PACKAGES for p in (root / pkg).rglob("__init__.py")}
    graph: dict[str, set[str]] = {}
    for e in edges:
        src, dst = package_of(e.src, packages), package_of(e.dst, packages)
        graph.setdefault(src, set())
        if src != dst:
            graph[src].add(dst)
    return graph


def _typing_note(cycle: list[str], typing: set[tuple[str, str]]) -> str:
    """' (through TYPE_CHECKING: a -> b)' when some of the cycle's edges are TYPE_CHECKING imports, else ''."""
    inner = sorted(f"{a} -> {b}" for a, b in typing if a in cycle and b in cycle)
    return f" (through TYPE_CHECKING: {', '.join(inner)})" if inner else ""


def report(root: Path) -> tuple[list[str], bool]:
    """The printed lines and whether the tree is clean."""
    edges = build_graph(root)
    lines = ["package graph (package -> packages it imports):"]
    pkg_graph = package_graph(edges, root)
    lines += [f"  {p} -> {', '.join(sorted(ds)) or '-'}" for p, ds in sorted(pkg_graph.items())]
    up = upward_imports(edges)
    mod_cycles = cycles(module_graph(edges))
    lines.append(f"upward imports: {len(up)}")
    lines += [f"  {e.src} -> {e.dst}{' (TYPE_CHECKING)' if e.typing_only else ''}" for e in up]
    typing = {(e.src, e.dst) for e in edges if e.typing_only}
    lines.append(f"module cycles (TYPE_CHECKING imports counted: {len(typing)}): {len(mod_cycles)}")
    lines += [f"  {' <-> '.join(c)}{_typing_note(c, typing)}" for c in mod_cycles]
    pkg_cycles = cycles(pkg_graph)
    lines.append(f"package cycles: {len(pkg_cycles)}")
    lines += [f"  {' <-> '.join(c)}" for c in pkg_cycles]
    hidden = hidden_imports(edges)
    lazy = sum(e.lazy for e in edges)
    lines.append(f"importlib imports by name outside a package's lazy __getattr__ ({lazy} inside one): {len(hidden)}")
    lines += [f"  {e.src} -> {e.dst}" for e in hidden]
    lines.append(f"{len(find_modules(root))} modules, {len(edges)} project imports")
    return lines, not up and not mod_cycles and not pkg_cycles and not hidden


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.house.import_graph", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    args = config.parse(GraphConfig, argv, config.add_flags(ap, GraphConfig))
    lines, clean = report(Path(args.root))
    print("\n".join(lines))
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())

"""Import-graph check: the real tree is clean; a hand-built tree with an upward import and a cycle is caught."""
from pathlib import Path

import pytest

from scripts.house.import_graph import Edge, build_graph, cycles, imports_of, main, report, upward_imports

ROOT = Path(__file__).resolve().parents[2]


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.slow
def test_the_real_tree_has_no_upward_import_and_no_cycle():
    edges = build_graph(ROOT)
    assert any(e.src == "wisv.timing.roundtime" and e.dst == "wisv.timing.latency" for e in edges)
    lines, clean = report(ROOT)
    assert clean, "\n".join(lines)
    assert main(["--root", str(ROOT)]) == 0


def test_imports_resolve_relative_from_and_nested_names():
    modules = ["wisv", "wisv.a", "wisv.b", "wisv.sub", "wisv.sub.c"]
    src = "from . import b\nfrom .sub.c import f\nimport numpy\ndef g():\n    from wisv.a import h\n"
    assert {e.dst for e in imports_of(src, "wisv.a", False, modules)} == {"wisv.b", "wisv.sub.c"}
    assert {e.dst for e in imports_of("from .c import x\n", "wisv.sub", True, modules)} == {"wisv.sub.c"}
    assert [e.dst for e in imports_of("from wisv import b, name\n", "wisv.a", False, modules)] == ["wisv", "wisv.b"]


def test_a_bad_tree_fails_with_each_violation_named(tmp_path, capsys):
    pkgs = {f"{p}/__init__.py": "" for p in ("channel", "wisv", "protocols", "labeling", "testbed", "scripts")}
    write(tmp_path, {**pkgs,
                     "channel/low.py": "def f():\n    from wisv import core\n",  # upward, in a function
                     "wisv/core.py": "import wisv.loop\n",
                     "wisv/loop.py": "from wisv.core import x\n",  # wisv.core <-> wisv.loop
                     "wisv/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import wisv.hint\n",
                     "wisv/hint.py": "import wisv.typed\n",  # a cycle only through TYPE_CHECKING: one too
                     "protocols/p.py": "import labeling.q\n",  # siblings apart
                     "labeling/q.py": "import channel.low\n"})
    edges = build_graph(tmp_path)
    assert {(e.src, e.dst) for e in upward_imports(edges)} == {("channel.low", "wisv.core"),
                                                              ("protocols.p", "labeling.q")}
    assert Edge("wisv.typed", "wisv.hint", True) in edges
    lines, clean = report(tmp_path)
    assert not clean
    assert main(["--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert ("module cycles (TYPE_CHECKING imports counted: 1): 2\n  wisv.core <-> wisv.loop\n"
            "  wisv.hint <-> wisv.typed (through TYPE_CHECKING: wisv.typed -> wisv.hint)\n") in out
    assert "upward imports: 2" in out


def test_a_circle_through_type_checking_alone_fails(tmp_path, capsys):
    """The interface imports an implementation's request type; the implementation names the interface only for
    type hints: still a circle (the interface depends on one of its implementations)."""
    write(tmp_path, {"wisv/__init__.py": "", "wisv/serving/__init__.py": "",
                     "wisv/serving/engine.py": "from wisv.serving.impl import Request\n",
                     "wisv/serving/impl.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                             "    from wisv.serving.engine import Engine\nclass Request: ...\n"})
    assert main(["--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "module cycles (TYPE_CHECKING imports counted: 1): 1\n" in out
    assert "wisv.serving.engine <-> wisv.serving.impl (through TYPE_CHECKING: wisv.serving.impl -> " \
           "wisv.serving.engine)" in out


def test_cycles_finds_loops_and_self_loops_only():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}, "b": {"c"}}) == [["a"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}}) == []


def test_rooms_inside_wisv_are_checked_by_rank(tmp_path):
    pkgs = {f"{p}/__init__.py": "" for p in ("config", "channel", "wisv", "wisv/tasks", "wisv/records",
                                             "wisv/timing", "wisv/decoding", "wisv/serving")}
    write(tmp_path, {**pkgs,
                     "config/fields.py": "import channel.csi\n",  # the bottom room imports a higher one
                     "channel/csi.py": "import config.fields\n",
                     "wisv/tasks/qa.py": "from wisv.decoding.loop import run\n",  # upward: tasks below decoding
                     "wisv/records/rows.py": "import wisv.tasks.qa\n",  # same rank, another room
                     "wisv/decoding/loop.py": "import wisv.records.rows\nimport wisv.tasks.qa\nimport wisv.timing.t\n",
                     "wisv/timing/t.py": "import channel.csi\n",
                     "wisv/serving/batch.py": "import wisv.decoding.loop\n"})  # downward: fine
    up = {(e.src, e.dst) for e in upward_imports(build_graph(tmp_path))}
    assert up == {("config.fields", "channel.csi"), ("wisv.tasks.qa", "wisv.decoding.loop"),
                  ("wisv.records.rows", "wisv.tasks.qa")}


def test_importlib_with_a_literal_is_an_edge_and_an_error_outside_a_lazy_getattr(tmp_path, capsys):
    """channel.trace reached channel.cli by name; channel.cli imports channel.trace: a cycle the ast of `import`
    statements alone does not see, and a by-name import, both reported."""
    write(tmp_path, {"channel/__init__.py": "",
                     "channel/trace.py": "import importlib\nif __name__ == '__main__':\n"
                                         "    importlib.import_module('channel.cli').main()\n",
                     "channel/cli.py": "from channel.trace import load\n"})
    edges = build_graph(tmp_path)
    assert Edge("channel.trace", "channel.cli", False, by_name=True) in edges
    assert main(["--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "module cycles (TYPE_CHECKING imports counted: 0): 1\n  channel.cli <-> channel.trace\n" in out
    assert ("importlib imports by name outside a package's lazy __getattr__ (0 inside one): 1\n"
            "  channel.trace -> channel.cli\n") in out


def test_a_packages_lazy_getattr_may_import_by_name(tmp_path, capsys):
    """`from importlib import import_module` counts too; in the package's module-level __getattr__ it is allowed
    (still an edge), in any other function of the package, or in a plain module's __getattr__, it is not."""
    write(tmp_path, {"wisv/__init__.py": "import importlib\ndef __getattr__(name):\n"
                                         "    return getattr(importlib.import_module('wisv.loader'), name)\n",
                     "wisv/loader.py": "X = 1\n"})
    assert main(["--root", str(tmp_path)]) == 0
    assert "(1 inside one): 0\n" in capsys.readouterr().out
    assert Edge("wisv", "wisv.loader", False, by_name=True, lazy=True) in build_graph(tmp_path)
    write(tmp_path, {"wisv/__init__.py": "from importlib import import_module\ndef load():\n"
                                         "    return import_module('wisv.loader')\n",
                     "wisv/other.py": "import importlib\ndef __getattr__(name):\n"
                                      "    return importlib.import_module('wisv.loader')\n"})
    assert main(["--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "(0 inside one): 2\n  wisv -> wisv.loader\n  wisv.other -> wisv.loader\n" in out
    assert not [e for e in build_graph(tmp_path) if e.dst == "importlib"]  # a module outside the project: no edge


def test_a_package_cycle_is_an_error(tmp_path, capsys):
    """scripts.tool -> scripts.sub.a and scripts.sub.b -> scripts.shapes: no module cycle, but the packages scripts
    and scripts.sub import each other."""
    write(tmp_path, {"scripts/__init__.py": "", "scripts/sub/__init__.py": "",
                     "scripts/tool.py": "from scripts.sub import a\n",
                     "scripts/shapes.py": "SHAPE = 1\n",
                     "scripts/sub/a.py": "from scripts.sub.b import f\n",
                     "scripts/sub/b.py": "from scripts.shapes import SHAPE\n"})
    lines, clean = report(tmp_path)
    assert not clean
    assert "module cycles (TYPE_CHECKING imports counted: 0): 0" in lines
    assert lines[lines.index("package cycles: 1") + 1] == "  scripts <-> scripts.sub"
    assert main(["--root", str(tmp_path)]) == 1
    (tmp_path / "scripts/sub/b.py").write_text("SHAPE = 1\n")  # the shapes move down into the subpackage
    assert main(["--root", str(tmp_path)]) == 0
    assert "package cycles: 0\n" in capsys.readouterr().out

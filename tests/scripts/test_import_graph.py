"""Import-graph check: the real tree is clean; a hand-built tree with an upward import and a cycle is caught."""
from pathlib import Path

from scripts.import_graph import Edge, build_graph, cycles, imports_of, main, report, upward_imports

ROOT = Path(__file__).resolve().parents[2]


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


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

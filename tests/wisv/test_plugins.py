"""wisv.plugins and the registries it extends: each entry point's object is added, a broken plugin is one line on
stderr naming it and why, and the built-ins stay as they were.  The entry points are planted by replacing the loader's
source (``plugins.entry_points``); tests/examples/test_plugin.py pip-installs real ones."""
from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
import torch

from wisv import pairs, plugins
from wisv.head import store
from wisv.head.policy import Kind
from wisv.timing import protodesc

PLANTED = '''
from wisv.timing.protodesc import EDGE_INPUTS, ProtocolDesc
NEW = ProtocolDesc(name="planted", rule="wisv", head_inputs=EDGE_INPUTS)
TWO = [ProtocolDesc(name="planted-a", rule="greedy"), ProtocolDesc(name="planted-b", rule="greedy")]
EF_AGAIN = ProtocolDesc(name="ef", rule="greedy")
NOT_A_DESC = 42
'''


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A module of plugin objects on sys.path; the loader reporting afresh; the registries' tables as copies."""
    (tmp_path / "planted_plugin.py").write_text(PLANTED)
    (tmp_path / "planted_broken.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "QUIET", False)
    monkeypatch.setattr(plugins, "BROKEN", [])
    monkeypatch.delenv(plugins.REPORTED_ENV, raising=False)
    monkeypatch.setattr(protodesc, "DESCRIPTIONS", dict(protodesc.DESCRIPTIONS))
    monkeypatch.setattr(store, "KINDS", dict(store.KINDS))
    monkeypatch.setattr(pairs, "PLUGIN_PAIRS", {})
    yield tmp_path
    for name in ("planted_plugin", "planted_broken"):
        sys.modules.pop(name, None)


def plant(monkeypatch: pytest.MonkeyPatch, group: str, **eps: str) -> None:
    """Make the loader see these entry points (name -> 'module:attr') in ``group``."""
    listed = [metadata.EntryPoint(name, value, group) for name, value in eps.items()]
    monkeypatch.setattr(plugins, "entry_points", lambda g: listed if g == group else [])


def test_protocols_are_added_and_a_broken_plugin_is_one_line(planted, monkeypatch, capsys) -> None:
    plant(monkeypatch, plugins.PROTOCOLS, new="planted_plugin:NEW", two="planted_plugin:TWO",
          dup="planted_plugin:EF_AGAIN", gone="planted_broken:X", odd="planted_plugin:NOT_A_DESC")
    added = plugins.load(plugins.PROTOCOLS, protodesc.add_plugin)
    assert added == ["new", "two"]
    assert protodesc.describe("planted").head and protodesc.describe("planted-b").rule == "greedy"
    assert protodesc.describe("ef").rule == "wisv"  # the built-in is untouched
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and all(line.startswith("wisv-testbed: skipped plugin ") for line in lines)
    assert "dup = planted_plugin:EF_AGAIN" in lines[0] and "protocol 'ef' already exists" in lines[0]
    assert "gone = planted_broken:X" in lines[1] and "ModuleNotFoundError" in lines[1] \
        and "no_such_module_anywhere" in lines[1]
    assert "odd" in lines[2] and "not a ProtocolDesc" in lines[2]
    assert plugins.BROKEN == lines


def test_a_child_process_records_but_does_not_repeat_the_line(planted, monkeypatch, capsys) -> None:
    plant(monkeypatch, plugins.PROTOCOLS, gone="planted_broken:X")
    monkeypatch.setattr(plugins, "QUIET", True)  # as in a process whose parent has reported already
    assert plugins.load(plugins.PROTOCOLS, protodesc.add_plugin) == []
    assert capsys.readouterr().err == "" and len(plugins.BROKEN) == 1


def test_the_reserved_name_all_is_refused(planted) -> None:
    with pytest.raises(ValueError, match="'all' already exists"):
        protodesc.add_plugin("x", protodesc.ProtocolDesc(name="all", rule="greedy"))


class NoWeights:
    """A minimal stored policy kind with nothing to train (as the example plugin's topk judge)."""

    inputs, tau, hidden_layer, d_draft, d_target, flops_dims, model = ("edge",), 0.25, -1, None, None, (1, 0), None

    def __init__(self, raw: dict):
        self.cfg, self.kind = raw, raw["kind"]

    @classmethod
    def from_config(cls, raw: dict, where: str) -> NoWeights:
        return cls(raw)

    def threshold(self, tau, csi):
        return tau

    def reject_probs(self, h_draft, h_target, positions, csi=None, edge=None):
        return torch.ones(len(positions))


class Weighted(NoWeights):
    model = torch.nn.Linear(1, 1)


def test_policy_kinds_are_added_and_taken_names_refused(planted, monkeypatch) -> None:
    monkeypatch.setattr(store, "PLUGIN_KINDS", ("plain", "weighted"))
    store.add_plugin("plain", Kind(NoWeights, "judge"))
    store.add_plugin("weighted", Kind(Weighted, "judge"))
    for taken in ("linear", "head", "none", "default", "plain"):
        with pytest.raises(ValueError, match=f"policy '{taken}' already exists"):
            store.add_plugin(taken, Kind(NoWeights, "judge"))
    with pytest.raises(TypeError, match="not a wisv.head.policy.Kind"):
        store.add_plugin("bare", NoWeights)
    policy = store.named_policy("plain")
    assert isinstance(policy, NoWeights) and policy.kind == "plain"
    assert store.named_policy("linear") is None  # a built-in kind is no --head NAME
    with pytest.raises(ValueError, match="needs trained weights"):
        store.named_policy("weighted")


def test_a_stored_dir_of_a_plugin_kind_loads(planted, monkeypatch, tmp_path) -> None:
    store.add_plugin("plain", Kind(NoWeights, "judge"))
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "judge.json").write_text('{"kind": "plain", "name": "j"}')
    policy, tau = store.load_policy_dir(tmp_path / "j")
    assert isinstance(policy, NoWeights) and tau == 0.25


def test_pairs_are_added_and_resolve(planted, monkeypatch, tmp_path) -> None:
    d, t = tmp_path / "d", tmp_path / "t"
    plugin = pairs.PluginPair(resolve=lambda cache: (d, t), heads={"h": tmp_path / "h"}, default_head="h")
    pairs.add_plugin("copy", plugin)
    monkeypatch.setattr(pairs, "PAIR_NAMES", (*pairs.BUILTIN_PAIRS, "copy"))
    with pytest.raises(ValueError, match="pair 'toy' already exists"):
        pairs.add_plugin("toy", plugin)
    with pytest.raises(ValueError, match="pair 'copy' already exists"):
        pairs.add_plugin("copy", plugin)
    assert pairs.resolve_pair("copy") == pairs.PairPaths("copy", d, t)
    assert pairs.pair_of_target(t) == "copy" and pairs.pair_of_target(None) == "toy"
    assert pairs.pair_heads("copy") == {"h": tmp_path / "h"} and pairs.pair_default_head("copy") == tmp_path / "h"
    assert pairs.default_prompts_file("copy") is None
    assert pairs.resolve_pair("toy").name == "toy"  # the built-ins as before


def test_no_plugins_installed_leaves_the_built_ins() -> None:
    """This checkout's own environment: whatever is installed, the built-ins are all there and first."""
    assert tuple(protodesc.DESCRIPTIONS)[:7] == ("greedy", "reject", "fh", "sh", "ef", "auto", "tree")
    assert pairs.PAIR_NAMES[:2] == ("toy", "smollm2")
    assert {"head", "linear", "fly", "nll-margin"} <= set(store.KINDS)

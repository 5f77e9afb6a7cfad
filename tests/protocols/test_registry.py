"""The registry is the one list of protocol names: light to import, and everyone else's lists come from it."""
from __future__ import annotations

import subprocess
import sys

from protocols.registry import ALL_PROTOCOLS, PROTOCOLS, ROUND_PROTOCOLS, WISV_PROTOCOLS
from wisv.timing.protodesc import alone_names


def test_names_in_order_and_the_derived_lists():
    assert ALL_PROTOCOLS == ("greedy", "reject", "fh", "sh", "ef", "auto", "tree", "server", "device")  # --protocol
    #   all's order: the speculative ones, then the two that generate alone
    assert ROUND_PROTOCOLS == ("greedy", "reject", "fh", "sh", "ef", "tree") and WISV_PROTOCOLS == ("fh", "sh", "ef")
    assert all(PROTOCOLS[n].rule == "wisv" for n in WISV_PROTOCOLS)


def test_importing_the_names_loads_no_torch():
    code = "import sys, protocols.registry as r; assert r.ALL_PROTOCOLS; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_other_lists_ask_the_registry():
    from scripts.bench import link as bench_link
    from testbed.live.orchestrate import run
    from testbed.sim import cli
    assert run.ALL_PROTOCOLS is ALL_PROTOCOLS and bench_link.ALL_PROTOCOLS is ALL_PROTOCOLS
    assert cli.METHODS == ROUND_PROTOCOLS + alone_names()  # the rounds' protocols, then the models alone
    # all: every protocol the edge's head can serve; the toy pair's default head reads drafter hidden states (no ef)
    assert run.RunConfig(protocol="all").protocols() == [p for p in ALL_PROTOCOLS if p != "ef"]
    assert run.RunConfig(protocol="all", edge=run.ServeConfig(head="none")).protocols() == list(ALL_PROTOCOLS)


def test_the_speedup_baseline_is_the_first_protocol_whose_target_generates_alone():
    from protocols.registry import speedup_baseline
    assert speedup_baseline(["greedy", "device", "server", "tree"]) == "server"
    assert speedup_baseline(["greedy", "device"]) is None and speedup_baseline([]) is None


def test_the_time_model_covers_every_round_protocol():
    """wisv sits below protocols and keeps its own tuple for the protocols it models: it must match."""
    from wisv.timing import roundtime
    assert roundtime.PROTOCOLS == ROUND_PROTOCOLS and roundtime.WISV_PROTOCOLS == WISV_PROTOCOLS


def test_each_protocol_names_the_class_that_runs_its_round():
    """A protocol is its registry class; where a round's shape differs, that class names its round class."""
    from protocols.rounds import ChainRounds
    from protocols.tree import TreeRounds
    shapes = {n: type(PROTOCOLS[n]().rounds()) for n in ALL_PROTOCOLS}
    assert shapes.pop("tree") is TreeRounds and set(shapes.values()) == {ChainRounds}


def test_each_protocol_is_its_description_and_every_list_derives_from_them():
    """The classes read their names, rules and uploads off the descriptions (wisv.timing.protodesc), as do the lists."""
    from protocols.registry import HIDDEN_PROTOCOLS, servable
    from wisv.timing.protodesc import DESCRIPTIONS
    assert all(PROTOCOLS[n].desc is DESCRIPTIONS[n] and PROTOCOLS[n].name == PROTOCOLS[n]().name == n
               for n in ALL_PROTOCOLS)
    assert [n for n in ALL_PROTOCOLS if PROTOCOLS[n].samples] == ["reject"]
    assert HIDDEN_PROTOCOLS == servable(True) == ("fh", "sh") and servable(False) == ("ef",)
    assert [n for n in ROUND_PROTOCOLS if PROTOCOLS[n]().query([1, 3])] == ["sh"]


def test_a_new_description_is_a_protocol_with_its_uplink_query_and_round_class():
    """Adding a chain or tree protocol is one description: its class uploads, queries and runs rounds by it."""
    import numpy as np
    import torch

    from protocols.registry import protocol_class
    from protocols.rounds import ChainRounds
    from protocols.tree import TreeRounds
    from wisv.decoding.sessions import Draft
    from wisv.timing.protodesc import ProtocolDesc
    draft = Draft([5, 6], torch.ones(2, 4), torch.full((2, 3), 1 / 3), parents=[-1, 0])
    both = protocol_class(ProtocolDesc(name="fh-sh", rule="wisv", uplink=("ids", "features", "hidden"),
                                       hidden_query=True, head_inputs=("h_draft",)))()
    up = both.uplink(draft)
    assert (both.name, both.rule, sorted(up)) == ("fh-sh", "wisv", ["hidden", "tokens"])
    assert up["hidden"].dtype == np.float16 and up["hidden"].shape == (2, 4) and both.query([0, 1]) == [0, 1]
    assert type(both.rounds()) is ChainRounds
    wide = protocol_class(ProtocolDesc(name="wide-tree", rule="greedy", uplink=("ids", "parents", "probs"), tree=True,
                                       samples=True))()
    assert sorted(wide.uplink(draft)) == ["parents", "probs", "tokens"] and wide.samples and wide.query([1]) == []
    assert type(wide.rounds()) is TreeRounds


def test_what_a_protocol_asks_of_the_engine_decides_whether_the_edge_refuses_it():
    """Only a protocol whose description asks for "trees" (tree) is refused by an engine that verifies no trees."""
    from protocols.tree import TreeRounds

    class NoTrees:
        tree_refusal = "engine 'x' takes no draft trees"

    class Trees:
        def verify_tree(self, tokens: list[int], parents: list[int]) -> None: ...

    asks = {n: PROTOCOLS[n].desc.engine for n in ALL_PROTOCOLS}
    assert {n for n, a in asks.items() if a} == {"tree"}
    shape = PROTOCOLS["tree"]().rounds()
    assert isinstance(shape, TreeRounds) and shape.refusal(NoTrees(), asks["tree"]) == "engine 'x' takes no draft trees"
    assert shape.refusal(Trees(), asks["tree"]) is None
    assert all(PROTOCOLS[n]().rounds().refusal(NoTrees(), asks[n]) is None for n in ALL_PROTOCOLS if n != "tree")

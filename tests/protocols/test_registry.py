"""The registry is the one list of protocol names: light to import, and everyone else's lists come from it."""
from __future__ import annotations

import subprocess
import sys

from protocols.registry import ALL_PROTOCOLS, PROTOCOLS, ROUND_PROTOCOLS, WISV_PROTOCOLS


def test_names_in_order_and_the_derived_lists():
    assert ALL_PROTOCOLS == ("greedy", "reject", "fh", "sh", "ef", "auto", "tree")  # testbed.run --protocol all's order
    assert ROUND_PROTOCOLS == ("greedy", "reject", "fh", "sh", "ef", "tree") and WISV_PROTOCOLS == ("fh", "sh", "ef")
    assert all(PROTOCOLS[n].rule == "wisv" for n in WISV_PROTOCOLS)


def test_importing_the_names_loads_no_torch():
    code = "import sys, protocols.registry as r; assert r.ALL_PROTOCOLS; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_other_lists_ask_the_registry():
    from scripts import bench_link
    from testbed.live.orchestrate import run
    from testbed.sim import cli
    assert run.ALL_PROTOCOLS is ALL_PROTOCOLS and bench_link.ALL_PROTOCOLS is ALL_PROTOCOLS
    assert cli.METHODS is ROUND_PROTOCOLS
    # all: every protocol the edge's head can serve; the toy pair's default head reads drafter hidden states (no ef)
    assert run.RunConfig(protocol="all").protocols() == [p for p in ALL_PROTOCOLS if p != "ef"]
    assert run.RunConfig(protocol="all", edge=run.ServeConfig(head="none")).protocols() == list(ALL_PROTOCOLS)


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

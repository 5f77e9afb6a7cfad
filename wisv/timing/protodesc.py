"""What a protocol is, as pure data: its description, and the payload and exchange model that follows from it.

A protocol is this description plus the round class that runs it (protocols/registry.py binds the two: a chain's
round, protocols/rounds.py, or a tree's, protocols/tree.py).  Adding a built-in protocol of either shape is one entry
of ``DESCRIPTIONS`` below; a package adds one through the ``wisv_testbed.protocols`` entry point, which this
module's import loads last (wisv.plugins; docs/extend.md).  The
description lives here, below everything that reads it: the latency model (wisv.timing.roundtime), the simulator,
the payload model of the GPU check and of scale_shapes, the labeling peers, the batching edge and the CLIs' choices
read its fields instead of comparing names.  It is plain Python (no numpy, no torch).

    desc = describe("sh")
    uplink_bits(desc, k, pb), downlink_bits(desc, k, pb), exchanges(desc, m)

Every bit count of a payload is a whole number (ids, features, fp16 elements, indices, measured overheads), so the
per-position sum below equals the paper's formulas (wisv.timing.latency: s_greedy, s_fh, s_reject, s_tree, s_sh1)
exactly, whatever the order of the additions; tests/wisv/timing/test_protodesc.py checks it.
"""
from __future__ import annotations

from dataclasses import dataclass

from wisv import plugins
from wisv.timing.latency import PayloadBits

RULES = ("greedy", "sampling", "wisv")  # acceptance at the edge (wisv.decoding.speculative.Rule)
POSITION_BITS = {  # what a DRAFT may carry per drafted position -> its bits under a packing
    "ids": lambda pb: pb.b_tok,  # the token id
    "features": lambda pb: pb.b_feat,  # a chain's draft features (0 bits when they are not sent)
    "hidden": lambda pb: pb.s_h,  # the drafter's hidden state (eq. 3)
    "probs": lambda pb: pb.vocab * pb.b_h,  # the drafter's full-vocabulary distribution
    "parents": lambda pb: pb.b_idx,  # the node's parent index in a draft tree
}
EDGE_INPUTS = ("edge", "h_after", "h_target", "csi")  # what any WISV round gives a head: the edge's pass, the CSI
DRAFTER_INPUTS = ("h_draft",)  # what only an upload gives a head: the drafter's hidden states
ENGINE_ASKS = ("trees",)  # what a protocol may ask of the edge's engine beyond verifying a chain
GENERATORS = ("pair", "target", "drafter")  # who generates the output: the drafter drafts and the target verifies
#   (speculative decoding), the edge's target alone (server-only), or the UE's drafter alone (on-device)


@dataclass(frozen=True)
class ProtocolDesc:
    """One protocol, as data (one per protocol; ``DESCRIPTIONS`` below holds the built-ins)."""

    name: str  # what a DRAFT, the CLIs and the records call it
    rule: str  # acceptance at the edge (RULES); a tree accepts greedily along its longest agreeing root path
    uplink: tuple[str, ...] = ("ids", "features")  # what a DRAFT carries per drafted position (POSITION_BITS)
    tree: bool = False  # drafts a token tree (ids + parent indices) instead of a chain; the VERDICT names a path
    hidden_query: bool = False  # a second round trip: HIDDEN_REQ for the mismatch positions -> HIDDEN (sh)
    head_inputs: tuple[str, ...] = ()  # what a decision head may read in its rounds (() for a rule without a head)
    samples: bool = False  # the drafter samples (and uploads q) instead of taking argmax
    engine: tuple[str, ...] = ()  # what it asks of the edge's engine (ENGINE_ASKS)
    chooses: bool = False  # picks another protocol before each round (auto); a DRAFT never names it
    priced_as: str = ""  # chooses: the protocol the time model prices a round as before it is chosen
    generates: str = "pair"  # who generates (GENERATORS); target: the edge streams the target's greedy output in
    #   chunks, the UE drafts nothing; drafter: the UE's drafter generates greedily, no round with the edge

    def __post_init__(self) -> None:
        bad = [f for f in self.uplink if f not in POSITION_BITS] + [e for e in self.engine if e not in ENGINE_ASKS]
        ids = ("ids" in self.uplink) == self.speculative  # a draft's ids go up, and only a draft's
        if self.rule not in RULES or self.generates not in GENERATORS or bad or not ids:
            raise ValueError(f"protocol {self.name!r}: rule {self.rule!r} (one of {RULES}), generates "
                             f"{self.generates!r} ({GENERATORS}), uplink {self.uplink} (ids and {tuple(POSITION_BITS)}"
                             f" when it drafts, else none), engine {self.engine} ({ENGINE_ASKS}): bad {bad}")
        if self.tree != ("parents" in self.uplink) or self.chooses != bool(self.priced_as):
            raise ValueError(f"protocol {self.name!r}: a tree uploads parents (and only a tree); a chooser names "
                             f"what it is priced as")
        alone = (self.rule, self.hidden_query, self.head_inputs, self.samples, self.engine, self.chooses)
        if not self.speculative and alone != ("greedy", False, (), False, (), False):
            raise ValueError(f"protocol {self.name!r}: a model generating alone decodes greedily, with no head, "
                             f"query, sampling, engine ask or choice")

    @property
    def speculative(self) -> bool:
        """The drafter drafts and the target verifies (every round is a DRAFT and its VERDICT)."""
        return self.generates == "pair"

    @property
    def edge_rounds(self) -> bool:
        """Its rounds go to the edge (all but on-device generation)."""
        return self.generates != "drafter"

    @property
    def lossless(self) -> bool:
        """Its output is the target's greedy output (greedy acceptance, or the target generating alone)."""
        return self.rule == "greedy" and self.generates != "drafter"

    @property
    def head(self) -> bool:
        """The edge's decision head decides its mismatches (the WISV protocols)."""
        return self.rule == "wisv"

    @property
    def uploads_hidden(self) -> bool:
        """It uploads the drafter's hidden states (with the DRAFT, or after HIDDEN_REQ)."""
        return "hidden" in self.uplink or self.hidden_query

    def serves(self, inputs: tuple[str, ...]) -> bool:
        """A head reading ``inputs`` can decide its rounds: every drafter input it reads is uploaded (a protocol
        that runs no head serves any)."""
        return not self.head or all(i in self.head_inputs for i in inputs if i in DRAFTER_INPUTS)


def uplink_bits(d: ProtocolDesc, k: int, pb: PayloadBits) -> float:
    """A DRAFT of ``k`` drafted positions: what each carries, plus the uplink overhead (s_greedy, s_fh, s_reject,
    s_tree, SH's s_sh1); a stream's request (server-only: no position) is the overhead alone; on-device, nothing."""
    if not d.edge_rounds:
        return 0.0
    return k * sum(POSITION_BITS[f](pb) for f in d.uplink) + pb.o_up


def downlink_bits(d: ProtocolDesc, k: int, pb: PayloadBits) -> float:
    """The VERDICT: a chain's rejected index and next token (eq. 4); a tree's next token and its accepted path
    (at most ``k`` node indices, charged as k: s_tree_fb); plus the target features a feature drafter asked for
    (``pb.tf_bits``, 0 when none).  Server-only: a chunk of ``k`` token ids; on-device: nothing."""
    if not d.speculative:
        return k * pb.b_tok + pb.o_dn if d.edge_rounds else 0.0
    if d.tree:
        return pb.b_tok + k * pb.b_idx + pb.tf_bits + pb.o_dn
    return pb.s_fb + pb.tf_bits + pb.o_dn


def exchanges(d: ProtocolDesc, m: float) -> int:
    """Request/reply exchanges of one round: 2 when it queries hidden states at ``m`` > 0 positions, 0 on-device,
    else 1."""
    return 2 if d.hidden_query and m > 0 else int(d.edge_rounds)


_HIDDEN = (*EDGE_INPUTS, *DRAFTER_INPUTS)
DESCRIPTIONS: dict[str, ProtocolDesc] = {d.name: d for d in (  # the built-ins, in testbed.run --protocol all's order
    # greedy SD: token ids only; accept up to the first mismatch
    ProtocolDesc(name="greedy", rule="greedy"),
    # speculative sampling: the drafter's full-vocabulary probabilities (fp16) go up too
    ProtocolDesc(name="reject", rule="sampling", uplink=("ids", "features", "probs"), samples=True),
    # WISV-FH: token ids plus the drafter's hidden states at all K positions, in one uplink
    ProtocolDesc(name="fh", rule="wisv", uplink=("ids", "features", "hidden"), head_inputs=_HIDDEN),
    # WISV-SH: token ids first; the edge then requests hidden states at the mismatch positions only
    ProtocolDesc(name="sh", rule="wisv", hidden_query=True, head_inputs=_HIDDEN),
    # WISV-EF: token ids only, as greedy; the edge's head reads its own verification pass (wisv/head/features.py)
    ProtocolDesc(name="ef", rule="wisv", head_inputs=EDGE_INPUTS),
    # picks fh, sh or ef before each round from the live CSI and what the edge's head reads (protocols/auto.py)
    ProtocolDesc(name="auto", rule="wisv", uplink=("ids", "features", "hidden"), head_inputs=_HIDDEN, chooses=True,
                 priced_as="fh"),
    # SpecEdge's tree drafting: a best-first tree (ids + parent indices), greedy acceptance of the longest agreeing
    # root path, which the VERDICT names (protocols/tree.py runs its round)
    ProtocolDesc(name="tree", rule="greedy", uplink=("ids", "parents"), tree=True, engine=("trees",)),
    # server-only: the UE asks once (GENERATE), the edge's target generates greedily alone and streams its tokens in
    # chunks (protocols/stream.py); the baseline every speculative protocol is measured against
    ProtocolDesc(name="server", rule="greedy", uplink=(), generates="target"),
    # on-device: the UE's drafter generates greedily alone, no round with the edge (lossy: its output is the drafter's)
    ProtocolDesc(name="device", rule="greedy", uplink=(), generates="drafter"),
)}


RESERVED = ("all",)  # names a protocol may not take (testbed.run --protocol all runs each in turn)


def register(d: ProtocolDesc) -> ProtocolDesc:
    """Add a protocol's description (one not built in); describing the same protocol twice is one entry."""
    if d.name in DESCRIPTIONS and DESCRIPTIONS[d.name] != d:
        raise ValueError(f"protocol {d.name!r} is already described")
    DESCRIPTIONS[d.name] = d
    return d


def describe(name: str) -> ProtocolDesc:
    """The description of the protocol ``name``, with a clear error listing the known ones."""
    try:
        return DESCRIPTIONS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; known: {tuple(DESCRIPTIONS)}") from None


def round_names() -> tuple[str, ...]:
    """The protocols a speculative round runs (a DRAFT may name): all that draft, but the choosers."""
    return tuple(n for n, d in DESCRIPTIONS.items() if d.speculative and not d.chooses)


def alone_names() -> tuple[str, ...]:
    """The protocols in which one model generates alone (server-only, on-device): priced per prompt by
    wisv.timing.alone, not per round."""
    return tuple(n for n, d in DESCRIPTIONS.items() if not d.speculative)


def servable(uploads_hidden: bool) -> tuple[str, ...]:
    """The round protocols a decision head can serve: those that upload the drafter's hidden states (fh, sh) for a head
    that reads them, else those that upload none (ef: cheaper, and all such a head needs)."""
    return tuple(n for n in round_names() if DESCRIPTIONS[n].head and DESCRIPTIONS[n].uploads_hidden == uploads_hidden)


def add_plugin(name: str, loaded: object) -> None:
    """Add what a ``wisv_testbed.protocols`` entry point loads (a ProtocolDesc or a list of them); a name that is
    already described or reserved is refused (wisv.plugins reports it and skips the plugin)."""
    descs = list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]
    bad = [d for d in descs if not isinstance(d, ProtocolDesc)]
    if bad:
        raise TypeError(f"entry point {name!r} loads {bad[0]!r}, not a ProtocolDesc (or a list of them)")
    taken = [d.name for d in descs if d.name in DESCRIPTIONS or d.name in RESERVED]
    if taken:
        raise ValueError(f"protocol {taken[0]!r} already exists")
    for d in descs:
        DESCRIPTIONS[d.name] = d


PLUGINS = plugins.load(plugins.PROTOCOLS, add_plugin)  # entry points that added protocols (wisv.plugins)

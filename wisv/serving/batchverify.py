"""Batched verification engine (edge): many sessions' blocks in one target forward, each on its own KV cache.

Each session keeps the committed sequence ``seq`` and a KV cache over a prefix of it (``cached_len``
tokens; after a commit it covers ``seq[:-1]``, as wisv.decoding.sessions.VerifySession).  A verification feeds
the uncached tail plus the draft, ``x_i = seq[cached_len:] + draft`` (one token plus K on a warm round,
the whole prompt plus K on a cold one).

Several requests run as **one** forward (a request with an uncached tail, e.g. a cold prompt, first
prefills that tail in a forward of its own, so that one long prompt does not pad every row of the batch
to its length).  The sessions' caches have different lengths, so they are
stacked *left-padded* to the longest (``C`` positions) and the new tokens *right-padded* to the longest
block (``N``): attention mask ``[B, C + N]`` marks the real cache entries and the real new tokens,
``position_ids`` continue each session's own positions (``cached_len_i + j``) and ``cache_position``
is ``C + j`` for all rows, so causality holds column-wise.  Cached keys carry their rotary phase
already, so left padding does not move them.  The stacked cache is allocated with room for the block, so
the forward writes the new keys in place, and each row's cache is then a view of its own positions (its
prefix plus its new tokens): one copy of each cached entry per batched round, as a batch of one pays in
transformers' concatenating cache.  The commit crops it to the accepted prefix.  A batch of one
skips the stacking and extends the session's cache in place.

``kv_reuse=False`` is the SLED-style baseline: no cache survives a round, every verification
recomputes the whole prefix.  Sessions idle past ``session_timeout_s`` are freed by ``sweep``.

The KV budget ``memory_budget_mb`` holds *before* a pass allocates: the pass's new cache positions are estimated
(``pass_tokens``, wisv/serving/kvbudget.py) and, while they do not fit beside the caches held, the least recently used
other sessions lose their caches (they are recomputed on their next request, so no state is lost); a batch of
one may drop its own cache too.  A pass that still cannot fit raises KVBudgetError before allocating anything.
A pass that fails midway drops its sessions' caches (a forward may have written some layers), never their state.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import DynamicLayer

from wisv.decoding.kvcache import crop_to, keep_positions
from wisv.decoding.sessions import Block, cached_forward
from wisv.decoding.siblings import sibling_inputs
from wisv.decoding.tree import node_mask, tree_positions, with_root
from wisv.head.features import SiblingRows
from wisv.serving.engine import EngineOptions, VerifyRequest
from wisv.serving.kvbudget import MB, KVShape, refusal
from wisv.serving.sessiontable import SessionTable


@dataclass
class EngineConfig:
    """Batched verifier settings."""

    kv_reuse: bool = True  # False: recompute the prefix every round (SLED baseline)
    session_timeout_s: float = 120.0  # idle sessions are freed after this long
    memory_budget_mb: float = 2048.0  # cap on all sessions' KV caches together (LRU caches dropped beyond)
    hidden_layer: int = -1  # hidden-state layer returned with each block (for the decision head)
    pad_id: int = 0  # token id fed at padded positions (masked out)


@dataclass
class SessionState:
    """One session on the engine."""

    seq: list[int]  # committed tokens (prompt + output)
    cache: DynamicCache = field(default_factory=DynamicCache)  # covers seq[:cached_len]
    cached_len: int = 0
    last_active: float = field(default_factory=time.monotonic)
    drafted: list[int] = field(default_factory=list)  # the block under verification

    def kv_bytes(self) -> int:
        """Bytes of the buffers this session's cache lives in (a batch's shared buffer counted whole)."""
        return sum(dict(_storages(self.cache)).values())



class BatchVerifier(SessionTable):
    """The target, its sessions, and batched verification over them (the ``transformers`` engine of
    wisv/serving/engine.py)."""

    name = "transformers"
    tree_refusal = ""  # trees are verified, each in a pass of its own (chains batch)

    def __init__(self, model: PreTrainedModel, cfg: EngineConfig | None = None):
        self.model, self.cfg = model, cfg or EngineConfig()
        self.sessions: dict[str, SessionState] = {}
        self.shape = KVShape.of(model)  # bytes per cached position, for the budget
        self.held_bound = 0  # bytes held after the last pass: caches only shrink between passes, so an upper bound

    @property
    def hidden_layer(self) -> int:
        """The hidden-state layer each block carries."""
        return self.cfg.hidden_layer

    @property
    def idle_timeout_s(self) -> float:
        return self.cfg.session_timeout_s

    def _new_session(self, prompt_ids: list[int]) -> SessionState:
        return SessionState(prompt_ids)

    @torch.no_grad()
    def verify(self, requests: list[VerifyRequest]) -> dict[str, Block]:
        """One target forward over every request; returns each session's Block (K + 1 positions).  Raises
        KVBudgetError, before allocating, when the pass cannot fit the budget."""
        if not requests:
            return {}
        states = self._take_drafts(requests)
        chains = [(st, r) for st, r in zip(states, requests) if r.parents is None]
        blocks = self._pass(*map(list, zip(*chains))) if chains else {}
        for st, r in zip(states, requests):  # a draft tree needs its own attention mask: a pass of its own
            if r.parents is not None:
                blocks |= self._pass([st], [r])
        return blocks

    def _pass(self, states: list[SessionState], requests: list[VerifyRequest]) -> dict[str, Block]:
        """One pass over the sessions (their drafts taken), within the KV budget."""
        for st in states:
            if not self.cfg.kv_reuse:
                st.cache, st.cached_len = DynamicCache(), 0
        self._make_room(states)
        try:
            blocks = self._verify(states, requests)
        except Exception:
            for st in states:  # a forward that failed midway may have extended some layers of a cache
                st.cache, st.cached_len = DynamicCache(), 0
            raise
        self._enforce_budget()
        return blocks

    def _verify(self, states: list[SessionState], requests: list[VerifyRequest]) -> dict[str, Block]:
        if requests[0].parents is not None:
            return {requests[0].sid: self._verify_tree(states[0], requests[0].parents)}
        if len(states) > 1:  # prefill uncached tails alone, so the batched pass pads only to K_max + 1
            for st in states:
                if len(st.seq) - st.cached_len > 1:
                    self._forward_one(st, st.seq[st.cached_len:-1])
        feeds = [st.seq[st.cached_len:] + st.drafted for st in states]  # x_i
        if len(states) == 1:
            outs = [self._forward_one(states[0], feeds[0])]
        else:
            outs = self._forward_batch(states, feeds)
        blocks = {}
        for r, (lg, hd), x in zip(requests, outs, feeds):
            k1 = len(r.draft) + 1  # the last K+1 fed positions score seq[-1]'s successor and the draft
            lg, hd = lg[len(x) - k1: len(x)], hd[len(x) - k1: len(x)]
            blocks[r.sid] = Block(lg.float(), hd.float(), lg.argmax(dim=-1))
        return blocks

    def _make_room(self, states: list[SessionState]) -> None:
        """Fit the coming pass into the budget before it allocates: drop other sessions' caches (least recently used
        first), then a lone session's own cache; KVBudgetError when even that is not enough."""
        budget = self.cfg.memory_budget_mb * MB

        def need() -> int:
            return self.shape.bytes_for(pass_tokens([(len(st.seq), st.cached_len, len(st.drafted)) for st in states]))

        if self.held_bound + need() <= budget:  # the common case: no scan of the caches
            return
        mine = {id(st) for st in states}
        for st in sorted(self.sessions.values(), key=lambda s: s.last_active):
            if self.memory_bytes() + need() <= budget:
                return
            if id(st) not in mine:
                st.cache, st.cached_len = DynamicCache(), 0
        if len(states) == 1 and self.memory_bytes() + need() > budget:
            states[0].cache, states[0].cached_len = DynamicCache(), 0
        err = refusal(need(), self.memory_bytes(), self.cfg.memory_budget_mb,
                      f"verifying {len(states)} session(s) ({sum(len(st.seq) for st in states)} positions)")
        if err is not None:
            raise err

    def _verify_tree(self, st: SessionState, parents: list[int]) -> Block:
        """One session's pass over its last committed token and a draft tree (as VerifySession.verify_tree): the
        uncached tail first, then the tree under its 4D attention mask, positions by depth."""
        if st.cached_len > len(st.seq) - 1:
            crop_to(st.cache, len(st.seq) - 1)
            st.cached_len = len(st.seq) - 1
        if len(st.seq) - st.cached_len > 1:
            self._forward_one(st, st.seq[st.cached_len:-1])
        rooted = with_root(parents)
        mask = node_mask(rooted, range(len(rooted)), range(len(rooted)), st.cached_len, self.model.dtype)
        logits, hidden = cached_forward(self.model, st.cache, st.cached_len, [st.seq[-1]] + st.drafted,
                                        self.cfg.hidden_layer, tree_positions(rooted, st.cached_len), mask)
        st.cached_len += len(rooted)
        return Block(logits, hidden, logits.argmax(dim=-1))

    @torch.no_grad()
    def verify_siblings(self, sid: str, positions: list[int], tokens: list[int]) -> SiblingRows:
        """After a chain's pass, before its commit: the sibling branch ``tokens[i]`` beside the draft token at
        ``positions[i]`` (as VerifySession.verify_siblings), a pass of this session's own after its chain's keys (fed
        again first when the budget dropped them); ``commit`` crops the siblings away with the rejected tail."""
        st = self._state(sid)
        root = len(st.seq) - 1  # the root's cache slot
        if st.cached_len != root + 1 + len(st.drafted):  # the chain's keys are gone (budget): feed them again
            if st.cached_len > root:
                crop_to(st.cache, root)
                st.cached_len = root
            self._forward_one(st, (st.seq + st.drafted)[st.cached_len:])
        pos, mask = sibling_inputs(len(st.drafted), positions, root, self.model.dtype)
        logits, hidden = cached_forward(self.model, st.cache, st.cached_len, list(tokens), self.cfg.hidden_layer,
                                        pos, mask)
        st.cached_len += len(tokens)
        self._enforce_budget()
        return SiblingRows(logits, hidden)

    def commit_path(self, sid: str, path: list[int], next_token: int) -> list[int]:
        """After a tree's pass: commit its accepted ``path`` (node indices, the root's child first) and ``next_token``;
        the cache keeps the prefix, the root and the path's positions (compacted), as VerifySession.commit_path."""
        st = self._state(sid)
        if any(not 0 <= i < len(st.drafted) for i in path):
            raise ValueError(f"session {sid}: path {path} outside the tree's {len(st.drafted)} nodes")
        root = len(st.seq) - 1  # the root's cache slot; node i sits at root + 1 + i
        if self.cfg.kv_reuse and st.cached_len == root + 1 + len(st.drafted):
            keep_positions(st.cache, list(range(root + 1)) + [root + 1 + i for i in path])
            st.cached_len = root + 1 + len(path)
        else:  # no reuse, or the pass's cache is gone (budget): recomputed on the next pass
            st.cache, st.cached_len = DynamicCache(), 0
        committed = [st.drafted[i] for i in path] + [int(next_token)]
        st.seq.extend(committed)
        st.drafted = []
        return committed

    def commit(self, sid: str, n_accepted: int, next_token: int) -> list[int]:
        """Commit ``draft[:n_accepted] + [next_token]`` and crop the cache to cover the new ``seq[:-1]``."""
        st, committed = self._committed(sid, n_accepted, next_token)
        if self.cfg.kv_reuse:
            self.rollback(sid, len(st.seq) + n_accepted)
        else:
            st.cache, st.cached_len = DynamicCache(), 0
        st.seq.extend(committed)
        st.drafted = []
        return committed

    def memory_bytes(self) -> int:
        """KV-cache bytes of all sessions: every buffer once, however many sessions view into it."""
        return sum(dict(p for st in self.sessions.values() for p in _storages(st.cache)).values())

    def _enforce_budget(self) -> None:
        """Drop the caches of the least recently used sessions until the total fits the budget; note what is held."""
        budget = self.cfg.memory_budget_mb * 2**20
        held = self.memory_bytes()
        for st in sorted(self.sessions.values(), key=lambda s: s.last_active):
            if held <= budget:
                break
            st.cache, st.cached_len = DynamicCache(), 0
            held = self.memory_bytes()
        self.held_bound = held

    def rollback(self, sid: str, length: int) -> None:
        """Keep only the first ``length`` cached positions of a session (no-op when it has fewer)."""
        st = self._state(sid)
        if st.cached_len > length:
            crop_to(st.cache, length)
            st.cached_len = length

    def _forward_one(self, st: SessionState, x: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        out = cached_forward(self.model, st.cache, st.cached_len, x, self.cfg.hidden_layer)  # [n, V], [n, d]
        st.cached_len += len(x)
        return out

    def _forward_batch(self, states: list[SessionState],
                       feeds: list[list[int]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        dev = self.model.device
        c_max, n_max, b = max(st.cached_len for st in states), max(len(x) for x in feeds), len(states)
        ids = torch.full((b, n_max), self.cfg.pad_id, dtype=torch.long, device=dev)  # [B, N]
        mask = torch.zeros((b, c_max + n_max), dtype=torch.long, device=dev)  # [B, C + N]
        pos = torch.zeros((b, n_max), dtype=torch.long, device=dev)  # [B, N]
        for i, (st, x) in enumerate(zip(states, feeds)):
            ids[i, : len(x)] = torch.tensor(x, device=dev)
            mask[i, c_max - st.cached_len: c_max] = 1
            mask[i, c_max: c_max + len(x)] = 1
            pos[i] = torch.arange(st.cached_len, st.cached_len + n_max, device=dev)
        cache = _stack_caches(states, c_max, n_max)
        out = self.model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True,
                         cache_position=torch.arange(c_max, c_max + n_max, device=dev), position_ids=pos,
                         output_hidden_states=True)
        for i, (st, x) in enumerate(zip(states, feeds)):
            st.cache = _row_cache(out.past_key_values, i, c_max - st.cached_len, c_max + len(x))
            st.cached_len += len(x)
        hidden = out.hidden_states[self.cfg.hidden_layer]
        return [(out.logits[i], hidden[i]) for i in range(b)]


def _stack_caches(states: list[SessionState], c_max: int, n_max: int) -> DynamicCache:
    """One batched cache with room for the block: each session's entries left-padded to c_max positions (zeros
    where masked), then n_max free positions that the forward fills in place (``SlabLayer``)."""
    batched = DynamicCache()
    ref = next((st.cache for st in states if st.cached_len > 0), None)
    if ref is None:
        return batched
    layers = []
    for li, layer in enumerate(ref.layers):
        k_ref = layer.keys  # [1, H, L, D]
        shape = (len(states), k_ref.shape[1], c_max + n_max, k_ref.shape[3])
        keys, values = k_ref.new_empty(shape), k_ref.new_empty(shape)  # [B, H, C + N, D]
        for i, st in enumerate(states):
            pad = c_max - st.cached_len
            keys[i, :, :pad], values[i, :, :pad] = 0, 0  # masked, but must be finite
            if st.cached_len:
                keys[i, :, pad:c_max] = st.cache.layers[li].keys[0]
                values[i, :, pad:c_max] = st.cache.layers[li].values[0]
        layers.append(SlabLayer(keys, values, c_max))
    batched.layers = layers
    return batched


class SlabLayer(DynamicLayer):
    """A cache layer over preallocated [B, H, C + N, D] buffers: ``update`` writes the new keys in place
    instead of concatenating (which would copy every cached entry once more); ``batch_select_indices`` keeps
    some batch rows (labeling/forced.py drops the rows that are done)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, filled: int):
        super().__init__()
        self._kbuf, self._vbuf, self._filled = keys, values, filled
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self.keys, self.values = keys[..., :filled, :], values[..., :filled, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        end = self._filled + key_states.shape[-2]
        if end > self._kbuf.shape[-2]:
            raise RuntimeError(f"batched cache holds {self._kbuf.shape[-2]} positions, {end} needed")
        self._kbuf[..., self._filled:end, :] = key_states
        self._vbuf[..., self._filled:end, :] = value_states
        self._filled = end
        self.keys, self.values = self._kbuf[..., :end, :], self._vbuf[..., :end, :]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the batch rows ``indices`` (the buffers are copied once, their free positions too)."""
        self._kbuf, self._vbuf = self._kbuf[indices], self._vbuf[indices]
        self.keys, self.values = self._kbuf[..., :self._filled, :], self._vbuf[..., :self._filled, :]


def _row_cache(cache: DynamicCache, row: int, start: int, end: int) -> DynamicCache:
    """Row ``row``'s own cache, positions [start, end) of the batch (its prefix then its new tokens): views into
    the batch buffers, no copy.  The buffers live until every row has moved on (``_storage_bytes`` counts them)."""
    own = DynamicCache()
    layers = []
    for layer in cache.layers:
        own_layer = DynamicLayer()
        own_layer.lazy_initialization(layer.keys, layer.values)
        own_layer.keys = layer.keys[row:row + 1, :, start:end]
        own_layer.values = layer.values[row:row + 1, :, start:end]
        layers.append(own_layer)
    own.layers = layers
    return own


def _storages(cache: DynamicCache):
    """(data pointer, bytes) of every buffer behind a cache's tensors (views of one buffer share a pointer)."""
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if t is not None and t.numel():
                yield t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()


def pass_tokens(rows: list[tuple[int, int, int]]) -> int:
    """Cache positions a verification pass allocates for its rows ``(len(seq), cached_len, k)`` (pure): alone, the
    session's grown cache; batched, each uncached tail's prefill plus the stacked cache of B x (C + N) positions."""
    if len(rows) == 1:
        seq, _, k = rows[0]
        return seq + k
    prefill = sum(seq - 1 for seq, cached, _ in rows if seq - cached > 1)
    cached = [seq - 1 if seq - c > 1 else c for seq, c, _ in rows]
    c_max = max(cached)
    n_max = max(seq - c + k for (seq, _, k), c in zip(rows, cached))
    return prefill + len(rows) * (c_max + n_max)


def request_shape(session, k: int) -> tuple[int, int, int]:
    """(cached, new, block) of a request drafting k tokens on a session (SessionState or EngineView): the token
    counts the estimator is fitted on (testbed.profile) and predicts with (the edge's scheduler)."""
    return session.cached_len, len(session.seq) - session.cached_len + k, k + 1


def from_options(target: PreTrainedModel, opts: EngineOptions) -> BatchVerifier:
    """The engine ``--engine transformers`` builds (wisv/serving/engines.py ENGINES)."""
    return BatchVerifier(target, EngineConfig(kv_reuse=opts.kv_reuse, session_timeout_s=opts.session_timeout_s,
                                              memory_budget_mb=opts.memory_budget_mb, hidden_layer=opts.hidden_layer))

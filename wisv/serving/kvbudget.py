"""KV-cache memory estimates for the edge's budget, checked before anything is allocated.

A decoder caches, per layer, a key and a value of ``kv_heads * head_dim`` numbers for every position, so a cache
of ``n`` positions takes ``2 * layers * kv_heads * head_dim * dtype_bytes * n`` bytes (``KVShape.bytes_for``).
A session never caches more than its prompt, its generation budget and one block
(``session_tokens``): the verifier's cache covers the committed sequence but its last token, plus the draft.
"""
from __future__ import annotations

from dataclasses import dataclass

MB = 2**20  # bytes in the budget's megabyte


class KVBudgetError(ValueError):
    """A session or a verification pass whose KV cache would exceed the edge's budget (``code`` for the ERROR)."""

    code = "kv_budget"


@dataclass(frozen=True)
class KVShape:
    """What one cached position costs: the model's layers, key/value heads, head width and element size."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int

    @classmethod
    def of(cls, model) -> KVShape:
        """The shape of a transformers causal LM's cache (grouped-query attention: ``num_key_value_heads``)."""
        c = model.config
        heads = int(c.num_attention_heads)
        head_dim = getattr(c, "head_dim", None) or int(c.hidden_size) // heads
        kv_heads = getattr(c, "num_key_value_heads", None) or heads
        return cls(int(c.num_hidden_layers), int(kv_heads), int(head_dim), int(model.dtype.itemsize))

    def bytes_for(self, tokens: int) -> int:
        """Bytes of a cache of ``tokens`` positions (keys and values of every layer)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes * max(0, int(tokens))


def session_tokens(prompt_len: int, max_new_tokens: int, draft_len: int) -> int:
    """The most positions a verifying session ever caches: its prompt, its budget and one block of drafts."""
    return prompt_len + max_new_tokens + draft_len


def refusal(need_bytes: int, held_bytes: int, budget_mb: float, what: str) -> KVBudgetError | None:
    """The error for ``what`` needing ``need_bytes`` more on top of ``held_bytes`` under a budget of ``budget_mb``
    megabytes; None when it fits (pure)."""
    if held_bytes + need_bytes <= budget_mb * MB:
        return None
    held = f" on top of {held_bytes / MB:.1f} MB held" if held_bytes else ""
    return KVBudgetError(f"{what} needs {need_bytes / MB:.1f} MB of KV cache{held}; this edge's "
                         f"--memory-budget-mb is {budget_mb:g}")


class KVLedger:
    """Reservations of KV memory per key (the edge's sessions without the batching engine): admitted only while the
    total of the reservations fits the budget, so that no session's cache can outgrow it."""

    def __init__(self, budget_mb: float):
        self.budget_mb, self.held = budget_mb, {}

    @property
    def total(self) -> int:
        return sum(self.held.values())

    def check(self, need_bytes: int, what: str, key: object = None) -> None:
        """Raise KVBudgetError unless ``need_bytes`` fits beside what the others (all but ``key``) hold."""
        err = refusal(need_bytes, self.total - self.held.get(key, 0), self.budget_mb, what)
        if err is not None:
            raise err

    def reserve(self, key: object, need_bytes: int, what: str) -> None:
        """Hold ``need_bytes`` for ``key`` (replacing its former reservation), or raise KVBudgetError."""
        self.check(need_bytes, what, key)
        self.held[key] = need_bytes

    def release(self, key: object) -> None:
        self.held.pop(key, None)

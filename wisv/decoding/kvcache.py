"""KV-cache helpers that hide transformers' cache-cropping API differences."""
from __future__ import annotations

import inspect

import torch
from transformers import Cache


def _crop_takes_count(cache: Cache) -> bool:
    """transformers 5.x ``crop(tokens_to_remove)`` wants a negative count; 4.x ``crop(max_length)`` a length."""
    return "tokens_to_remove" in inspect.signature(cache.crop).parameters


def crop_to(cache: Cache, length: int) -> None:
    """Crop ``cache`` so it holds exactly the first ``length`` positions."""
    current = cache.get_seq_length()
    if length > current:
        raise ValueError(f"cannot crop a cache of {current} positions to {length}")
    if length == current:
        return
    if _crop_takes_count(cache):
        cache.crop(-(current - length))
    else:
        cache.crop(length)



def keep_positions(cache: Cache, keep: list[int]) -> None:
    """Compact ``cache`` in place to the cached positions ``keep`` (ascending indices), e.g. a tree's accepted path."""
    if hasattr(cache, "layers"):  # transformers 5.x
        for layer in cache.layers:
            if getattr(layer, "keys", None) is not None:
                idx = torch.tensor(keep, dtype=torch.long, device=layer.keys.device)
                layer.keys, layer.values = layer.keys.index_select(-2, idx), layer.values.index_select(-2, idx)
        return
    for i, (k, v) in enumerate(zip(cache.key_cache, cache.value_cache)):  # transformers 4.x
        idx = torch.tensor(keep, dtype=torch.long, device=k.device)
        cache.key_cache[i], cache.value_cache[i] = k.index_select(-2, idx), v.index_select(-2, idx)

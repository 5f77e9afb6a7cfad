"""KV-cache helpers that hide transformers' cache-cropping API differences."""
from __future__ import annotations

import inspect

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

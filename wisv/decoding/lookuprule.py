"""Prompt lookup's rule, by vLLM's names: the one fact the UE's lookup drafter (wisv/decoding/ngram.py) and an edge
that runs the same rule on the same tokens (protocols/edge_run.py's lookup stop) share; no imports of the project's,
so that the drafter interface (wisv/decoding/sessions.py ``Drafting``) can name it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NgramConfig:
    """Prompt lookup's settings, by vLLM's names."""

    prompt_lookup_min: int = 2  # shortest n-gram matched, tokens
    prompt_lookup_max: int = 4  # longest n-gram matched, tokens (the longest that matches wins)
    num_speculative_tokens: int = 10  # most tokens a proposal carries

    def __post_init__(self) -> None:
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max or self.num_speculative_tokens < 1:
            raise ValueError(f"prompt lookup needs 1 <= prompt_lookup_min <= prompt_lookup_max and "
                             f"num_speculative_tokens >= 1; got {self.prompt_lookup_min}, {self.prompt_lookup_max}, "
                             f"{self.num_speculative_tokens}")

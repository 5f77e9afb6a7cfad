"""The edge's own drafters by name (``--edge-draft``): a module of names alone, so that the edge's config imports
no model code (protocols/edge_draft.py drafts with them)."""
from __future__ import annotations

EDGE_DRAFTS = ("none", "ngram", "suffix")  # --edge-draft's choices: no draft, prompt lookup, suffix drafting

"""Generated text for people: the text fields of outputs.jsonl, a one-line progress note, and ``--show N`` (outputs
beside the target-only reference, marking where each first diverges).  Pure: a tokenizer's ``decode`` comes in as an
argument (None where the model directory has no tokenizer: then there is no text)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pandas as pd

Decode = Callable[[list[int]], str]
MARK = "⟦≠⟧"  # --show: where an output first leaves the reference
PREVIEW_CHARS = 70  # characters of an output in a progress line


def decoder(tok) -> Decode | None:
    """Token ids -> text without special tokens, or None without a tokenizer."""
    if tok is None:
        return None
    return lambda ids: tok.decode(list(ids), skip_special_tokens=True)


def text_fields(decode: Decode | None, prompt_ids: Sequence[int], tokens: Sequence[int]) -> dict:
    """outputs.jsonl's prompt_text and text (none without a tokenizer)."""
    if decode is None:
        return {}
    return {"prompt_text": decode(list(prompt_ids)), "text": decode(list(tokens))}


def progress_line(done: int, total: int, rec: Mapping) -> str:
    """One human line per finished prompt: tokens, rounds, seconds and the start of its text (or its error)."""
    head = f"[{done}/{total}] {rec['prompt_id']}:"
    if rec.get("error"):
        return f"{head} failed: {rec['error']}"
    text = " ".join(str(rec.get("text", "")).split())
    text = text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1] + "…"
    return (f"{head} {len(rec['tokens'])} tokens in {rec['rounds']} rounds, {rec['t_e2e_s']:.2f} s"
            + (f": {text!r}" if "text" in rec else ""))


def first_divergence(out: Sequence[int], ref: Sequence[int]) -> int | None:
    """Index of the first token where ``out`` differs from ``ref`` (one ending first counts), None if equal."""
    for i, (a, b) in enumerate(zip(out, ref)):
        if a != b:
            return i
    return None if len(out) == len(ref) else min(len(out), len(ref))


def one_line(text: str) -> str:
    """Text on one line: a newline shown as ⏎."""
    return text.replace("\r", "").replace("\n", "⏎")


def marked(decode: Decode, out: Sequence[int], ref: Sequence[int] | None) -> str:
    """The output's text, with MARK where it first leaves the reference and a note of the token index."""
    if ref is None:
        return one_line(decode(list(out))) + "  (no reference)"
    i = first_divergence(out, ref)
    if i is None:
        return one_line(decode(list(out))) + "  (= reference)"
    text = one_line(decode(list(out[:i]))) + MARK + one_line(decode(list(out[i:])))
    return f"{text}  (diverges at token {i} of {len(out)})"


def show(n: int, prompts: pd.DataFrame, outputs: Mapping[str, pd.DataFrame], refs: Mapping[str, list[int]] | None,
         decode: Decode | None) -> str:
    """The first ``n`` prompts: prompt, reference text, and each protocol's output marked where it diverges."""
    if decode is None:
        return "--show: no tokenizer in the model directory, so no text to show"
    lines = []
    for _, p in prompts.head(n).iterrows():
        pid = str(p["prompt_id"])
        ref = refs.get(pid) if refs else None
        width = max([len(k) for k in outputs] + [len("reference")])
        lines += [f"=== {pid}", f"{'prompt:':<{width + 1}}  {one_line(decode(list(p['prompt_ids'])))}",
                  f"{'reference:':<{width + 1}}  "
                  + (one_line(decode(ref)) if ref is not None else "(none: --no-reference)")]
        for proto, out in outputs.items():
            row = out[out["prompt_id"].astype(str) == pid]
            if not len(row) or (isinstance(row.iloc[0].get("error"), str)):
                lines.append(f"{proto + ':':<{width + 1}}  (failed: {row.iloc[0]['error'] if len(row) else 'missing'})")
                continue
            lines.append(f"{proto + ':':<{width + 1}}  {marked(decode, list(row.iloc[0]['tokens']), ref)}")
    return "\n".join(lines)

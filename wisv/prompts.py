"""Prompt files: JSONL rows with a question (or raw prompt text, or token ids) and an optional reference answer."""
from __future__ import annotations

import json
from pathlib import Path

from wisv.evaluate import encode_prompt
from wisv.jsonl import read_jsonl, write_jsonl  # noqa: F401 - re-exported for callers of wisv.prompts
from wisv.toydata import format_prompt, load_split


def read_jsonl_prompts(path: Path, tok) -> list[dict]:
    """Rows with ``prompt`` (question text, wrapped in the toy prompt format unless ``raw``) or ``prompt_ids``."""
    rows = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not JSON ({e})") from e
        if "prompt_ids" in r:
            ids = [int(t) for t in r["prompt_ids"]]
        elif "prompt" in r:
            _need_tokenizer(tok, f"{path}:{i}: a text 'prompt'")
            text = r["prompt"] if r.get("raw") else format_prompt(r["prompt"])
            ids = encode_prompt(tok, text)
        else:
            raise ValueError(f"{path}:{i}: needs 'prompt' or 'prompt_ids'")
        rows.append({"prompt_id": str(r.get("prompt_id", f"line-{i}")), "prompt_ids": ids, "answer": r.get("answer")})
    return rows


def prompt_rows(tok, split: str, n: int | None, prompts_file: str | None = None,
                need_answers: bool = False) -> list[dict]:
    """Rows with prompt_id, prompt_ids and answer: the first ``n`` of a JSONL file, or of the toy task's ``split``."""
    if prompts_file:
        rows = read_jsonl_prompts(Path(prompts_file), tok)[:n]
        if need_answers and any(r["answer"] is None for r in rows):
            raise ValueError(f"{prompts_file}: every row needs an 'answer'")
    else:
        _need_tokenizer(tok, f"the built-in {split} split")
        rows = [{"prompt_id": p.pid, "prompt_ids": encode_prompt(tok, p.prompt), "answer": p.answer}
                for p in load_split(split, n)]
    if not rows:
        raise ValueError(f"no prompts ({prompts_file or f'toy {split} split'}, n={n})")
    return rows



def _need_tokenizer(tok, what: str) -> None:
    if tok is None:
        raise ValueError(f"{what} needs a tokenizer, and the model directory has none: give 'prompt_ids' rows")

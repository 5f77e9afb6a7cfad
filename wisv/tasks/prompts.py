"""Prompts as token ids: the one encoder of prompt text (chat template or not), and prompt files (JSONL rows with a
question, raw prompt text or token ids, and an optional reference answer).  Pure: no torch."""
from __future__ import annotations

import json
from pathlib import Path

from wisv.tasks.jsonl import read_jsonl, write_jsonl  # noqa: F401 - re-exported for callers of wisv.tasks.prompts
from wisv.tasks.qa import accepted
from wisv.tasks.toydata import format_prompt, load_split

CHAT_TEMPLATE_MODES = ("auto", "on", "off")  # --chat-template: auto is on when the tokenizer has a chat template


def uses_chat_template(tokenizer, mode: str = "auto") -> bool:
    """Whether prompt text goes through the tokenizer's chat template; ``on`` without one is an error."""
    if mode not in CHAT_TEMPLATE_MODES:
        raise ValueError(f"chat template mode {mode!r}: expected one of {CHAT_TEMPLATE_MODES}")
    has = bool(getattr(tokenizer, "chat_template", None))
    if mode == "on" and not has:
        raise ValueError("--chat-template on: this tokenizer has no chat template (use auto or off)")
    return has if mode == "auto" else mode == "on"


def encode_prompt(tokenizer, text: str, chat_template: str = "auto") -> list[int]:
    """Token ids the models are conditioned on: the text as one user turn of the tokenizer's chat template, with the
    assistant's turn opened (chat models), or the text itself (the tokenizer adds BOS where its family does)."""
    if uses_chat_template(tokenizer, chat_template):
        text = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                             tokenize=False)
        return tokenizer(text, add_special_tokens=False).input_ids  # the template wrote its own BOS
    return tokenizer(text).input_ids


def read_jsonl_prompts(path: Path, tok, chat_template: str = "auto") -> list[dict]:
    """Rows with ``prompt`` (question text, wrapped in the toy prompt format unless ``raw``) or ``prompt_ids``; the
    answer is ``answer`` (the toy task's integer), or with ``answers`` (a QA row) the list of accepted answers."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"prompts file {path}: no such file")
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
            ids = encode_prompt(tok, text, chat_template)
        else:
            raise ValueError(f"{path}:{i}: needs 'prompt' or 'prompt_ids'")
        answer = accepted(r) if "answers" in r else r.get("answer")  # QA rows: every accepted answer
        kind = {k: str(r[k]) for k in ("kind", "form") if k in r}  # the suite's kind (dev by kind), its form
        rows.append({"prompt_id": str(r.get("prompt_id", f"line-{i}")), "prompt_ids": ids, "answer": answer, **kind})
    return rows


def prompt_rows(tok, split: str, n: int | None, prompts_file: str | None = None,
                need_answers: bool = False, chat_template: str = "auto") -> list[dict]:
    """Rows with prompt_id, prompt_ids and answer: the first ``n`` of a JSONL file, or of the toy task's ``split``
    (text through ``encode_prompt`` with ``chat_template``)."""
    if prompts_file:
        rows = read_jsonl_prompts(Path(prompts_file), tok, chat_template)[:n]
        if need_answers and any(r["answer"] is None for r in rows):
            raise ValueError(f"{prompts_file}: every row needs an 'answer'")
    else:
        _need_tokenizer(tok, f"the built-in {split} split")
        rows = [{"prompt_id": p.pid, "prompt_ids": encode_prompt(tok, p.prompt, chat_template),
                 "answer": p.answer}
                for p in load_split(split, n)]
    if not rows:
        raise ValueError(f"no prompts ({prompts_file or f'toy {split} split'}, n={n})")
    return rows



def _need_tokenizer(tok, what: str) -> None:
    if tok is None:
        raise ValueError(f"{what} needs a tokenizer, and the model directory has none: give 'prompt_ids' rows")

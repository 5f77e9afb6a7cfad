"""Prompts as token ids: the one encoder of prompt text and conversations (chat template or not), prompt files (JSONL
rows with a question, raw prompt text or token ids, and an optional reference answer), and the field's prompt sets by
name (``--dataset``: wisv.tasks.datasets), with a two-turn question's second turn built from a first answer.
Pure: no torch."""
from __future__ import annotations

import json
from pathlib import Path

from wisv.tasks.datasets import NO_ANSWER, DatasetRow, load_dataset, scored_fields
from wisv.tasks.jsonl import read_jsonl, write_jsonl  # noqa: F401 - re-exported for callers of wisv.tasks.prompts
from wisv.tasks.qa import accepted
from wisv.tasks.toydata import format_prompt, load_split

CHAT_TEMPLATE_MODES = ("auto", "on", "off")  # --chat-template: auto is on when the tokenizer has a chat template
LABELS = ("kind", "form", "category", "turn", "question_id", "reference")  # row fields a prompt file carries through
TURN_JOIN = "\n\n"  # between a conversation's messages when the tokenizer has no chat template (or it is off)


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
    return encode_messages(tokenizer, [{"role": "user", "content": text}], chat_template)


def encode_messages(tokenizer, messages: list[dict], chat_template: str = "auto") -> list[int]:
    """Token ids of a conversation (``[{"role": "user" | "assistant", "content": TEXT}, ...]``, a user's turn last)
    through the tokenizer's chat template with the assistant's turn opened; without a template, the contents joined
    by a blank line (one message: the text itself)."""
    if uses_chat_template(tokenizer, chat_template):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return tokenizer(text, add_special_tokens=False).input_ids  # the template wrote its own BOS
    return tokenizer(TURN_JOIN.join(m["content"] for m in messages)).input_ids


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
        labels = {k: r[k] for k in LABELS if k in r}  # the suite's kind (dev by kind) and form; a dataset's category,
        labels |= {k: str(r[k]) for k in ("kind", "form") if k in r}  # turn and question (reports group by them)
        rows.append({"prompt_id": str(r.get("prompt_id", f"line-{i}")), "prompt_ids": ids, "answer": answer, **labels})
    return rows


def prompt_rows(tok, split: str, n: int | None, prompts_file: str | None = None,
                need_answers: bool = False, chat_template: str = "auto", dataset: str | None = None,
                first_turn_only: bool = False) -> list[dict]:
    """Rows with prompt_id, prompt_ids and answer: the first ``n`` of a JSONL file, of a named ``dataset`` (first
    turns: ``dataset_rows``), or of the toy task's ``split`` (text through ``encode_prompt`` with ``chat_template``)."""
    if dataset:
        rows = dataset_rows(tok, dataset, n, chat_template, first_turn_only)
        if need_answers and any(r["answer"] is None for r in rows):
            raise ValueError(NO_ANSWER.format(spec=dataset))
    elif prompts_file:
        rows = read_jsonl_prompts(Path(prompts_file), tok, chat_template)[:n]
        if need_answers and any(r["answer"] is None for r in rows):
            raise ValueError(f"{prompts_file}: every row needs an 'answer'")
    else:
        _need_tokenizer(tok, f"the built-in {split} split")
        rows = [{"prompt_id": p.pid, "prompt_ids": encode_prompt(tok, p.prompt, chat_template),
                 "answer": p.answer}
                for p in load_split(split, n)]
    if not rows:
        raise ValueError(f"no prompts ({dataset or prompts_file or f'toy {split} split'}, n={n})")
    return rows


def dataset_rows(tok, dataset: str, n: int | None, chat_template: str = "auto",
                 first_turn_only: bool = False) -> list[dict]:
    """The first turns of the first ``n`` questions of a named set (wisv.tasks.datasets): prompt_id, prompt_ids,
    answer, category, turn 1, question_id, the reference a scorer reads, and, where a second turn waits for the first
    answer (``second_turn_rows``), the question's ``turns``; ``first_turn_only``: no second turn (vLLM's and
    SpecEdge's single turn)."""
    _need_tokenizer(tok, f"--dataset {dataset}")
    rows = []
    for q in load_dataset(dataset)[:n]:
        later = {"turns": list(q.turns)} if len(q.turns) > 1 and not first_turn_only else {}
        rows.append({**_turn_row(q, 1, encode_prompt(tok, q.turns[0], chat_template)), **later})
    return rows


def second_turn_rows(tok, rows: list[dict], first_answers: dict[str, str], chat_template: str = "auto") -> list[dict]:
    """The rows with each two-turn question's second turn placed after its first: the conversation [user turn 1,
    assistant ``first_answers[prompt_id]``, user turn 2] through the chat template (``encode_messages``), as Spec-Bench
    feeds a model its own first answer.  The waiting ``turns`` are dropped from the rows."""
    out = []
    for r in rows:
        turns = r.get("turns")
        out.append({k: v for k, v in r.items() if k != "turns"})
        if turns:
            convo = [{"role": "user", "content": turns[0]},
                     {"role": "assistant", "content": first_answers[r["prompt_id"]]},
                     {"role": "user", "content": turns[1]}]
            q = DatasetRow(r["question_id"], r["category"], tuple(turns))  # MT-Bench's references: judge hints
            out.append(_turn_row(q, 2, encode_messages(tok, convo, chat_template)))
    return out


def answer_text(tok, tokens: list[int]) -> str:
    """An answer's text as a conversation carries it on: decoded without special tokens (the EOS), stripped."""
    return tok.decode(list(tokens), skip_special_tokens=True).strip()


def _turn_row(q: DatasetRow, turn: int, ids: list[int]) -> dict:
    """A prompt row of a question's turn (1-based): turn 1 keeps the question's id, a later one is ``<id>-t<turn>``."""
    ref = q.references[turn - 1] if len(q.references) >= turn else None
    pid = q.prompt_id if turn == 1 else f"{q.prompt_id}-t{turn}"
    return {"prompt_id": pid, "prompt_ids": ids, "answer": None, "category": q.category, "turn": turn,
            "question_id": q.prompt_id, **scored_fields(q.category, ref)}



def _need_tokenizer(tok, what: str) -> None:
    if tok is None:
        raise ValueError(f"{what} needs a tokenizer, and the model directory has none: give 'prompt_ids' rows")

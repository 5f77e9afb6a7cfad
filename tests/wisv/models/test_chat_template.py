"""One prompt encoder for every CLI: text through the tokenizer's chat template (auto: when it has one) or as is."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

import pytest
from transformers import AutoTokenizer

from tests.testbed.conftest import TOKENIZER_DIR
from wisv.tasks.prompts import encode_prompt, prompt_rows, uses_chat_template

TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")  # a small chat template
TEXT = "Question: Tom has 3 apples. How many?\nAnswer:"


@pytest.fixture
def plain():
    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)  # the built-in tokenizer: no chat template


@pytest.fixture
def chat(plain, tmp_path):
    plain.chat_template = TEMPLATE
    plain.save_pretrained(tmp_path / "chat")
    return AutoTokenizer.from_pretrained(tmp_path / "chat")  # the template survives save and load


def test_the_builtin_tokenizer_has_no_template_so_auto_is_off(plain):
    assert not uses_chat_template(plain, "auto") and not uses_chat_template(plain, "off")
    assert encode_prompt(plain, TEXT) == encode_prompt(plain, TEXT, "off") == plain(TEXT).input_ids
    with pytest.raises(ValueError, match="no chat template"):
        encode_prompt(plain, TEXT, "on")
    with pytest.raises(ValueError, match="expected one of"):
        encode_prompt(plain, TEXT, "yes")


def test_a_template_wraps_the_text_as_a_user_turn(chat):
    want = chat(f"<|user|>{TEXT}\n<|assistant|>", add_special_tokens=False).input_ids
    assert encode_prompt(chat, TEXT, "on") == encode_prompt(chat, TEXT, "auto") == want
    assert encode_prompt(chat, TEXT, "off") == chat(TEXT).input_ids != want


def test_prompt_rows_encode_files_and_the_split_with_the_template(chat, tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"prompt": TEXT, "raw": True, "answer": 3}) + "\n"
                 + json.dumps({"prompt_ids": [1, 2]}) + "\n")
    on, off = (prompt_rows(chat, "test", None, str(f), chat_template=m) for m in ("on", "off"))
    assert on[0]["prompt_ids"] == encode_prompt(chat, TEXT, "on") and off[0]["prompt_ids"] == chat(TEXT).input_ids
    assert on[1]["prompt_ids"] == off[1]["prompt_ids"] == [1, 2]  # token ids are taken as they are
    split = prompt_rows(chat, "test", 2, chat_template="on")
    assert all(chat.decode(r["prompt_ids"]).startswith("<|user|>") for r in split)


def test_the_run_and_simulate_configs_carry_the_mode(chat, tmp_path):
    from testbed.live.orchestrate.prompts import load_prompts
    from testbed.live.orchestrate.run import parse_args
    from testbed.sim.traces import TraceKey
    target = tmp_path / "chat"  # a "target directory" whose tokenizer has the template
    cfg = parse_args(["--target", str(target), "--prompts", "2", "--chat-template", "on"])
    rows, _ = load_prompts(cfg, tmp_path / "prompts.jsonl")
    assert all(chat.decode(ids).startswith("<|user|>") for ids in rows["prompt_ids"])
    key = TraceKey("pair", "greedy", 4, 2, 16)
    before = {k: v for k, v in asdict(key).items() if k not in ("chat_template", "prompts_file", "dataset")}  # older
    digest = hashlib.sha1(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]
    assert key.filename() == f"greedy-k4-n2-{digest}.csv"  # traces cached with the default keep their names
    assert TraceKey("pair", "greedy", 4, 2, 16, chat_template="on").filename() != key.filename()

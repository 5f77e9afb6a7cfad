"""The engine registry: the interface's module imports no engine; a name builds its engine with the edge's options."""
import subprocess
import sys

import pytest

from tests.tiny_pair import make_pair
from wisv.serving.batchverify import BatchVerifier
from wisv.serving.engine import EngineOptions, EngineView
from wisv.serving.engines import ENGINE_CHOICES, ENGINES, build_engine


@pytest.mark.parametrize("module", ["wisv.serving.engine", "wisv.serving.engines"])
def test_the_interface_and_the_registry_load_no_engine(module):
    code = (f"import sys, {module}\n"
            "print(sorted(m for m in sys.modules if m in ('wisv.serving.batchverify', 'wisv.serving.vllm_engine')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_name_names_a_builder_and_the_choices_follow_the_registry():
    assert ENGINE_CHOICES == tuple(ENGINES) == ("transformers", "vllm")
    assert all(callable(build) for build in ENGINES.values())


def test_transformers_is_built_with_the_options_asked():
    _, target = make_pair("llama", vocab=61, eos=60, seed=0)
    opts = EngineOptions(kv_reuse=False, session_timeout_s=7.0, memory_budget_mb=64.0, hidden_layer=-2)
    eng = build_engine("transformers", target, opts)
    assert isinstance(eng, BatchVerifier)
    assert (eng.cfg.kv_reuse, eng.cfg.session_timeout_s, eng.cfg.memory_budget_mb, eng.hidden_layer) == \
        (False, 7.0, 64.0, -2)
    view = EngineView(eng, "a", [3, 4, 5])
    assert view.seq == [3, 4, 5] and view.verify([6, 7]).argmax.shape[0] == 3


def test_an_unknown_engine_is_one_line_naming_the_choices():
    with pytest.raises(ValueError, match=r"unknown engine 'tgi'; choose one of \('transformers', 'vllm'\)"):
        build_engine("tgi", None, EngineOptions())

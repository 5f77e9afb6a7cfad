"""wisv/__init__ is lazy: the pure modules import with torch and transformers blocked; the README names still load."""
import subprocess
import sys

import pytest

PURE = ["wisv", "wisv.timing.latency", "wisv.serving.scheduler", "wisv.serving.estimator", "wisv.timing.roundtime",
        "wisv.timing.compute", "wisv.timing.hardware", "wisv.timing.calibrate", "wisv.tasks.jsonl",
        "wisv.tasks.toydata", "wisv.decoding.specedge", "wisv.tasks.prompts", "wisv.tasks.qa",
        "channel.csi", "channel.linkmodel", "channel.measure", "channel.csitrace"]

BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'transformers'):
            raise ImportError('blocked: ' + name)
        return None
sys.meta_path.insert(0, Block())
"""


def run_py(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_without_torch(module):
    res = run_py(BLOCKER + f"import {module}\nprint(sorted(m for m in sys.modules if m in ('torch', 'transformers')))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_blocker_blocks_torch():
    """The check above can fail: a module that needs torch does not import under the blocker."""
    res = run_py(BLOCKER + "import wisv.decoding.speculative")
    assert res.returncode != 0 and "blocked: torch" in res.stderr


def test_readme_names_load_on_use():
    import wisv
    from wisv.decoding.speculative import speculative_generate
    assert wisv.speculative_generate is speculative_generate
    assert {"load_pair", "ModelPair", "SpecOutput"} <= set(wisv.__all__) <= set(dir(wisv))
    with pytest.raises(AttributeError):
        wisv.no_such_name  # noqa: B018

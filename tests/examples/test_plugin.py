"""The example plugin (examples/plugin/) pip-installed into a temporary target: its protocol, judge and pair appear in
the CLIs' --help and work in a live run, a simulation, labeling peers and the GPU check's byte model, with no line of
the project changed; a broken plugin, pip-installed likewise, is one line at start-up and the built-ins still work."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plugin"
BROKEN_PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "wisv-broken-plugin"
version = "0.1.0"

[project.entry-points."wisv_testbed.protocols"]
ef-again = "wisv_broken_plugin:EF"
gone = "wisv_broken_plugin.missing:X"

[tool.setuptools]
packages = ["wisv_broken_plugin"]
'''
BROKEN_INIT = 'from wisv.timing.protodesc import ProtocolDesc\nEF = ProtocolDesc(name="ef", rule="greedy")\n'

pytestmark = pytest.mark.slow


def pip_install(src: Path, target: Path) -> None:
    """A real install: pip builds the package (setuptools, no network) and writes it and its entry points to target."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(target), str(src)], check=True, cwd=src)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example plugin installed into a fresh target (built from a copy: the checkout gets no build/)."""
    tmp = tmp_path_factory.mktemp("plugin")
    src = tmp / "src"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip_install(src, tmp / "site")
    return tmp / "site"


def run(site: Path, *argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)]), "OMP_NUM_THREADS": "1"}
    env.pop("WISV_PLUGINS_REPORTED", None)
    proc = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    print(f"$ python {' '.join(argv)}  -> rc {proc.returncode}")
    print(proc.stdout[-1500:], proc.stderr[-1500:])
    return proc


def test_the_install_is_a_real_one(site: Path) -> None:
    ep_file = next(site.glob("wisv_topk_plugin-*.dist-info")) / "entry_points.txt"
    text = ep_file.read_text()
    assert "[wisv_testbed.protocols]" in text and "topk = wisv_topk_plugin.protocol:TOPK" in text
    assert "toy-copy = wisv_topk_plugin.pair:TOY_COPY" in text and "topk = wisv_topk_plugin.judge:KIND" in text


@pytest.mark.parametrize("argv, names", [
    (["-m", "testbed.run", "--help"], ["{greedy,reject,fh,sh,ef,auto,tree,server,device,topk,all}", "toy-copy",
                                        "also: topk"]),
    (["-m", "testbed.simulate", "--help"], ["{greedy,reject,fh,sh,ef,tree,topk,server,device}", "toy-copy",
                                             "also: topk"]),
    (["-m", "labeling", "peers", "--help"], ["toy-copy"]),
    (["-m", "labeling", "evaluate", "--help"], ["{greedy,reject,fh,sh,ef,tree,topk}"]),
])
def test_help_lists_the_plugin(site: Path, argv: list[str], names: list[str]) -> None:
    proc = run(site, *argv)
    assert proc.returncode == 0 and proc.stderr == ""
    text = " ".join(proc.stdout.split())
    for name in names:
        assert name in text


def test_live_run_and_the_byte_model(site: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run(site, "-m", "testbed.run", "--protocol", "topk", "--head", "topk", "--pair", "toy-copy",
               "--prompts", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "topk" / "summary.json").read_text())
    assert summary["protocol"] == "topk" and summary["prompts"] == 2
    rounds = pd.read_csv(out / "topk" / "rounds.csv")
    assert set(rounds["protocol"]) == {"topk"} and rounds["uplink_bytes"].gt(0).all()
    assert "topk (plugin, tau=0.5)" in json.loads((out / "config.json").read_text())["head_resolved"]
    check = ("import json, pandas as pd, sys; from scripts.gpucheck.bytes import bytes_check; "
             "from wisv.models.loader import builtin_paths; c = json.loads((builtin_paths()[0] / 'config.json')"
             ".read_text()); r = pd.read_csv(sys.argv[1]); "
             "print(json.dumps([bytes_check(p, r, c['hidden_size'], c['vocab_size']) for p in ('topk', 'ef')]))")
    proc = run(site, "-c", check, str(out / "topk" / "rounds.csv"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    topk, ef = json.loads(proc.stdout)
    assert topk["protocols_used"] == {"topk": len(rounds)} and topk["up_within_1pct"]
    assert topk["up_model_bytes_per_round"] == ef["up_model_bytes_per_round"]  # ids only, as described
    assert topk["down_model_bytes_per_round"] == ef["down_model_bytes_per_round"]


def test_simulation(site: Path, tmp_path: Path) -> None:
    proc = run(site, "-m", "testbed.simulate", "--methods", "greedy", "topk", "--head", "topk", "--pair", "toy-copy",
               "--prompts", "2", "--draft-lens", "8", "--out", str(tmp_path / "sim"), "--cache-dir",
               str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(tmp_path / "sim" / "table.csv")
    assert set(table["protocol"]) == {"greedy", "topk"} and table["latency_s"].gt(0).all()
    assert set(table.loc[table["protocol"] == "topk", "acceptance"]) == {"wisv"}  # its judge decides the mismatches


def test_labeling_peers_runs_a_stored_topk_judge(site: Path, tmp_path: Path) -> None:
    proc = run(site, "-m", "wisv_topk_plugin.judge", str(tmp_path / "judges" / "topk"), "--k", "3")
    assert proc.returncode == 0
    proc = run(site, "-m", "labeling", "peers", "--pair", "toy-copy", "--heads-dir", str(tmp_path / "judges"),
               "--paper-head", "none", "--prompts", "2", "--max-new-tokens", "24", "--fluency-model", "none",
               "--results-dir", str(tmp_path / "peers"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    peers = pd.read_csv(tmp_path / "peers" / "peers.csv")
    assert set(peers["judge"]) == {"greedy SD", "topk"}
    assert set(peers.loc[peers["judge"] == "topk", "protocol"]) == {"ef"}  # the first protocol that serves it


def test_a_broken_plugin_is_one_line_and_the_built_ins_work(site: Path, tmp_path: Path) -> None:
    src = tmp_path / "broken"
    (src / "wisv_broken_plugin").mkdir(parents=True)
    (src / "pyproject.toml").write_text(BROKEN_PYPROJECT)
    (src / "wisv_broken_plugin" / "__init__.py").write_text(BROKEN_INIT)
    pip_install(src, tmp_path / "site")
    proc = run(tmp_path / "site", "-m", "testbed.run", "--help")
    assert proc.returncode == 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith("wisv-testbed: skipped plugin ef-again = wisv_broken_plugin:EF "
                               "(wisv_testbed.protocols from wisv-broken-plugin): ValueError: protocol 'ef' already")
    assert lines[1].startswith("wisv-testbed: skipped plugin gone = wisv_broken_plugin.missing:X") \
        and "ModuleNotFoundError" in lines[1]
    assert "{greedy,reject,fh,sh,ef,auto,tree,server,device,all}" in proc.stdout
    proc = run(tmp_path / "site", "-m", "testbed.run", "--protocol", "ef", "--head", "none", "--prompts", "1",
               "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("wisv-testbed: skipped plugin") == 2  # once, not again from the UE and edge processes
    logs = [p.read_text() for p in (tmp_path / "run").rglob("*.log")]
    assert logs and not any("skipped plugin" in log for log in logs)

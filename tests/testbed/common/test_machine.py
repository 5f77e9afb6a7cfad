"""Machine info for benchmark JSON: the fields, and git's answers (or None outside a repository)."""
import importlib
import re

from testbed.common import machine

provenance = importlib.import_module("config.provenance")  # the module (the package exports its function by that name)


def test_machine_info_names_the_machine_and_the_code():
    info = machine.machine_info()
    assert {"cpu_model", "cpu_count", "platform", "python", "torch", "transformers", "git_commit",
            "git_dirty"} <= set(info)
    assert info["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", info["git_commit"])
    assert isinstance(info["git_dirty"], bool)


def test_git_failures_read_as_none(monkeypatch, tmp_path):
    monkeypatch.setattr(provenance, "ROOT", tmp_path)  # not a repository: git fails
    assert provenance._git("rev-parse", "HEAD") is None
    assert machine.machine_info()["git_commit"] is None



def test_cpu_model_reads_cpuinfo_or_falls_back(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Test CPU @ 2.0GHz\nflags\t: sse\n")
    assert machine.cpu_model(info) == "Test CPU @ 2.0GHz"
    assert machine.cpu_model(tmp_path / "missing") == (machine.platform.processor() or machine.platform.machine())

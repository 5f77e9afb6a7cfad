"""The crossover map's pure parts: the winners of a cell read from the descriptions, and bad input refused."""
from __future__ import annotations

from scripts.bench.crossover import main, winners


def test_winners_lossless_leaves_out_on_device():
    lat = {"server": 0.50, "device": 0.10, "greedy": 0.30, "tree": 0.35}
    assert winners(lat) == ("greedy", "device")


def test_server_wins_when_speculation_is_slower():
    assert winners({"server": 0.2, "greedy": 0.3, "device": 0.4}) == ("server", "server")


def test_unknown_protocol_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["--protocols", "bogus", "--out", str(out)]) == 2
    assert "unknown protocol 'bogus'" in capsys.readouterr().err
    assert not out.exists()

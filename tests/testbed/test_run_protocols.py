"""--protocol takes several protocols (run in turn on the same prompts, each paired against the first)."""
from __future__ import annotations

import pytest

from config.fields import ConfigError
from testbed.live.orchestrate.run import RunConfig, parse_args


@pytest.mark.parametrize("argv, expected", [
    (["--protocol", "greedy", "auto"], ["greedy", "auto"]),
    (["--protocol", "greedy,auto"], ["greedy", "auto"]),
    (["--protocol", "auto", "greedy", "auto"], ["auto", "greedy"]),  # a repeat runs once
    (["--protocol", "ef"], ["ef"]),
])
def test_several_protocols(argv, expected):
    assert parse_args(argv).protocols() == expected


def test_unknown_protocol_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(["--protocol", "greedy", "bogus"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "bogus" in err and len(err.splitlines()) == 1


def test_all_goes_alone():
    with pytest.raises(ValueError, match="all"):
        RunConfig(protocol="greedy,all")


def test_check_choices_splits_only_with_sep():
    from config.fields import check_choices
    check_choices("greedy,auto", ("greedy", "auto"), "--protocol", ",")
    with pytest.raises(ConfigError):
        check_choices("greedy,auto", ("greedy", "auto"), "--protocol")

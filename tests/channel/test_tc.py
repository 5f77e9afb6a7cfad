"""tc builders, link planning, command running and cleanup, with fake runners (no root needed)."""

from __future__ import annotations

import subprocess

import pytest

from channel.tc import (
    CommandError,
    NetemSpec,
    applied,
    clear_cmds,
    direction_specs,
    kernel_has_netem,
    netem_cmds,
    netem_from_kernel_config,
    plan_link,
    run_cmds,
    tbf_burst_bytes,
    tbf_cmds,
)

TC = ["tc", "qdisc", "replace", "dev"]
NS = ["ip", "netns", "exec", "ns1"]


class FakeRunner:
    """Records every argv; fails (exit 2, stderr) on commands containing any word in `fail_on`."""

    def __init__(self, fail_on: tuple[str, ...] = ()) -> None:
        self.calls: list[list[str]] = []
        self.fail_on = fail_on

    def __call__(self, cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(cmd))
        bad = any(word in cmd for word in self.fail_on)
        return subprocess.CompletedProcess(cmd, 2 if bad else 0, "", "Error: boom" if bad else "")


@pytest.mark.parametrize("spec, netns, expected", [
    (NetemSpec(delay_ms=20, jitter_ms=1, loss_pct=1, rate_mbps=20), None,
     TC + ["eth0", "root", "netem", "delay", "20ms", "1ms", "loss", "1%", "rate", "20mbit", "limit", "1000"]),
    (NetemSpec(), None, TC + ["eth0", "root", "netem", "delay", "0ms", "limit", "1000"]),
    (NetemSpec(delay_ms=2.5, loss_pct=0.25, limit_pkts=50), "ns1",
     NS + TC + ["eth0", "root", "netem", "delay", "2.5ms", "loss", "0.25%", "limit", "50"]),
    (NetemSpec(rate_mbps=0.5), None,
     TC + ["eth0", "root", "netem", "delay", "0ms", "rate", "0.5mbit", "limit", "1000"]),
])
def test_netem_cmds(spec: NetemSpec, netns: str | None, expected: list[str]) -> None:
    assert netem_cmds("eth0", spec, netns) == [expected]


@pytest.mark.parametrize("rate, burst, netns, expected", [
    (20, None, None, TC + ["eth0", "root", "tbf", "rate", "20mbit", "burst", "12500", "latency", "50ms"]),
    (1, None, None, TC + ["eth0", "root", "tbf", "rate", "1mbit", "burst", "3028", "latency", "50ms"]),
    (100, 9000, "ns1", NS + TC + ["eth0", "root", "tbf", "rate", "100mbit", "burst", "9000", "latency", "50ms"]),
])
def test_tbf_cmds(rate: float, burst: int | None, netns: str | None, expected: list[str]) -> None:
    assert tbf_cmds("eth0", rate, burst, netns=netns) == [expected]


@pytest.mark.parametrize("rate, burst", [(0.1, 3028), (4.8, 3028), (20, 12500), (1000, 625000)])
def test_tbf_burst_rule(rate: float, burst: int) -> None:
    assert tbf_burst_bytes(rate) == burst


@pytest.mark.parametrize("netns, expected", [
    (None, [["tc", "qdisc", "del", "dev", "eth0", "root"]]),
    ("ns1", [NS + ["tc", "qdisc", "del", "dev", "eth0", "root"]]),
])
def test_clear_cmds(netns: str | None, expected: list[list[str]]) -> None:
    assert clear_cmds("eth0", netns) == expected


@pytest.mark.parametrize("kwargs, match", [
    (dict(delay_ms=-1), "delay_ms"),
    (dict(delay_ms=1, jitter_ms=2), "jitter_ms"),
    (dict(loss_pct=101), "loss_pct"),
    (dict(loss_pct=-0.1), "loss_pct"),
    (dict(rate_mbps=0), "rate_mbps"),
    (dict(limit_pkts=0), "limit_pkts"),
    (dict(delay_ms=float("nan")), "delay_ms"),
])
def test_spec_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NetemSpec(**kwargs)


def test_tbf_validation() -> None:
    with pytest.raises(ValueError, match="rate_mbps"):
        tbf_cmds("eth0", 0)


def test_direction_specs_split_rtt() -> None:
    up, down = direction_specs(rtt_ms=40, jitter_ms=2, per=0.01, rate_up_mbps=5, rate_down_mbps=50)
    assert (up.delay_ms, up.jitter_ms, up.loss_pct, up.rate_mbps) == (20, 1, 1.0, 5)
    assert (down.delay_ms, down.rate_mbps) == (20, 50)
    with pytest.raises(ValueError, match="per"):
        direction_specs(40, 0, 1.5, None, None)


def test_plan_with_netem() -> None:
    spec = NetemSpec(delay_ms=20, rate_mbps=20)
    plan = plan_link(spec, "wv1u", "ns1", have_netem=True)
    assert plan.use_netem and plan.userspace == () and plan.emulator_spec is None
    assert plan.apply_cmds == netem_cmds("wv1u", spec, "ns1")
    assert plan.cleanup_cmds == clear_cmds("wv1u", "ns1")


def test_plan_without_netem() -> None:
    spec = NetemSpec(delay_ms=20, jitter_ms=1, loss_pct=1, rate_mbps=20)
    plan = plan_link(spec, "wv1u", "ns1", have_netem=False)
    assert not plan.use_netem
    assert plan.apply_cmds == tbf_cmds("wv1u", 20, netns="ns1")
    assert plan.cleanup_cmds == clear_cmds("wv1u", "ns1")
    assert plan.userspace == ("delay_ms", "jitter_ms", "loss_pct")
    assert plan.emulator_spec == NetemSpec(delay_ms=20, jitter_ms=1, loss_pct=1)
    assert "kernel has no netem qdisc" in plan.message
    assert "rate via tbf, delay/jitter/loss via the user-space emulator (channel.emulator)" in plan.message


def test_plan_without_netem_or_rate() -> None:
    plan = plan_link(NetemSpec(loss_pct=2), "wv1u", None, have_netem=False)
    assert plan.apply_cmds == [] and plan.cleanup_cmds == [] and plan.userspace == ("loss_pct",)
    assert "no rate cap" in plan.message


def test_run_cmds_raises_with_command_and_stderr() -> None:
    runner = FakeRunner(fail_on=("tbf",))
    with pytest.raises(CommandError, match=r"tc qdisc replace dev eth0 root tbf.*Error: boom") as info:
        run_cmds(clear_cmds("eth0") + tbf_cmds("eth0", 10) + clear_cmds("eth1"), runner=runner)
    assert info.value.stderr == "Error: boom"
    assert len(runner.calls) == 2  # stops at the failure


def test_dry_run_prints_and_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    runner = FakeRunner()
    run_cmds(tbf_cmds("eth0", 10), dry_run=True, runner=runner)
    with applied(tbf_cmds("eth1", 10), clear_cmds("eth1"), runner=runner, dry_run=True):
        pass
    out = capsys.readouterr().out
    assert runner.calls == []
    assert "tc qdisc replace dev eth0 root tbf rate 10mbit" in out and "tc qdisc del dev eth1 root" in out


def test_applied_cleans_up_on_exception() -> None:
    runner = FakeRunner()
    with pytest.raises(KeyError):
        with applied(tbf_cmds("eth0", 10), clear_cmds("eth0"), runner=runner):
            assert len(runner.calls) == 1
            raise KeyError("body failed")
    assert runner.calls == tbf_cmds("eth0", 10) + clear_cmds("eth0")


def test_applied_cleans_up_when_apply_fails() -> None:
    runner = FakeRunner(fail_on=("tbf",))
    with pytest.raises(CommandError):
        with applied(tbf_cmds("eth0", 10), clear_cmds("eth0"), runner=runner):
            pytest.fail("body must not run")
    assert runner.calls[-1] == clear_cmds("eth0")[0]


def test_cleanup_error_does_not_mask_original(capsys: pytest.CaptureFixture[str]) -> None:
    runner = FakeRunner(fail_on=("del",))
    with pytest.raises(KeyError):
        with applied(tbf_cmds("eth0", 10), clear_cmds("eth0") + clear_cmds("eth1"), runner=runner):
            raise KeyError("original")
    assert len(runner.calls) == 3  # every cleanup command was tried
    assert "cleanup: command failed" in capsys.readouterr().err


def test_cleanup_error_raised_when_body_ok() -> None:
    with pytest.raises(CommandError, match="del"):
        with applied([], clear_cmds("eth0"), runner=FakeRunner(fail_on=("del",))):
            pass


def test_kernel_has_netem_yes() -> None:
    runner = FakeRunner()
    check = kernel_has_netem(dev="wv1u", netns="ns1", run=runner)
    assert check and "accepted on wv1u in ns1" in check.reason
    assert runner.calls[0][:4] == NS and "netem" in runner.calls[0]
    assert runner.calls[1] == clear_cmds("wv1u", "ns1")[0]


def test_kernel_has_netem_no() -> None:
    runner = FakeRunner(fail_on=("netem",))
    check = kernel_has_netem(dev="wv1u", netns="ns1", run=runner)
    assert not check and "kernel has no netem qdisc" in check.reason and "Error: boom" in check.reason
    assert len(runner.calls) == 1  # nothing to delete


@pytest.mark.parametrize("fail_on, expected", [((), True), (("netem",), False)])
def test_kernel_has_netem_scratch_namespace(fail_on: tuple[str, ...], expected: bool) -> None:
    runner = FakeRunner(fail_on=fail_on)
    assert kernel_has_netem(run=runner, is_root=True).available is expected
    scratch = runner.calls[0][3]
    assert runner.calls[0] == ["ip", "netns", "add", scratch] and scratch.startswith("wisv-probe-")
    assert runner.calls[-1] == ["ip", "netns", "del", scratch]


@pytest.mark.parametrize("text, expected", [
    ("CONFIG_NET_SCH_TBF=y\n# CONFIG_NET_SCH_NETEM is not set\n", False),
    ("CONFIG_NET_SCH_NETEM=m\n", True),
    ("CONFIG_NET_SCH_NETEM=y\n", True),
    ("CONFIG_NET_SCH_TBF=y\n", None),
])
def test_netem_from_kernel_config(text: str, expected: bool | None) -> None:
    verdict = netem_from_kernel_config(text)
    assert (verdict if verdict is None else verdict.available) is expected

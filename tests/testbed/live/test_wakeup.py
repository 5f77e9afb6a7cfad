"""The CPU wake-up latency hold: what it writes, when it does nothing, and its errors (on a stand-in file)."""
import struct

import pytest

from testbed.live.orchestrate.wakeup import cpu_wakeup_bound


def test_writes_the_bound_as_a_32_bit_int(tmp_path):
    dev = tmp_path / "cpu_dma_latency"
    dev.write_bytes(b"")
    with cpu_wakeup_bound(0, str(dev)) as desc:
        assert "<= 0 us" in desc
        assert struct.unpack("i", dev.read_bytes()[:4]) == (0,)


def test_none_holds_nothing(tmp_path):
    with cpu_wakeup_bound(None, str(tmp_path / "absent")) as desc:
        assert "default" in desc


def test_errors_are_clear(tmp_path):
    with pytest.raises(ValueError):
        with cpu_wakeup_bound(-1, str(tmp_path / "x")):
            pass
    with pytest.raises(FileNotFoundError, match="--cpu-wakeup-us"):
        with cpu_wakeup_bound(0, str(tmp_path / "absent")):
            pass

"""--capture on testbed.run: one file for one protocol and one UE, else one per protocol and UE."""
from __future__ import annotations

import dataclasses

from testbed.live.orchestrate.run import RunConfig, _capture_path
from testbed.live.ue.ue import UEConfig


def test_capture_path_per_protocol_and_ue():
    one = RunConfig(protocol="fh", ue=UEConfig(capture="runs/x.pcap"))
    assert _capture_path(one, ["fh"], 0) == "runs/x.pcap"
    many = dataclasses.replace(one, protocol="all")
    assert _capture_path(many, ["sh"], 0) == "runs/x-sh-ue0.pcap"
    assert _capture_path(dataclasses.replace(one, ues=2), ["fh"], 1) == "runs/x-fh-ue1.pcap"
    assert _capture_path(RunConfig(), ["fh"], 0) is None
    both = dataclasses.replace(one, protocol="server,fh", interleave=True)  # one UE process runs both
    assert _capture_path(both, ["server", "fh"], 0) == "runs/x-server+fh-ue0.pcap"

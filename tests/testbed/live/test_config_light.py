"""The processes' config dataclasses import alone: no torch, transformers or zmq to read a dataclass."""
import subprocess
import sys

CODE = """
import sys
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.ue.ueconfig import UEConfig
from wisv.serving.vllm_config import VllmConfig
assert ServeConfig().vllm == VllmConfig() and UEConfig().draft_len == 8
print(sorted(m for m in ("torch", "transformers", "zmq") if m in sys.modules))
"""


def test_the_edge_and_ue_configs_load_no_torch_transformers_or_zmq():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_process_modules_still_offer_their_configs():
    from testbed.live.edge import serve, serveconfig
    from testbed.live.ue import ue, ueconfig
    assert serve.ServeConfig is serveconfig.ServeConfig and ue.UEConfig is ueconfig.UEConfig

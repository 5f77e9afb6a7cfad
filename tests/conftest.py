"""Test-wide settings: one torch thread (tiny models run fastest single-threaded, and CI has 2 cores), and the rooms
whose tests start live processes (edges, UEs, a pip install) marked slow, so that ``make test-fast`` leaves them out;
single slow tests elsewhere carry ``@pytest.mark.slow`` themselves."""
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

HERE = Path(__file__).resolve().parent
LIVE_DIRS = tuple(HERE / d for d in ("testbed/live", "testbed/hostile", "testbed/chaos", "examples"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under LIVE_DIRS slow: they start testbed processes over sockets (or install a package)."""
    for item in items:
        if any(item.path.is_relative_to(d) for d in LIVE_DIRS):
            item.add_marker(pytest.mark.slow)

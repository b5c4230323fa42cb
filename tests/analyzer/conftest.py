"""Fixtures for the analyzer tests: hand-made trajectories and a live fake OpenAI server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_openai_server import FakeOpenAIServer  # noqa: E402
from traj_factory import FAILURE_ROWS, SUCCESS_ROWS, make_traj  # noqa: E402


@pytest.fixture
def success_traj():
    return make_traj(SUCCESS_ROWS, success=True)


@pytest.fixture
def failure_traj():
    return make_traj(FAILURE_ROWS, success=False)


@pytest.fixture
def fake_server():
    srv = FakeOpenAIServer(slow_s=5.0).start()
    try:
        yield srv
    finally:
        srv.stop()

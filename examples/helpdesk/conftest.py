"""The agent's tools for steadyloop's `agent_env` fixture: a fresh desk per test."""

from __future__ import annotations

import pytest

from examples.helpdesk.agent import SYSTEM_PROMPT, Desk, build_registry
from steadyloop.tools import ToolRegistry


@pytest.fixture
def desk() -> Desk:
    return Desk()


@pytest.fixture
def steadyloop_tools(desk: Desk) -> ToolRegistry:
    return build_registry(desk)


@pytest.fixture
def steadyloop_system_prompt() -> str:
    return SYSTEM_PROMPT

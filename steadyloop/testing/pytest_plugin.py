"""steadyloop's pytest plugin: the `agent_env` fixture for testing your own agent.

Installed with steadyloop and loaded by pytest automatically (the `pytest11` entry point
`steadyloop`), so a project only has to say which tools its agent has:

    # conftest.py
    import pytest
    from myagent import build_registry

    @pytest.fixture
    def steadyloop_tools():
        return build_registry()

    # test_agent.py
    from steadyloop.testing import ScriptedModel

    async def test_answers(agent_env):
        run = await agent_env.run(ScriptedModel().says("hi"), "hello")
        assert run.answer == "hi"

Why a plugin and not only importable fixtures: a fixture the user has to import into
every conftest is one more line to get wrong, and pytest's entry points are how the
ecosystem ships fixtures (pytest-asyncio, pytest-httpx). It starts nothing until a test
asks for `agent_env`; loading it imports the `steadyloop` package (about half a second,
once per session, which a project testing a steadyloop agent pays anyway). Everything the
fixture does is `AgentEnv`, a plain async context manager, for runners other than
pytest. Disable the plugin with `-p no:steadyloop`.

The fixture is async, so it needs pytest-asyncio (the `testing` extra installs it);
without it, `agent_env` fails with that message. No `asyncio_mode` setting is needed:
pytest-asyncio's default (strict) mode runs only marked async tests, so the plugin marks
every async test that asks for `agent_env`, directly or through other fixtures, as
`@pytest.mark.asyncio` would. It does so inside pytest-asyncio's own collection hook
(pytest-asyncio turns a marked coroutine into its test item there; a mark added any
later leaves pytest saying "async def functions are not natively supported").
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Generator
from typing import TYPE_CHECKING, Any

import pluggy
import pytest

if TYPE_CHECKING:
    from steadyloop.testing._agent_env import AgentEnv
    from steadyloop.tools._registry import ToolRegistry


@pytest.fixture
def steadyloop_tools() -> ToolRegistry:
    """Override this fixture with your agent's `ToolRegistry` (fresh per test, so each
    test counts its own tool effects)."""
    raise pytest.UsageError(
        "the agent_env fixture serves your tools: define a fixture named "
        "`steadyloop_tools` (in conftest.py) that returns your ToolRegistry"
    )


@pytest.fixture
def steadyloop_system_prompt() -> str | None:
    """Override to give every run of `agent_env` your agent's system prompt."""
    return None


async def _agent_env(
    steadyloop_tools: ToolRegistry, steadyloop_system_prompt: str | None
) -> AsyncIterator[AgentEnv]:
    """A worker serving `steadyloop_tools` on Temporal's time-skipping test server, and a
    scripted model provider: `await agent_env.run(ScriptedModel()..., prompt)`."""
    from steadyloop.testing._agent_env import AgentEnv

    async with AgentEnv(steadyloop_tools, system_prompt=steadyloop_system_prompt) as env:
        yield env


def _without_pytest_asyncio() -> None:
    raise pytest.UsageError(
        "the agent_env fixture is async: install pytest-asyncio (pip install pytest-asyncio)"
    )


agent_env: Any
try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - pytest-asyncio is in steadyloop's dev extra
    agent_env = pytest.fixture(name="agent_env")(_without_pytest_asyncio)
else:
    agent_env = pytest_asyncio.fixture(name="agent_env")(_agent_env)


# trylast: called after pytest-asyncio's wrapper, so nested inside it, its code after
# `yield` runs first and pytest-asyncio sees the mark.
@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, pluggy.Result[Any], None]:
    """Mark the async tests that use `agent_env` for pytest-asyncio (see the docstring)."""
    outcome = yield
    try:
        made = outcome.get_result()
    except BaseException:
        return
    if not inspect.iscoroutinefunction(obj) or not collector.config.pluginmanager.has_plugin(
        "asyncio"
    ):
        return  # without pytest-asyncio the mark is unknown; agent_env says what to install
    for item in made if isinstance(made, list) else [made]:
        if (
            isinstance(item, pytest.Function)
            and "agent_env" in item.fixturenames
            and item.get_closest_marker("asyncio") is None
        ):
            item.add_marker(pytest.mark.asyncio)

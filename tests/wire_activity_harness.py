"""The model activity on one endpoint of a chosen wire, as a worker runs it, for the
activity-level tests of each wire (`test_responses_activity.py`,
`test_anthropic_activity.py`), and the `ActivityError` a workflow receives from it.

The key is read from the worker's environment, never from the request: each endpoint
names its variable, set by the test through `monkeypatch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import ActivityEnvironment

from steadyloop._activities import ModelActivities
from steadyloop._chat import ChatMessage, ToolSpec
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.bounds import WireApi
from steadyloop._stream.completion import (
    STREAM_COMPLETION_ACTIVITY,
    AssembledTurn,
    CompletionRequest,
)
from steadyloop.testing import ScriptedServer

TOOL = ToolSpec(name="f", parameters={"type": "object", "properties": {}})


@dataclass(frozen=True)
class WireEndpoint:
    """One endpoint: its name, wire, model and key (and the variable holding it)."""

    name: str
    api: WireApi
    model: str
    key_env: str
    key: str

    def request(self, **fields: Any) -> CompletionRequest:
        return CompletionRequest(
            endpoint=self.name,
            model=self.model,
            messages=[ChatMessage(role="user", content="hi")],
            tools=[TOOL],
            **fields,
        )

    async def activity(
        self, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, **endpoint: Any
    ) -> AssembledTurn:
        """The activity as a worker runs it: the key from the environment, one endpoint."""
        monkeypatch.setenv(self.key_env, self.key)
        registry = EndpointRegistry(
            [server.endpoint(self.name, api=self.api, api_key_env=self.key_env, **endpoint)]
        )
        async with ModelActivities(registry) as model:
            run = ActivityEnvironment().run(model.stream_completion, self.request())
            result: AssembledTurn = await run
            return result

    async def failed(
        self, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, **endpoint: Any
    ) -> ApplicationError:
        with pytest.raises(ApplicationError) as info:
            await self.activity(server, monkeypatch, **endpoint)
        return info.value


def activity_error(cause: BaseException) -> ActivityError:
    """`cause` as the workflow receives it: wrapped in the model activity's failure."""
    error = ActivityError(
        "activity failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="worker",
        activity_type=STREAM_COMPLETION_ACTIVITY,
        activity_id="1",
        retry_state=None,
    )
    error.__cause__ = cause
    return error

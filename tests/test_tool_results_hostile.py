"""Hostile tool results and heartbeats, through the whole loop.

Time-skipping test server, real HTTP to the scripted provider, the worker `steadyloop
worker` runs. What decides the outcome downstream is asserted, not a projection:

- item 3: an opaque tool does its effect, then returns a value that has no faithful
  encoding (lone surrogates, bytes, 50 MB). The model asks for the same call again. The
  effect ran once, the activity completed (no ActivityTaskFailed), the repeat was a
  replay, and every call was answered exactly once.
- item 14: a tool heartbeats progress nested 300 and 1000 levels deep (lists and
  dicts), from this worker and from a foreign one whose converter sends what ours
  refuses, then times out. No workflow task failed, and the run went on to its answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from loop_harness import (
    ENDPOINT,
    MODEL,
    assert_every_call_answered,
    loop_worker,
    tool_messages,
)
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)
from temporalio.testing import WorkflowEnvironment

from steadyloop._activities.model_stream import ModelActivities
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._receipts.ledger import DEFAULT_RESULT_LIMIT_BYTES
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunInput, RunResult
from steadyloop._temporal_binaries import time_skipping_server_path
from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import (
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    text_response,
    tool_calls_response,
)
from steadyloop.tools import ToolRegistry, tool
from steadyloop.tools._content import MAX_TOOL_CONTENT_BYTES

pytestmark = pytest.mark.slow

effects: Counter[str] = Counter()


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__


def _objects() -> dict[str, Any]:
    value: dict[str, Any] = {"big": 10**5000, "thing": Unprintable(), "inf": float("inf")}
    value["self"] = value
    return value


HOSTILE: dict[str, Any] = {
    "surrogateescape": b"caf\xe9 \xff".decode(errors="surrogateescape"),
    "bytes": {"raw": b"\xff\x00", "set": {1}, "nan": float("nan"), "ok": "fine"},
    "objects": _objects(),
    "flood": "\udcff" + "x" * 50_000_000,
}


@tool(effect="opaque")
async def hostile_note(kind: str) -> Any:
    """An opaque effect whose result cannot be encoded as it is."""
    effects[kind] += 1
    return HOSTILE[kind]


def deep(levels: int, *, dicts: bool) -> Any:
    value: Any = {} if dicts else []
    for _ in range(levels - 1):
        value = {"a": value} if dicts else [value]
    return value


@tool(effect="resumable", timeout=timedelta(seconds=2), heartbeat_timeout=timedelta(seconds=1))
async def deep_progress(levels: int, dicts: bool) -> str:
    """Heartbeats a deep trail directly (past `ToolProgress`, as careless code could),
    then outlives its timeout."""
    effects[f"deep_progress {levels} {dicts}"] += 1
    try:
        activity.heartbeat([deep(levels, dicts=dicts)])
    except Exception:
        effects["heartbeat refused"] += 1
    await asyncio.sleep(3)
    return "too late"


REGISTRY = ToolRegistry([hostile_note, deep_progress])
TOOLS = ["hostile_note", "deep_progress"]


class RawJson(str):
    """Heartbeat details sent verbatim, as an older or foreign worker's converter may."""


class _RawJsonConverter(PydanticJSONPlainPayloadConverter):
    def to_payload(self, value: Any) -> Payload | None:
        if isinstance(value, RawJson):
            return Payload(metadata={"encoding": b"json/plain"}, data=str(value).encode())
        return super().to_payload(value)


class ForeignPayloadConverter(CompositePayloadConverter):
    """steadyloop's converter, plus the ability to send JSON it would never produce.
    Decoding is unchanged: the workflow reads those bytes exactly as it would read a
    foreign worker's."""

    def __init__(self) -> None:
        raw = _RawJsonConverter()
        super().__init__(
            *(
                raw if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


@tool(effect="resumable", timeout=timedelta(seconds=2), heartbeat_timeout=timedelta(seconds=1))
async def foreign_deep_progress(levels: int, dicts: bool) -> str:
    """Heartbeats raw deep JSON (what a foreign worker could send), then hangs."""
    effects[f"foreign_deep_progress {levels} {dicts}"] += 1
    opening, closing = ('{"a":', "}") if dicts else ("[", "]")
    innermost = "{}" if dicts else "[]"
    activity.heartbeat(
        RawJson("[" + opening * (levels - 1) + innermost + closing * (levels - 1) + "]")
    )
    await asyncio.sleep(3)
    return "too late"


REGISTRY = ToolRegistry([hostile_note, deep_progress, foreign_deep_progress])
TOOLS = ["hostile_note", "deep_progress", "foreign_deep_progress"]


@dataclasses.dataclass
class Loop:
    env: WorkflowEnvironment
    task_queue: str

    async def start(self, prompt: str) -> WorkflowHandle[ToolLoopWorkflow, RunResult]:
        run = RunInput(endpoint=ENDPOINT, model=MODEL, prompt=prompt, tools=TOOLS)
        return await self.env.client.start_workflow(
            ToolLoopWorkflow.run, run, id=f"hostile-{uuid.uuid4()}", task_queue=self.task_queue
        )


@asynccontextmanager
async def loop_with(script: Sequence[ScriptedResponse]) -> AsyncIterator[Loop]:
    effects.clear()
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(ScriptedServer(list(script)))
        endpoints = EndpointRegistry([server.endpoint(ENDPOINT)])
        model = await stack.enter_async_context(ModelActivities(endpoints, environ={}))
        converter = dataclasses.replace(
            steadyloop_data_converter(None), payload_converter_class=ForeignPayloadConverter
        )
        env = await WorkflowEnvironment.start_time_skipping(
            data_converter=converter, test_server_existing_path=time_skipping_server_path()
        )
        await stack.enter_async_context(env)
        task_queue = f"tq-{uuid.uuid4()}"
        await stack.enter_async_context(loop_worker(env.client, task_queue, model, REGISTRY))
        yield Loop(env, task_queue)


async def event_types(handle: WorkflowHandle[Any, Any]) -> Counter[int]:
    history = await handle.fetch_history()
    return Counter(event.event_type for event in history.events)


# ---------------------------------------------------------------- item 3


@pytest.mark.parametrize("kind", list(HOSTILE))
async def test_an_opaque_effect_whose_result_cannot_be_encoded_runs_once(kind: str) -> None:
    script = [
        tool_calls_response(ScriptedCall("hostile_note", {"kind": kind}, id="h1")),
        tool_calls_response(ScriptedCall("hostile_note", {"kind": kind}, id="h2")),
        text_response("done"),
    ]
    async with loop_with(script) as loop:
        handle = await loop.start("note it twice")
        result = await asyncio.wait_for(handle.result(), 60)
        events = await event_types(handle)
    assert effects[kind] == 1  # the repeat did not run the effect again
    assert result.stop_reason == "final_answer" and result.final_answer == "done"
    assert result.stats.tool_replays == 1  # the second call replayed the completed receipt
    assert events[EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED] == 0
    assert events[EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED] == 0
    assert_every_call_answered(result.transcript)
    first, second = tool_messages(result.transcript)
    assert (first.tool_call_id, second.tool_call_id) == ("h1", "h2")
    for message in (first, second):
        (message.content or "").encode("utf-8")
    if kind == "surrogateescape":
        assert first.content == second.content == "caf\ufffd \ufffd"
    elif kind == "bytes":
        assert first.content == second.content
        assert json.loads(first.content or "") == {
            "raw": "b'\\xff\\x00'",
            "set": [1],
            "nan": None,
            "ok": "fine",
        }
    elif kind == "objects":
        assert first.content == second.content
        assert json.loads(first.content or "") == {
            "big": "[steadyloop: integer of 16610 bits]",
            "thing": "[steadyloop: unrepresentable Unprintable]",
            "inf": None,
            "self": "[steadyloop: cycle, dict contains itself]",
        }
    else:
        # Bounded and marked: by the tool cap (64 KB), and the replay by the receipt's
        # own bound (16 KB), which is what the ledger keeps today.
        for message in (first, second):
            text = message.content or ""
            assert len(text.encode("utf-8")) <= MAX_TOOL_CONTENT_BYTES
            assert text.startswith("\ufffdxxx") and "truncated" in text
        assert len((second.content or "").encode("utf-8")) <= DEFAULT_RESULT_LIMIT_BYTES


# ---------------------------------------------------------------- item 14


@pytest.mark.parametrize("levels", [150, 300, 1000])
@pytest.mark.parametrize("dicts", [False, True], ids=["lists", "dicts"])
@pytest.mark.parametrize("name", ["deep_progress", "foreign_deep_progress"])
async def test_deep_heartbeat_progress_never_fails_a_workflow_task(
    levels: int, dicts: bool, name: str
) -> None:
    script = [
        tool_calls_response(ScriptedCall(name, {"levels": levels, "dicts": dicts}, id="d1")),
        text_response("moved on"),
    ]
    async with loop_with(script) as loop:
        handle = await loop.start("go deep")
        result = await asyncio.wait_for(handle.result(), 90)
        events = await event_types(handle)
    assert events[EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED] == 0
    assert result.stop_reason == "final_answer" and result.final_answer == "moved on"
    assert_every_call_answered(result.transcript)
    (answer_message,) = tool_messages(result.transcript)
    assert answer_message.tool_call_id == "d1"

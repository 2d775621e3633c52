"""The tool activities, run through Temporal's `ActivityEnvironment`: one outcome per status."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from datetime import date
from typing import Any

import pytest
from pydantic import BaseModel, field_validator
from temporalio import activity
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._history.budget import MAX_INLINE_PAYLOAD_BYTES
from steadyloop._receipts.canonical_json import MAX_DEPTH
from steadyloop.tools import (
    MAX_TOOL_CONTENT_BYTES,
    ToolInvocation,
    ToolRegistry,
    current_invocation,
    tool,
)
from steadyloop.tools._payloads import (
    DESCRIBE_TOOLS_ACTIVITY,
    RUN_TOOL_ACTIVITY,
    DescribeToolsInput,
    DescribeToolsResult,
    ToolDescription,
    ToolOutcome,
)

calls: list[str] = []


class Line(BaseModel):
    sku: str
    qty: int

    @field_validator("qty")
    @classmethod
    def positive(cls, qty: int) -> int:
        if qty <= 0:
            raise ValueError("quantity must be positive")
        return qty


@dataclasses.dataclass
class Receipt:
    total: float
    day: date


@tool(effect="pure")
async def echo(text: str) -> str:
    """Return the text unchanged."""
    calls.append("echo")
    return text


@tool
async def order(customer: str, lines: list[Line]) -> dict[str, Any]:
    """Place an order."""
    calls.append("order")
    return {"customer": customer, "lines": len(lines)}


@tool
async def structured() -> Receipt:
    calls.append("structured")
    return Receipt(total=1.5, day=date(2024, 1, 2))


@tool
async def nothing() -> None:
    calls.append("nothing")


@tool
async def explode(reason: str) -> str:
    calls.append("explode")
    raise RuntimeError(reason)


@tool
async def silent_failure() -> str:
    raise KeyError()


@tool
async def huge(size: int) -> str:
    return "é" * size


@tool
async def deliberate() -> str:
    raise ApplicationError("stop the activity", non_retryable=True)


@tool
async def who_called() -> dict[str, str]:
    invocation = current_invocation()
    return {
        "call": invocation.call_id,
        "run": invocation.workflow_id,
        "tenant": invocation.tenant_id,
    }


REGISTRY = ToolRegistry(
    [echo, order, structured, nothing, explode, silent_failure, huge, deliberate, who_called]
)


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    calls.clear()


def invocation(
    tool_name: str, arguments: dict[str, Any] | None = None, **extra: Any
) -> ToolInvocation:
    return ToolInvocation(
        tool=tool_name,
        arguments=arguments or {},
        call_id="call_1",
        workflow_id="wf-1",
        tenant_id="acme",
        **extra,
    )


async def run(tool_invocation: ToolInvocation, registry: ToolRegistry = REGISTRY) -> ToolOutcome:
    activities = ToolActivities(registry)
    outcome = await ActivityEnvironment().run(activities.run_tool, tool_invocation)
    assert isinstance(outcome, ToolOutcome)
    return outcome


# ---------------------------------------------------------------- ok


async def test_ok_string_result_is_content_verbatim() -> None:
    outcome = await run(invocation("echo", {"text": '  {"not": "re-encoded"}\n'}))
    assert outcome == ToolOutcome(status="ok", content='  {"not": "re-encoded"}\n')
    assert calls == ["echo"]


async def test_ok_structured_results_are_json() -> None:
    ordered = await run(invocation("order", {"customer": "c", "lines": [{"sku": "a", "qty": 1}]}))
    assert ordered.content == '{"customer":"c","lines":1}'
    assert (await run(invocation("structured"))).content == '{"total":1.5,"day":"2024-01-02"}'
    assert (await run(invocation("nothing"))).content == "null"


async def test_tool_sees_its_invocation() -> None:
    outcome = await run(invocation("who_called"))
    assert outcome.content == '{"call":"call_1","run":"wf-1","tenant":"acme"}'
    with pytest.raises(RuntimeError, match="only available while a tool call runs"):
        current_invocation()


# ---------------------------------------------------------------- tool_error


async def test_tool_that_raises_answers_with_its_error_and_does_not_fail_the_activity() -> None:
    outcome = await run(invocation("explode", {"reason": "disk full"}))
    assert outcome.status == "tool_error"
    assert outcome.error_type == "RuntimeError"
    assert outcome.content == "Tool 'explode' failed: RuntimeError: disk full"
    assert calls == ["explode"]


async def test_error_without_message_still_names_its_type() -> None:
    outcome = await run(invocation("silent_failure"))
    assert (outcome.status, outcome.error_type) == ("tool_error", "KeyError")
    assert outcome.content == "Tool 'silent_failure' failed: KeyError"


async def test_application_error_propagates_as_an_activity_failure() -> None:
    with pytest.raises(ApplicationError, match="stop the activity"):
        await run(invocation("deliberate"))


# ---------------------------------------------------------------- invalid_arguments


async def test_invalid_arguments_name_each_field_path_and_run_no_tool_code() -> None:
    outcome = await run(
        invocation(
            "order",
            {"lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": "many"}, {"qty": 0}], "x": 1},
        )
    )
    assert outcome.status == "invalid_arguments"
    assert calls == []
    lines = outcome.content.splitlines()
    assert lines[0] == "Invalid arguments for tool 'order'; the tool did not run."
    assert "- customer: Field required" in lines
    assert any(line.startswith("- lines[1].qty: Input should be a valid integer") for line in lines)
    assert "- lines[2].sku: Field required" in lines
    assert any(
        line.startswith("- lines[2].qty: Value error, quantity must be positive") for line in lines
    )
    assert "- x: Extra inputs are not permitted" in lines
    assert lines[-1] == (
        "Expected arguments: customer (string, required), lines (array, required). "
        "No other arguments are accepted."
    )


async def test_zero_argument_tool_refuses_arguments_and_says_send_empty_object() -> None:
    outcome = await run(invocation("nothing", {"unexpected": True}))
    assert outcome.status == "invalid_arguments"
    assert outcome.content.endswith("The tool takes no arguments: send {}.")
    assert calls == []


# ---------------------------------------------------------------- unknown_tool


async def test_unknown_tool_lists_the_available_ones() -> None:
    outcome = await run(invocation("delete_everything"))
    assert outcome.status == "unknown_tool"
    assert outcome.content == (
        "Unknown tool 'delete_everything'. Available tools: " + ", ".join(REGISTRY.names()) + "."
    )


async def test_allowed_tools_hides_the_others_even_if_registered() -> None:
    outcome = await run(invocation("explode", {"reason": "x"}, allowed_tools=["echo", "order"]))
    assert outcome.status == "unknown_tool"
    assert outcome.content == "Unknown tool 'explode'. Available tools: echo, order."
    assert calls == []
    assert (await run(invocation("echo", {"text": "ok"}, allowed_tools=["echo"]))).status == "ok"


async def test_empty_registry_says_no_tools() -> None:
    outcome = await run(invocation("echo"), ToolRegistry())
    assert outcome.content == "Unknown tool 'echo'. No tools are available in this run."


# ---------------------------------------------------------------- size cap


async def test_huge_result_is_capped_on_a_character_boundary_with_a_marker() -> None:
    outcome = await run(invocation("huge", {"size": MAX_TOOL_CONTENT_BYTES}))
    assert outcome.status == "ok"
    assert outcome.truncated is True
    assert len(outcome.content.encode("utf-8")) <= MAX_TOOL_CONTENT_BYTES
    body, marker = outcome.content.rsplit("\n", 1)
    assert set(body) == {"é"}
    assert marker == (
        f"[steadyloop: output truncated, {len(body.encode())} of "
        f"{2 * MAX_TOOL_CONTENT_BYTES} bytes shown]"
    )


async def test_result_at_the_cap_is_untouched() -> None:
    outcome = await run(invocation("huge", {"size": MAX_TOOL_CONTENT_BYTES // 2}))
    assert outcome.truncated is False
    assert len(outcome.content.encode("utf-8")) == MAX_TOOL_CONTENT_BYTES


async def test_whole_outcome_fits_well_under_temporal_payload_limit() -> None:
    outcome = await run(invocation("huge", {"size": 3_000_000}))
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([outcome])
    assert len(payload.data) < 2 * MAX_TOOL_CONTENT_BYTES < 2 * 1024 * 1024


# ---------------------------------------------------------------- cancellation


async def test_cancellation_propagates_into_the_tool_and_out_of_the_activity() -> None:
    started = asyncio.Event()
    seen: list[str] = []

    @tool
    async def wait_forever() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "unreachable"

    environment = ActivityEnvironment()
    activities = ToolActivities(ToolRegistry([wait_forever]))
    task = asyncio.create_task(environment.run(activities.run_tool, invocation("wait_forever")))
    await started.wait()
    environment.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


# ---------------------------------------------------------------- describe_tools


async def test_describe_tools_reports_unknown_names_as_a_value() -> None:
    activities = ToolActivities(REGISTRY)
    result = await ActivityEnvironment().run(
        activities.describe_tools, DescribeToolsInput(names=["order", "nope", "echo", "order"])
    )
    assert isinstance(result, DescribeToolsResult)
    assert [d.name for d in result.tools] == ["order", "echo"]
    assert result.unknown == ["nope"]
    assert result.available == REGISTRY.names()
    assert result.tools[0] == order.describe()


async def test_describe_tools_without_names_describes_all_and_empty_list_none() -> None:
    activities = ToolActivities(REGISTRY)
    everything = await ActivityEnvironment().run(activities.describe_tools, DescribeToolsInput())
    assert [d.name for d in everything.tools] == REGISTRY.names()
    nothing_asked = await ActivityEnvironment().run(
        activities.describe_tools, DescribeToolsInput(names=[])
    )
    assert (nothing_asked.tools, nothing_asked.unknown) == ([], [])


def test_activity_names_are_stable() -> None:
    activities = ToolActivities(REGISTRY)
    # `_Definition` is what `Worker` reads to register an activity under its name.
    names = [activity._Definition.must_from_callable(fn).name for fn in activities.activities()]
    assert names == [DESCRIBE_TOOLS_ACTIVITY, RUN_TOOL_ACTIVITY]
    assert names == ["steadyloop.describe_tools", "steadyloop.run_tool"]


# ---------------------------------------------------------------- payloads


@pytest.mark.parametrize(
    "value",
    [
        invocation("order", {"customer": "c", "lines": [{"sku": "a", "qty": 1}], "n": None}),
        invocation("echo", {"text": "ünï"}, allowed_tools=["echo"]),
        ToolOutcome(status="ok", content="3"),
        ToolOutcome(status="tool_error", content="x", error_type="RuntimeError", truncated=True),
        order.describe(),
        DescribeToolsInput(names=None),
        DescribeToolsResult(
            tools=[echo.describe()], unknown=["x"], available=["echo"], payload_limit_bytes=1
        ),
    ],
    ids=lambda value: type(value).__name__,
)
def test_payloads_round_trip_through_the_pydantic_data_converter(value: BaseModel) -> None:
    converter = pydantic_data_converter.payload_converter
    (payload,) = converter.to_payloads([value])
    (back,) = converter.from_payloads([payload], [type(value)])
    assert back == value
    assert type(back) is type(value)


def test_description_round_trip_keeps_the_schema_exactly() -> None:
    converter = pydantic_data_converter.payload_converter
    (payload,) = converter.to_payloads([order.describe()])
    (back,) = converter.from_payloads([payload], [ToolDescription])
    assert back.parameters == order.parameters
    assert back.to_spec() == order.to_spec()


def test_outcome_answers_its_call_with_a_tool_message() -> None:
    message = ToolOutcome(status="ok", content="3").to_message("call_9")
    assert message.to_wire() == {"role": "tool", "content": "3", "tool_call_id": "call_9"}


# ---------------------------------------------------------------- hostile results
# Once a tool returned, its effect happened: the outcome must be `ok` and must serialize,
# or the workflow marks the receipt failed and the model's repeat runs the effect again.


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    def __str__(self) -> str:
        raise RuntimeError("no str")


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    return loop


def _deep(levels: int, *, dicts: bool) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = {"a": value} if dicts else [value]
    return value


HOSTILE_RESULTS: dict[str, tuple[Any, str]] = {
    # name: (what the tool returns, text the content must hold)
    "surrogateescape text": (b"caf\xe9 \xff".decode(errors="surrogateescape"), "caf\ufffd \ufffd"),
    "lone high surrogate": ("half \ud83d", "half \ufffd"),
    "pair as two code points": ("\ud83d\ude00 ok", "\U0001f600 ok"),
    "dict with bytes": ({"data": b"\xff\x00abc", "ok": b"fine"}, '"ok":"fine"'),
    "surrogate in a key": ({"k\udcff": ["v\ud800"]}, '{"k\ufffd":["v\ufffd"]}'),
    "set beside bytes": ({"s": {1}, "b": b"\xff"}, '"s":[1]'),
    "object whose str raises": ([Unprintable()], "[steadyloop: unrepresentable Unprintable]"),
    "nan and inf beside bytes": ({"n": math.nan, "i": -math.inf, "b": b"\xff"}, '"n":null'),
    "huge int beside bytes": ({"n": 10**5000, "b": b"\xff"}, "[steadyloop: integer of"),
    "cycle": (_cycle(), "[steadyloop: cycle, dict contains itself]"),
    "300-deep lists": (_deep(300, dicts=False), f"[steadyloop: nested deeper than {MAX_DEPTH}"),
    "2500-deep dicts": (_deep(2500, dicts=True), f"[steadyloop: nested deeper than {MAX_DEPTH}"),
    "NUL": ("a\x00b", "a\x00b"),
}


@pytest.mark.parametrize("name", list(HOSTILE_RESULTS))
async def test_a_result_that_cannot_be_encoded_is_answered_ok_with_markers(name: str) -> None:
    returned, expected = HOSTILE_RESULTS[name]
    effects: list[str] = []

    @tool(effect="opaque")
    async def hostile() -> Any:
        effects.append("done")
        return returned

    outcome = await run(invocation("hostile"), ToolRegistry([hostile]))
    assert effects == ["done"]
    assert outcome.status == "ok", outcome
    assert expected in outcome.content
    # What decides whether the activity completes: the outcome crosses the converter.
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([outcome])
    (back,) = pydantic_data_converter.payload_converter.from_payloads([payload], [ToolOutcome])
    assert back == outcome


async def test_a_50_mb_result_with_lone_surrogates_is_ok_bounded_and_marked() -> None:
    @tool(effect="opaque")
    async def flood() -> dict[str, Any]:
        return {"blob": "\udcff" * 25_000_000, "raw": b"\xff"}

    outcome = await run(invocation("flood"), ToolRegistry([flood]))
    assert outcome.status == "ok" and outcome.truncated
    assert len(outcome.content.encode("utf-8")) <= MAX_TOOL_CONTENT_BYTES
    assert outcome.content.endswith(" bytes shown]")
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([outcome])
    assert len(payload.data) < 2 * MAX_TOOL_CONTENT_BYTES


class SurrogateMessage(Exception):
    pass


class UnreadableMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


class NotAStringMessage(Exception):
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (SurrogateMessage("bad \udcff byte"), "SurrogateMessage: bad \ufffd byte"),
        (UnreadableMessage(), "UnreadableMessage: [steadyloop: the exception's message could"),
        (NotAStringMessage(), "NotAStringMessage: [steadyloop: the exception's message could"),
    ],
)
async def test_an_exception_with_an_unreadable_message_is_a_clean_tool_error(
    error: Exception, expected: str
) -> None:
    @tool(effect="opaque")
    async def raiser() -> str:
        raise error

    outcome = await run(invocation("raiser"), ToolRegistry([raiser]))
    assert outcome.status == "tool_error"
    assert outcome.error_type == type(error).__name__
    assert expected in outcome.content
    pydantic_data_converter.payload_converter.to_payloads([outcome])


@pytest.mark.parametrize(
    ("message", "status", "expected"),
    [
        ("refused", "invalid_arguments", "word: Value error, refused (got 'x\\ud800')"),
        # pydantic itself raises UnicodeEncodeError building this error: still answered.
        ("no \udcff", "tool_error", "UnicodeEncodeError"),
    ],
)
async def test_arguments_or_a_validator_message_with_lone_surrogates_are_answered_encodable(
    message: str, status: str, expected: str
) -> None:
    class Picky(BaseModel):
        word: str

        @field_validator("word")
        @classmethod
        def refuse(cls, word: str) -> str:
            raise ValueError(message)

    @tool
    async def picky(item: Picky) -> str:
        return item.word

    outcome = await run(invocation("picky", {"word": "x\ud800"}), ToolRegistry([picky]))
    assert outcome.status == status
    assert expected in outcome.content
    pydantic_data_converter.payload_converter.to_payloads([outcome])


async def test_an_unknown_tool_name_with_a_lone_surrogate_is_answered_encodable() -> None:
    outcome = await run(invocation("ghost\ud83d"))
    assert outcome.status == "unknown_tool"
    assert "ghost" in outcome.content
    pydantic_data_converter.payload_converter.to_payloads([outcome])


async def test_a_large_configured_cap_still_returns_an_outcome_temporal_accepts() -> None:
    # 1.5 MB of NUL is 1.5 MB of UTF-8 but 9 MB of JSON (each is `\u0000`): under the
    # configured cap, over Temporal's payload limit, which would fail the activity after
    # the effect. The cap shrinks until the encoded outcome fits.
    @tool(effect="opaque")
    async def zeros() -> str:
        return "\x00" * 1_500_000

    activities = ToolActivities(ToolRegistry([zeros]), max_content_bytes=1_800_000)
    outcome = await ActivityEnvironment().run(activities.run_tool, invocation("zeros"))
    assert isinstance(outcome, ToolOutcome)
    assert outcome.status == "ok" and outcome.truncated
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([outcome])
    assert len(payload.data) <= MAX_INLINE_PAYLOAD_BYTES
    assert outcome.content.startswith("\x00") and outcome.content.endswith(" bytes shown]")

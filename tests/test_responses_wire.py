"""The OpenAI Responses wire: the request built from the transcript, and the assembler
folding recorded stream shapes into the same turn the chat wire returns.

Shapes: OpenAI's own (every event with `output_index`, `sequence_number`, item ids;
reasoning items with `encrypted_content`), llama.cpp's (recorded from xllamacpp: no
`output_index`, no `sequence_number`, the delta's `item_id` is the item's `id`), and
the quirks servers are known to send (arguments only at `.done`, ciphertext deltas, `output: []`
in `response.completed`, another `call_id` there, stripped `event:` lines).
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from steadyloop._chat import ChatMessage, PassbackItem, ToolCall, ToolSpec
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._routing.taxonomy import StreamFailed
from steadyloop._stream.completion import AssembledTurn, CompletionRequest
from steadyloop._stream.responses_assembly import ResponsesAssembler
from steadyloop._stream.responses_request import build_responses_body
from steadyloop._stream.sse import SSEDecoder
from steadyloop._stream.wire import RESPONSES_WIRE

ENDPOINT = EndpointConfig(name="gpt", base_url="http://h/v1", api="responses")
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
# As a server may write it: an escaped slash, a space, a non-ASCII escape. Serialized
# again it would read differently, and a signed item would no longer match.
RAW_REASONING = (
    '{"id":"rs_1","type":"reasoning","summary": [],'
    '"encrypted_content":"gAAAA\\u00e9Bk+\\/=","status":null}'
)


def reasoning_item(endpoint: str = "gpt", before: str | None = "call_a") -> PassbackItem:
    return PassbackItem(
        endpoint=endpoint, wire="responses", kind="reasoning", raw=RAW_REASONING, before_call=before
    )


def request(messages: list[ChatMessage], **fields: Any) -> CompletionRequest:
    return CompletionRequest(endpoint="gpt", model="o4-mini", messages=messages, **fields)


# -- the request ----------------------------------------------------------------------


def test_the_transcript_becomes_input_items_with_reasoning_before_its_call() -> None:
    messages = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="Weather in Paris and Rome?"),
        ChatMessage(
            role="assistant",
            content="Checking.",
            tool_calls=[
                ToolCall(id="call_a", name="get_weather", arguments='{"city":"Paris"}'),
                ToolCall(id="call_b", name="get_weather", arguments=""),
            ],
            passback=[reasoning_item(before="call_b"), reasoning_item(before=None)],
        ),
        ChatMessage(role="tool", tool_call_id="call_a", content="sunny"),
        ChatMessage(role="tool", tool_call_id="call_b", content="rain"),
    ]
    sent = orjson.loads(orjson.dumps(build_responses_body(request(messages), ENDPOINT)))
    kinds = [
        (item["type"], item.get("role") or item.get("call_id") or item.get("id"))
        for item in sent["input"]
    ]
    assert kinds == [
        ("message", "system"),
        ("message", "user"),
        ("reasoning", "rs_1"),  # before the text: it preceded no call
        ("message", "assistant"),
        ("function_call", "call_a"),
        ("reasoning", "rs_1"),  # right before the call it preceded
        ("function_call", "call_b"),
        ("function_call_output", "call_a"),
        ("function_call_output", "call_b"),
    ]
    calls = [item for item in sent["input"] if item["type"] == "function_call"]
    assert calls[1]["arguments"] == "{}"  # a zero-argument call goes back as an object
    assert sent["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_b",
        "output": "rain",
    }


def test_a_reasoning_item_is_sent_as_the_bytes_it_arrived_as() -> None:
    messages = [
        ChatMessage(role="user", content="q"),
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="call_a", name="f", arguments="{}")],
            passback=[reasoning_item()],
        ),
    ]
    wire_bytes = orjson.dumps(build_responses_body(request(messages), ENDPOINT))
    assert RAW_REASONING.encode() in wire_bytes


def test_reasoning_from_another_endpoint_is_not_sent() -> None:
    messages = [
        ChatMessage(role="user", content="q"),
        ChatMessage(role="assistant", content="a", passback=[reasoning_item("other")]),
    ]
    sent = build_responses_body(request(messages), ENDPOINT)
    assert [item["type"] for item in sent["input"]] == ["message", "message"]


def test_tools_choice_limits_and_storage_in_the_responses_spelling() -> None:
    endpoint = ENDPOINT.model_copy(update={"extra_body": {"temperature": 0.1, "store": True}})
    sent = build_responses_body(
        request(
            [ChatMessage(role="user", content="q")],
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            parallel_tool_calls=False,
            max_tokens=64,
            temperature=0.5,
            top_p=0.9,
            seed=7,
            stop=["END"],
            reasoning_effort="low",
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
        ),
        endpoint,
    )
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    assert sent["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert sent["parallel_tool_calls"] is False
    assert sent["max_output_tokens"] == 64 and "max_tokens" not in sent
    assert (sent["temperature"], sent["top_p"]) == (0.5, 0.9)  # the run's over the endpoint's
    assert sent["reasoning"] == {"effort": "low"}
    assert sent["text"] == {"format": {"type": "json_schema", "name": "x", "schema": {}}}
    assert "stop" not in sent and "seed" not in sent  # the Responses API has neither
    assert sent["stream"] is True
    assert sent["store"] is True  # the endpoint's own choice wins over the default
    assert sent["include"] == ["reasoning.encrypted_content"]


def test_without_tools_no_tool_fields_and_refused_parameters_are_left_out() -> None:
    sent = build_responses_body(
        request(
            [ChatMessage(role="user", content="q")],
            tool_choice="required",
            parallel_tool_calls=True,
            reasoning_effort="high",
            omit_parameters=["reasoning_effort"],
        ),
        ENDPOINT,
    )
    assert not {"tools", "tool_choice", "parallel_tool_calls", "reasoning"} & set(sent)
    assert sent["store"] is False


# -- assembly -------------------------------------------------------------------------


def sse(*payloads: dict[str, Any] | str, events: bool = True) -> bytes:
    out = b""
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
        name = json.loads(data).get("type") if events and data.startswith("{") else None
        out += (f"event: {name}\n" if name else "").encode() + f"data: {data}\n\n".encode()
    return out


def assemble(body: bytes, *, reads: int = 7, endpoint: str = "gpt") -> ResponsesAssembler:
    assembler = ResponsesAssembler(endpoint=endpoint, mint_prefix="call_sl_t1a1")
    decoder = SSEDecoder()
    step = max(1, len(body) // reads)
    for start in range(0, len(body), step):
        events = decoder.feed_data(body[start : start + step])
        if events and assembler.feed_events(events):
            break
    return assembler


def turn_of(body: bytes, **kw: Any) -> AssembledTurn:
    return assemble(body, **kw).finish()


def openai_stream(*, completed_output: list[Any] | None = None) -> bytes:
    """OpenAI's shape: reasoning, text, two parallel calls, usage with cache and reasoning."""
    call_a = {
        "id": "fc_a",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_a",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    call_b = {**call_a, "id": "fc_b", "call_id": "call_b", "arguments": '{"city":"Rome"}'}
    reasoning = json.loads(RAW_REASONING)
    output = [reasoning, call_a, call_b] if completed_output is None else completed_output
    events: list[dict[str, Any] | str] = [
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {"id": "resp_1", "model": "o4-mini", "output": []},
        },
        {"type": "response.in_progress", "sequence_number": 1, "response": {"id": "resp_1"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "rs_1", "type": "reasoning", "summary": []},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "item_id": "rs_1",
            "delta": "Two cities.",
        },
        # The reasoning item as the server sent it: cut out of the payload byte for byte.
        '{"type":"response.output_item.done","output_index":0,"item":'
        + RAW_REASONING
        + ',"sequence_number":4}',
    ]
    for position, call in ((1, call_a), (2, call_b)):
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": position,
                "item": {**call, "arguments": "", "status": "in_progress"},
            }
        )
        for piece in (call["arguments"][:5], call["arguments"][5:]):
            events.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": position,
                    "item_id": call["id"],
                    "delta": piece,
                }
            )
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "output_index": position,
                "item_id": call["id"],
                "arguments": call["arguments"],
            }
        )
        events.append({"type": "response.output_item.done", "output_index": position, "item": call})
    events.append(
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "model": "o4-mini",
                "output": output,
                "usage": {
                    "input_tokens": 120,
                    "output_tokens": 40,
                    "total_tokens": 160,
                    "input_tokens_details": {"cached_tokens": 100},
                    "output_tokens_details": {"reasoning_tokens": 12},
                },
            },
        }
    )
    return sse(*events)


def test_openai_shape_calls_reasoning_passback_and_usage() -> None:
    turn = turn_of(openai_stream())
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_a", "get_weather", '{"city":"Paris"}'),
        ("call_b", "get_weather", '{"city":"Rome"}'),
    ]
    assert turn.reasoning == "Two cities."
    assert turn.finish_reason == "tool_calls" and turn.defects == []
    assert turn.usage is not None
    assert (
        turn.usage.prompt_tokens,
        turn.usage.completion_tokens,
        turn.usage.cached_tokens,
        turn.usage.reasoning_tokens,
    ) == (120, 40, 100, 12)
    assert turn.response_id == "resp_1" and turn.model == "o4-mini"
    [item] = turn.passback
    assert item.raw == RAW_REASONING  # byte-exact, the escape included
    assert (item.endpoint, item.before_call, item.kind) == ("gpt", "call_a", "reasoning")
    assert turn.stats.notes == []
    # And it goes back in front of its call, unchanged.
    message = turn.to_message()
    body = orjson.dumps(build_responses_body(request([message]), ENDPOINT))
    assert RAW_REASONING.encode() + b',{"type":"function_call","call_id":"call_a"' in body


# Recorded from llama.cpp (xllamacpp 2026.10.11549, SmolLM2) at /v1/responses.
LLAMACPP = sse(
    {
        "type": "response.created",
        "response": {"id": "resp_L", "object": "response", "status": "in_progress"},
    },
    {
        "type": "response.in_progress",
        "response": {"id": "resp_L", "object": "response", "status": "in_progress"},
    },
    {
        "type": "response.output_item.added",
        "item": {
            "id": "fc_X",
            "arguments": "",
            "call_id": "call_X",
            "name": "get_weather",
            "type": "function_call",
            "status": "in_progress",
        },
    },
    {"type": "response.function_call_arguments.delta", "delta": "{", "item_id": "fc_X"},
    {
        "type": "response.function_call_arguments.delta",
        "delta": '\n    "city": "Paris"',
        "item_id": "fc_X",
    },
    {"type": "response.function_call_arguments.delta", "delta": "\n}", "item_id": "fc_X"},
    {
        "type": "response.output_item.done",
        "item": {
            "id": "fc_X",
            "type": "function_call",
            "status": "completed",
            "arguments": '{\n    "city": "Paris"\n}',
            "call_id": "call_X",
            "name": "get_weather",
        },
    },
    {
        "type": "response.completed",
        "response": {
            "id": "resp_L",
            "object": "response",
            "status": "completed",
            "model": "smollm2",
            "output": [
                {
                    "id": "fc_X",
                    "type": "function_call",
                    "status": "completed",
                    "arguments": '{\n    "city": "Paris"\n}',
                    "call_id": "call_X",
                    "name": "get_weather",
                }
            ],
            "usage": {
                "input_tokens": 198,
                "output_tokens": 40,
                "total_tokens": 238,
                "input_tokens_details": {"cached_tokens": 192},
            },
        },
    },
)


def test_llamacpp_shape_without_output_index() -> None:
    turn = turn_of(b":\n\n:\n\n" + LLAMACPP)  # the pings it sends while the prompt is read
    [call] = turn.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "call_X",
        "get_weather",
        {"city": "Paris"},
    )
    assert turn.usage is not None and turn.usage.cached_tokens == 192
    assert turn.defects == [] and turn.stats.notes == []


def test_a_delta_labelled_with_the_call_id_continues_its_call() -> None:
    # llama.cpp's documented shape: the delta's item_id is the call_id.
    body = LLAMACPP.replace(b'"item_id":"fc_X"', b'"item_id":"call_X"')
    body = body.replace(
        b'"arguments":"{\\n    \\"city\\": \\"Paris\\"\\n}","call_id"',
        b'"arguments":"","call_id"',
        1,
    )
    turn = turn_of(body)
    [call] = turn.tool_calls
    assert json.loads(call.arguments) == {"city": "Paris"}


def calls_body(*events: dict[str, Any], completed_output: list[Any] | None = None) -> bytes:
    return sse(
        *events,
        {"type": "response.completed", "response": {"id": "r", "output": completed_output or []}},
    )


def test_final_arguments_replace_the_deltas() -> None:
    # GitHub Copilot: ciphertext deltas, plaintext `.done` (litellm#30071).
    turn = turn_of(
        calls_body(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "c1",
                    "name": "f",
                    "arguments": "",
                },
            },
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": "fc_1",
                "delta": "x9Qz",
            },
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": "fc_1",
                "delta": "Lw==",
            },
            {
                "type": "response.function_call_arguments.done",
                "output_index": 0,
                "item_id": "fc_1",
                "arguments": '{"a":1}',
            },
        )
    )
    [call] = turn.tool_calls
    assert call.arguments == '{"a":1}'
    assert any("replaced the streamed" in note for note in turn.stats.notes)


def test_arguments_sent_only_at_done_are_kept() -> None:
    turn = turn_of(
        calls_body(
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "c1",
                    "name": "f",
                    "arguments": '{"a":2}',
                },
            },
        )
    )
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [("c1", '{"a":2}')]


def test_a_zero_argument_call_is_a_call_not_a_cut() -> None:
    turn = turn_of(
        calls_body(
            {
                "type": "response.output_item.added",
                "item": {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "c1",
                    "name": "now",
                    "arguments": "",
                },
            },
            {
                "type": "response.output_item.done",
                "item": {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "c1",
                    "name": "now",
                    "arguments": "",
                },
            },
        )
    )
    [call] = turn.tool_calls
    assert (call.name, call.arguments) == ("now", "")
    assert turn.defects == []


def test_the_stream_is_the_truth_and_the_terminal_only_confirms() -> None:
    # Codex: `output: []` in response.completed (sipeed/picoclaw#2674).
    empty = turn_of(openai_stream(completed_output=[]))
    assert [c.id for c in empty.tool_calls] == ["call_a", "call_b"]
    assert any("listed no output" in note for note in empty.stats.notes)
    # vLLM: another call_id in response.completed.
    other = [
        {
            "type": "function_call",
            "call_id": "chatcmpl-tool-1",
            "name": "get_weather",
            "arguments": "{}",
        }
    ]
    differs = turn_of(openai_stream(completed_output=other))
    assert [c.id for c in differs.tool_calls] == ["call_a", "call_b"]
    assert any("chatcmpl-tool-1" in note for note in differs.stats.notes)


def test_a_stream_with_no_output_is_read_from_its_terminal() -> None:
    output = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}],
        }
    ]
    turn = turn_of(sse({"type": "response.completed", "response": {"id": "r", "output": output}}))
    assert turn.text == "hello" and turn.finish_reason == "stop"


def test_stripped_or_wrong_event_lines_change_nothing() -> None:
    stripped = turn_of(openai_stream().replace(b"event: ", b"x-ignored: "))
    assert stripped.model_dump() == turn_of(openai_stream()).model_dump()


def test_incomplete_is_a_veto_on_every_call() -> None:
    turn = turn_of(
        sse(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "c1",
                    "name": "f",
                    "arguments": "",
                },
            },
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": "fc_1",
                "delta": '{"a":1}',
            },
            {
                "type": "response.incomplete",
                "response": {
                    "id": "r",
                    "status": "incomplete",
                    "incomplete_details": {"reason": "max_output_tokens"},
                },
            },
        )
    )
    assert turn.finish_reason == "length"
    assert [d.kind for d in turn.defects] == ["truncated_tool_call"]  # though it parses


def test_text_only_incomplete_is_cut_by_length() -> None:
    turn = turn_of(
        sse(
            {"type": "response.output_text.delta", "item_id": "m", "delta": "Once upon"},
            {
                "type": "response.incomplete",
                "response": {"incomplete_details": {"reason": "max_output_tokens"}},
            },
        )
    )
    assert (turn.text, turn.finish_reason, turn.defects) == ("Once upon", "length", [])


@pytest.mark.parametrize(
    ("payload", "code", "category"),
    [
        # OpenAI nests the fields under `error`.
        (
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "code": "insufficient_quota",
                    "message": "quota",
                },
            },
            "insufficient_quota",
            "quota",
        ),
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "slow down"},
            "rate_limit_exceeded",
            "rate_limit",
        ),
        (
            {
                "type": "error",
                "error": {
                    "type": "authentication_error",
                    "code": "invalid_api_key",
                    "message": "no",
                },
            },
            "invalid_api_key",
            "auth",
        ),
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": "boom"},
                },
            },
            "server_error",
            "server_error",
        ),
    ],
)
def test_errors_after_200_are_classified_stream_errors(
    payload: dict[str, Any], code: str, category: str
) -> None:
    with pytest.raises(StreamFailed) as info:
        assemble(sse({"type": "response.output_text.delta", "delta": "hi"}, payload))
    failure = info.value.failure
    assert (failure.kind, failure.provider_code, failure.category) == (
        "stream_error",
        code,
        category,
    )


def test_a_body_ending_before_its_terminal_is_not_accepted() -> None:
    assembler = assemble(sse({"type": "response.output_text.delta", "delta": "hi"}))
    assert not assembler.saw_terminal
    assert RESPONSES_WIRE.accepts_end_of_body(assembler, assembler.saw_terminal) is False
    with pytest.raises(StreamFailed, match=r"\[DONE\] before response.completed"):
        assemble(sse({"type": "response.output_text.delta", "delta": "hi"}, "[DONE]"))


def test_an_empty_reasoning_item_is_kept() -> None:
    raw = '{"type":"reasoning","id":"rs_9","summary":[]}'
    turn = turn_of(
        sse(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "reasoning", "id": "rs_9", "summary": []},
            }
        )
        + b'data: {"type":"response.output_item.done","output_index":0,"item":'
        + raw.encode()
        + b"}\n\n"
        + sse(
            {"type": "response.output_text.delta", "output_index": 1, "delta": "ok"},
            {"type": "response.completed", "response": {}},
        )
    )
    assert [(i.raw, i.before_call) for i in turn.passback] == [(raw, None)]


def test_pings_progress_and_reasoning_counters() -> None:
    assembler = ResponsesAssembler(endpoint="gpt")
    decoder = SSEDecoder()
    assembler.feed_events(
        decoder.feed_data(
            sse(
                {"type": "response.created", "response": {"id": "r"}},
                {"type": "response.in_progress", "response": {"id": "r"}},
                {"type": "response.output_text.delta", "delta": ""},
            )
        )
    )
    assert assembler.content_mark == 0 and not assembler.first_token_seen
    assembler.feed_events(
        decoder.feed_data(sse({"type": "response.reasoning_text.delta", "delta": "hm"}))
    )
    assert assembler.first_token_seen and not assembler.answer_token_seen
    assert assembler.content_mark == 1
    assembler.feed_events(
        decoder.feed_data(sse({"type": "response.output_text.delta", "delta": "A"}))
    )
    assert assembler.answer_token_seen and assembler.output_chars == 3


def test_hostile_labels_usage_and_split_surrogates_still_serialize() -> None:
    body = (
        sse(
            {
                "type": "response.output_item.added",
                "output_index": 1.5,
                "item": {
                    "type": "function_call",
                    "call_id": "c\ud83d",
                    "name": "f\x00",
                    "arguments": "",
                },
            }
        )
        + b'data: {"type":"response.output_text.delta","delta":"smile \\ud83d"}\n\n'
        + b'data: {"type":"response.output_text.delta","delta":"\\ude00 done"}\n\n'
        + b'data: {"type":"response.completed","response":{"usage":'
        + b'{"input_tokens":NaN,"output_tokens":1e300}}}\n\n'
    )
    turn = turn_of(body)
    assert turn.text == "smile \U0001f600 done"
    assert turn.stats.malformed_aliases == 1
    assert turn.usage is not None and (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (
        0,
        0,
    )
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([turn])
    assert (
        pydantic_data_converter.payload_converter.from_payloads([payload], [AssembledTurn])[0]
        == turn
    )


def test_two_open_calls_and_an_unlabelled_fragment_is_a_named_defect_not_a_guess() -> None:
    turn = turn_of(
        calls_body(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "c1",
                    "name": "f",
                    "arguments": "",
                },
            },
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {
                    "type": "function_call",
                    "id": "fc_2",
                    "call_id": "c2",
                    "name": "g",
                    "arguments": "",
                },
            },
            {"type": "response.function_call_arguments.delta", "delta": '{"a":1}'},
        )
    )
    assert [d.kind for d in turn.defects][:1] == ["dropped_deltas"]


def test_the_decoder_hands_named_events_over_as_data_but_never_an_error_event() -> None:
    body = sse({"type": "response.output_text.delta", "delta": "a"}) + b"data: {}\n\n"
    named = SSEDecoder(event_names=False).feed_data(body)
    assert list(named) == [e.data for e in SSEDecoder().feed(body)]
    assert named.__class__.__name__ == "MessageData"
    error = b'event: error\ndata: {"message":"x"}\n\n'
    [event] = SSEDecoder(event_names=False).feed_data(error)
    assert getattr(event, "event", None) == "error"
    with pytest.raises(StreamFailed):  # no `type`, named `error`: a stream error
        ResponsesAssembler(endpoint="gpt").feed_events([event])
    # Any other shape (a comment, an id, multi-line data) takes the full reading.
    for other in (b": ping\n\n" + body, b"id: 1\n" + body, b"data: {\ndata: }\n\n"):
        full = SSEDecoder(event_names=False).feed_data(other)
        assert full.__class__ is list
        assert full == SSEDecoder().feed(other)


def test_a_reasoning_item_that_is_not_one_json_object_is_left_out_not_sent_broken() -> None:
    """A transcript given by hand may hold anything in `raw`: spliced into the body as it
    is, text that is not one JSON object would make the whole request invalid JSON."""
    broken = [
        PassbackItem(endpoint="gpt", wire="responses", kind="reasoning", raw=raw)
        for raw in ("not json", "[1]", '{"no":"type"}', '{"type":')
    ]
    messages = [
        ChatMessage(role="user", content="q"),
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="call_a", name="f", arguments="{}")],
            passback=[*broken, reasoning_item()],
        ),
    ]
    sent = orjson.loads(orjson.dumps(build_responses_body(request(messages), ENDPOINT)))
    kinds = [item["type"] for item in sent["input"]]
    assert kinds == ["message", "reasoning", "function_call"]

"""The demo: its scripted provider streams the awkward wire shapes it claims and answers
from the request, and `python -m steadyloop demo` (the README's command) runs end to end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from steadyloop._cli.demo_conversation import ORDER_PATH, ORDER_TEXT, PROMPT, DemoProvider
from steadyloop._stream.completion import AssembledTurn
from steadyloop._stream.sse import ServerSentEvent, SSEDecoder
from steadyloop._stream.turn_assembly import TurnAssembler
from steadyloop.testing import RecordedRequest, ScriptedResponse

TOTAL = "121.22"  # 12 * 4.50 + 3 * 19.99 + 1 * 7.25


def request(messages: list[dict[str, Any]]) -> RecordedRequest:
    body = json.dumps({"model": "scripted-model", "messages": messages, "stream": True})
    return RecordedRequest(
        method="POST", path="/v1/chat/completions", headers=(), body=body.encode()
    )


def events(response: ScriptedResponse) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    body = b"".join(part for part in response.parts if isinstance(part, bytes))
    return decoder.feed(body) + decoder.flush()


def tool_deltas(response: ScriptedResponse) -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = []
    for event in events(response):
        if event.data == "[DONE]":
            continue
        for choice in json.loads(event.data)["choices"]:
            deltas.extend(choice["delta"].get("tool_calls") or [])
    return deltas


def assembled(response: ScriptedResponse) -> AssembledTurn:
    assembler = TurnAssembler()
    assembler.feed_events(events(response))
    return assembler.finish()


def call_and_answer(call_id: str, name: str, arguments: str, answer: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": answer},
    ]


START = [{"role": "user", "content": PROMPT}]


def test_first_turn_streams_ollama_shapes_that_still_assemble_into_two_calls() -> None:
    response = DemoProvider(pace_s=0)(request(START))
    deltas = tool_deltas(response)
    # The shapes the demo advertises, on the wire:
    assert {delta.get("index") for delta in deltas} == {0}  # every call labelled index 0
    names = [d["function"]["name"] for d in deltas if "name" in d.get("function", {})]
    assert "read_file" not in names and "".join(names) == "read_filecurrent_time"  # split names
    assert "id" not in deltas[0]  # ids arrive late, on a call's last fragment
    assert [d["function"].get("arguments") for d in deltas if d.get("id") == "call_clock"] == [""]
    # ... and what reading them correctly gives: two calls, not one merged one.
    turn = assembled(response)
    assert not turn.defects
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_read", "read_file", json.dumps({"path": ORDER_PATH}, separators=(",", ":"))),
        ("call_clock", "current_time", ""),
    ]
    assert turn.text == "Let me read the order and check the time first."
    assert turn.usage is not None and turn.usage.completion_tokens > 0


def test_later_turns_are_decided_by_the_tool_answers_in_the_request() -> None:
    provider = DemoProvider(pace_s=0)
    read = call_and_answer("call_read", "read_file", "{}", ORDER_TEXT)
    clock = call_and_answer("call_clock", "current_time", "", "2026-01-01T00:00:00+00:00")
    second = assembled(provider(request(START + read + clock)))
    assert [c.name for c in second.tool_calls] == ["calculate"]
    expression = json.loads(second.tool_calls[0].arguments)["expression"]
    assert expression == "12 * 4.50 + 3 * 19.99 + 1 * 7.25"

    summed = call_and_answer("call_sum", "calculate", "{}", "121.22000000000001")
    third = assembled(provider(request(START + read + clock + summed)))
    assert [c.name for c in third.tool_calls] == ["append_note"]
    note = json.loads(third.tool_calls[0].arguments)["text"]
    assert note == f"March order total: {TOTAL} (checked 2026-01-01T00:00:00+00:00)"

    noted = call_and_answer("call_note", "append_note", "{}", f"Saved note: {note}")
    final = assembled(provider(request(START + read + clock + summed + noted)))
    assert not final.tool_calls
    assert TOTAL in final.text and note in final.text
    # The same request gets the same answer: nothing is counted inside the provider.
    assert assembled(provider(request(START + read + clock))).tool_calls == second.tool_calls


def test_an_unreadable_order_ends_the_conversation_with_the_reason() -> None:
    failed = call_and_answer("call_read", "read_file", "{}", "Tool 'read_file' failed: no file")
    turn = assembled(DemoProvider(pace_s=0)(request(START + failed)))
    assert not turn.tool_calls
    assert "could not read the order" in turn.text


@pytest.mark.slow
def test_the_demo_command_runs_the_whole_loop_with_no_key_and_no_docker(tmp_path: Path) -> None:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "STEADYLOOP_", "TEMPORAL_"))
    }
    completed = subprocess.run(
        [sys.executable, "-m", "steadyloop", "demo", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,  # a hang guard, not a speed assertion
        check=False,
    )
    out = completed.stdout
    assert completed.returncode == 0, out + completed.stderr
    started = re.search(r"^run (\S+) started$", out, re.MULTILINE)
    assert started, out
    workflow_id = started.group(1)

    assert "stop reason: final_answer" in out
    # The answer is printed once, as the last turn's text (not again under the result).
    answer = out.split("stop reason:", 1)[0].rsplit("  model: ", 1)[1]
    assert "answer:" not in out
    assert f"The March order comes to {TOTAL}" in answer
    for call in (
        '-> read_file {"path":"orders/march.txt"}',
        "-> current_time {}",  # no arguments: read as {}
        '-> calculate {"expression":"12 * 4.50 + 3 * 19.99 + 1 * 7.25"}',
        "-> append_note",
    ):
        assert call in out, f"{call!r} missing from:\n{out}"
    assert "4 turns, 4 tool calls" in out
    url = re.search(r"See the workflow in the Temporal UI: (\S+)$", out, re.MULTILINE)
    assert url, out
    assert re.fullmatch(
        rf"http://127\.0\.0\.1:\d+/namespaces/default/workflows/{re.escape(workflow_id)}",
        url.group(1),
    )
    # The side effect happened exactly once, with the total the tools computed.
    notes = (tmp_path / "outbox" / "notes.txt").read_text(encoding="utf-8").splitlines()
    assert len(notes) == 1 and notes[0].startswith(f"March order total: {TOTAL} (checked ")
    # Nothing the dev server prints is mixed into the demo's output.
    assert "Temporal CLI" not in out

"""`POST /ag-ui`: stock AG-UI streams with ids, that attach, resume and interrupt, checked
by `ag-ui-validate`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from web_fake_backend import FakeBackend, FakeRun

from steadyloop._web.app import create_app
from steadyloop._web.settings import web_settings

TOKEN = "acme-token"
SHA = "c" * 64


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
async def http(backend: FakeBackend) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(backend, web_settings({}, {"STEADYLOOP_WEB_TOKENS": f"acme={TOKEN}"}))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://test",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as client:
        yield client


def answer_script(run: FakeRun) -> None:
    run.publish("reasoning_delta", turn=0, attempt=0, text="thinking")
    run.publish("text_delta", turn=0, attempt=0, text="Let me ")
    run.publish("text_delta", turn=0, attempt=0, text="check.")
    run.publish(
        "tool_call", turn=0, call_id="call_0", name="add", arguments='{"a":1,"b":2}', sha=SHA
    )
    run.publish("tool_result", turn=0, call_id="call_0", name="add", text="3")
    run.publish("timeline", seq=1, turn=0, phase="tools", kind="replay", text="replayed")
    run.publish("text_delta", turn=1, attempt=0, text="It is ")
    run.publish("text_delta", turn=1, attempt=0, text="3.")
    run.publish("stop", turn=1, reason="final_answer", final_answer="It is 3.")


def run_input(run_id: str = "agui-run-1", **extra: Any) -> dict[str, Any]:
    return {
        "threadId": "agui-thread",
        "runId": run_id,
        "messages": [{"id": "u1", "role": "user", "content": "What is 1 + 2?"}],
        **extra,
    }


def frames(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            assert "event" not in fields  # stock clients read unnamed messages only
            out.append((fields["id"], json.loads(fields["data"])))
    return out


def validate(text: str, tmp_path: Path, name: str) -> None:
    """ag-ui-validate's verdict on a recorded stream (exit 0: no finding at error level)."""
    tool = shutil.which("ag-ui-validate") or str(Path(sys.executable).parent / "ag-ui-validate")
    recorded = tmp_path / f"{name}.sse"
    recorded.write_text(text)
    checked = subprocess.run(
        [tool, str(recorded), "--no-color"], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_a_run_streams_valid_agui_events_each_with_an_id(
    http: httpx.AsyncClient, backend: FakeBackend, tmp_path: Path
) -> None:
    backend.on_start = answer_script
    answer = await http.post("/ag-ui", json=run_input())
    assert answer.status_code == 200
    got = frames(answer.text)
    ids = [i for i, _ in got]
    assert len(set(ids)) == len(ids)
    types = [e["type"] for _, e in got]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert got[-1][1]["outcome"] == {"type": "success"}
    assert got[-1][1]["result"]["final_answer"] == "It is 3."
    start = next(e for _, e in got if e["type"] == "TOOL_CALL_START")
    assert start["toolCallId"] == "t0-call_0" and start["toolCallName"] == "add"
    validate(answer.text, tmp_path, "fresh")


async def test_the_same_input_posted_again_attaches_and_never_starts_a_second_run(
    http: httpx.AsyncClient, backend: FakeBackend
) -> None:
    backend.on_start = answer_script
    first = await http.post("/ag-ui", json=run_input())
    again = await http.post("/ag-ui", json=run_input())
    assert [e for _, e in frames(again.text)] == [e for _, e in frames(first.text)]
    assert len(backend.threads[next(iter(backend.threads))]) == 1


async def test_a_stream_resumed_mid_message_reopens_what_was_open(
    http: httpx.AsyncClient, backend: FakeBackend, tmp_path: Path
) -> None:
    backend.on_start = answer_script
    whole = frames((await http.post("/ag-ui", json=run_input())).text)
    # Cut right after "It is " (the last answer's first content frame).
    cut = next(n for n, (_, e) in enumerate(whole) if e.get("delta") == "It is ")
    resumed = await http.post("/ag-ui", json=run_input(), headers={"Last-Event-ID": whole[cut][0]})
    got = frames(resumed.text)
    types = [e["type"] for _, e in got]
    assert types[:4] == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
    ]
    snapshot = got[1][1]["messages"]
    assert [m["role"] for m in snapshot] == ["reasoning", "assistant", "assistant", "tool"]
    open_id = got[2][1]["messageId"]
    text = "".join(e["delta"] for _, e in got if e.get("messageId") == open_id and "delta" in e)
    assert text == "It is 3."  # what was shown, re-sent once, then the rest
    ids = [i for i, _ in whole[: cut + 1]] + [i for i, _ in got]
    assert len(set(ids)) == len(ids)
    validate(resumed.text, tmp_path, "resumed")


def approval_script(run: FakeRun) -> None:
    run.publish("text_delta", turn=0, attempt=0, text="Sending.")
    run.publish("tool_call", turn=0, call_id="call_0", name="wire", arguments='{"to":"x"}', sha=SHA)
    run.publish("approval_waiting", turn=0, call_id="call_0", tool="wire", sha=SHA)
    run.pending["call_0"] = SHA


async def test_an_approval_is_an_interrupt_and_resume_decides_it_on_the_same_run(
    http: httpx.AsyncClient, backend: FakeBackend, tmp_path: Path
) -> None:
    backend.on_start = approval_script
    first = frames((await http.post("/ag-ui", json=run_input())).text)
    finished = first[-1][1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    (interrupt,) = finished["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == "t0-call_0"
    assert interrupt["metadata"] == {"tool": "wire", "sha256": SHA, "turn": 0, "call_id": "call_0"}
    (run,) = backend.threads[next(iter(backend.threads))]

    def after_approval(approved: FakeRun) -> None:
        approved.publish("tool_result", turn=0, call_id="call_0", name="wire", text="sent")
        approved.publish("stop", turn=1, reason="final_answer", final_answer="Done.")

    backend.on_decide = after_approval
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
    resumed = await http.post("/ag-ui", json=run_input("agui-run-2", resume=resume))
    got = frames(resumed.text)
    assert run.decided == [("call_0", True)]
    assert [e["type"] for _, e in got][:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert got[0][1]["runId"] == "agui-run-2"
    assert [e["type"] for _, e in got][2:] == ["TOOL_CALL_RESULT", "RUN_FINISHED"]
    assert len(backend.threads[next(iter(backend.threads))]) == 1  # the same workflow
    again = await http.post("/ag-ui", json=run_input("agui-run-2", resume=resume))
    assert again.status_code == 200 and run.decided == [("call_0", True)]  # one decision
    validate(resumed.text, tmp_path, "after-interrupt")


@pytest.mark.parametrize(
    ("reason", "last"),
    [
        ("failed", {"type": "RUN_ERROR", "code": "failed"}),
        ("interrupted", {"type": "RUN_FINISHED", "outcome": {"type": "cancelled"}}),
        ("max_turns", {"type": "RUN_FINISHED", "outcome": {"type": "success"}}),
    ],
)
async def test_stops_map_to_agui_outcomes(
    http: httpx.AsyncClient, backend: FakeBackend, reason: str, last: dict[str, Any]
) -> None:
    def stop(run: FakeRun) -> None:
        run.publish("stop", turn=0, reason=reason, detail="why")

    backend.on_start = stop
    got = frames((await http.post("/ag-ui", json=run_input())).text)
    assert last.items() <= got[-1][1].items()
    if reason == "max_turns":
        assert got[-1][1]["result"]["stop_reason"] == "max_turns"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"threadId": "t", "runId": "r"}, "body.messages"),
        ({"threadId": "t", "runId": "r", "messages": []}, "body.messages"),
        ({"threadId": "t/x", "runId": "r", "messages": []}, "body.threadId"),
        (
            {
                "threadId": "t",
                "runId": "r",
                "messages": [],
                "resume": [{"interruptId": "x", "status": "resolved"}],
            },
            "body.resume[0].interruptId",
        ),
    ],
)
async def test_a_bad_run_agent_input_is_400_naming_the_field(
    http: httpx.AsyncClient, backend: FakeBackend, body: dict[str, Any], field: str
) -> None:
    answer = await http.post("/ag-ui", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"] == field
    assert all(runs == [] for runs in backend.threads.values())


async def test_the_same_input_after_the_approval_streams_past_the_decided_interrupt(
    http: httpx.AsyncClient, backend: FakeBackend, tmp_path: Path
) -> None:
    def decided_script(run: FakeRun) -> None:
        approval_script(run)
        del run.pending["call_0"]  # decided: the run no longer waits for it
        run.publish("decision", turn=0, decision="approved", call_id="call_0")
        run.publish("tool_result", turn=0, call_id="call_0", name="wire", text="sent")
        run.publish("stop", turn=1, reason="final_answer", final_answer="Done.")

    backend.on_start = decided_script
    got = frames((await http.post("/ag-ui", json=run_input())).text)
    types = [e["type"] for _, e in got]
    assert types[-1] == "RUN_FINISHED" and got[-1][1]["outcome"] == {"type": "success"}
    assert "TOOL_CALL_RESULT" in types
    assert not any(e.get("outcome", {}).get("type") == "interrupt" for _, e in got)
    validate((await http.post("/ag-ui", json=run_input())).text, tmp_path, "after-decision")


async def test_a_decided_approval_is_no_interrupt_however_late_the_log_shows_the_decision(
    http: httpx.AsyncClient, backend: FakeBackend
) -> None:
    """The log may hand over the decision well after the approval (read in separate
    polls): whether the call still waits is the run's to say, not the next event's."""

    def decided_script(run: FakeRun) -> None:
        approval_script(run)
        del run.pending["call_0"]  # decided: the run no longer waits for it
        run.publish("decision", turn=0, decision="approved", call_id="call_0")
        run.publish("stop", turn=1, reason="final_answer", final_answer="Done.")
        run.read_gap_s = 0.6

    backend.on_start = decided_script
    got = frames((await http.post("/ag-ui", json=run_input())).text)
    assert not any(e.get("outcome", {}).get("type") == "interrupt" for _, e in got)
    assert got[-1][1]["type"] == "RUN_FINISHED" and got[-1][1]["outcome"] == {"type": "success"}
    assert any(e.get("name") == "steadyloop.approval_waiting" for _, e in got)

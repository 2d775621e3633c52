"""`steadyloop serve --dev` as a user runs it: the real command (dev server, worker and
HTTP server in one process), a scripted provider, and HTTP from outside.

One run asks to refund an order (a tool that needs approval): its events stream with
strictly increasing ids; a second message while it waits is 409 naming the run, and
with `steer` 202; another tenant gets 404 on every route; a double-clicked approval
records one decision and the refund happens once; the stream resumed after the
approval reads the rest, and then 204. An AG-UI client's stream passes ag-ui-validate.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from steadyloop.testing import (
    Pause,
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    ScriptedServer,
    finish_chunk,
    sse_response,
    text_chunks,
    text_response,
    tool_calls_response,
)

pytestmark = pytest.mark.slow

ACME = {"Authorization": "Bearer acme-secret"}
GLOBEX = {"Authorization": "Bearer globex-secret"}
ANSWER = "Refunded 500 cents on order A1."


def model(request: RecordedRequest) -> ScriptedResponse:
    messages = request.messages
    if any(m.get("role") == "tool" for m in messages):
        return sse_response([*text_chunks(ANSWER), Pause(0.05), finish_chunk("stop")])
    if "refund" in str(messages[-1].get("content")):
        call = ScriptedCall("refund", {"order_id": "A1", "cents": 500}, id="call_0")
        return tool_calls_response(call)
    return text_response("Hello there.")


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    async with ScriptedServer(model) as provider:
        ready = tmp_path / "ready"
        env = {
            **os.environ,
            "STEADYLOOP_WEB_TOKENS": "acme=acme-secret,globex=globex-secret",
            "STEADYLOOP_OUTBOX_DIR": str(tmp_path / "outbox"),
            "STEADYLOOP_BLOB_DIR": str(tmp_path / "blobs"),
        }
        command = [
            sys.executable, "-m", "steadyloop", "serve", "--dev", "--port", "0",
            "--ready-file", str(ready), "--task-queue", "web-e2e",
            "--endpoint", f"scripted={provider.base_url},model=scripted-model",
            "--tools", "steadyloop._cli.demo_tour_tools:registry", "--tool", "refund",
        ]  # fmt: skip
        log = (tmp_path / "serve.log").open("wb")
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(300):
                if ready.exists() or process.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            assert ready.exists(), (tmp_path / "serve.log").read_text()
            yield ready.read_text().strip(), tmp_path
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


async def read_events(
    http: httpx.AsyncClient, url: str, *, until: str, headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """SSE frames of `url` up to and including the first of type `until`."""
    got: list[dict[str, Any]] = []
    frame: dict[str, Any] = {}
    async with http.stream("GET", url, headers=headers, timeout=60) as answer:
        assert answer.status_code == 200, await answer.aread()
        async for line in answer.aiter_lines():
            if line.startswith(("id: ", "event: ", "data: ")):
                name, _, value = line.partition(": ")
                frame[name] = value
            elif not line and frame:
                got.append({"id": frame["id"], "type": frame["event"], **json.loads(frame["data"])})
                frame = {}
                if got[-1]["type"] == until:
                    return got
    raise AssertionError(f"the stream ended before a {until!r} event: {got}")


async def test_a_run_on_the_web_from_start_to_answer(served: tuple[str, Path]) -> None:
    base, workdir = served
    async with httpx.AsyncClient(base_url=base, headers=ACME, timeout=30) as http:
        thread = (await http.post("/v1/threads", json={"thread_id": "orders"})).json()["thread_id"]
        started = await http.post(
            f"/v1/threads/{thread}/runs",
            json={"prompt": "Please refund order A1"},
            headers={"Idempotency-Key": "start-1"},
        )
        assert started.status_code == 201, started.text
        run = started.json()["run_id"]
        events_url = f"/v1/threads/{thread}/runs/{run}/events"
        first = await read_events(http, events_url, until="approval_waiting")
        waiting = first[-1]
        assert waiting["tool"] == "refund" and len(waiting["sha"]) == 64

        busy = await http.post(f"/v1/threads/{thread}/runs", json={"prompt": "and order B2?"})
        assert busy.status_code == 409 and busy.json()["error"]["run_id"] == run
        steered = await http.post(
            f"/v1/threads/{thread}/runs", json={"prompt": "and be quick", "steer": True}
        )
        assert steered.status_code == 202 and steered.json()["run_id"] == run
        again = await http.post(
            f"/v1/threads/{thread}/runs",
            json={"prompt": "Please refund order A1"},
            headers={"Idempotency-Key": "start-1"},
        )
        assert again.status_code == 200 and again.json()["run_id"] == run

        base_run = f"/v1/threads/{thread}/runs/{run}"
        approval = f"{base_run}/approvals/{waiting['call_id']}"
        for method, path, body in [
            ("GET", f"/v1/threads/{thread}", None),
            ("GET", base_run, None),
            ("GET", events_url, None),
            ("POST", approval, {"approve": True, "sha256": waiting["sha"]}),
            ("POST", f"{base_run}/interrupt", {}),
        ]:
            foreign = await http.request(method, path, json=body, headers=GLOBEX)
            assert foreign.status_code == 404, (path, foreign.text)

        wrong = await http.post(approval, json={"approve": True, "sha256": "0" * 64})
        assert wrong.status_code == 409 and wrong.json()["error"]["code"] == "not_the_call"
        click = {"Idempotency-Key": "approve-click"}
        decided = [
            await http.post(
                approval, json={"approve": True, "sha256": waiting["sha"]}, headers=click
            )
            for _ in range(2)
        ]
        assert [d.status_code for d in decided] == [200, 200], [d.text for d in decided]

        rest = await read_events(
            http, events_url, until="stop", headers={"Last-Event-ID": waiting["id"]}
        )
        ids = [e["id"] for e in first + rest]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        stop = rest[-1]
        assert stop["reason"] == "final_answer" and stop["final_answer"] == ANSWER
        last_turn = [e for e in rest if e["type"] == "text_delta" and e["turn"] == stop["turn"]]
        assert "".join(e["text"] for e in last_turn) == ANSWER
        assert [e["replayed"] for e in rest if e["type"] == "tool_result"] == [False]
        nothing = await http.get(events_url, params={"after": stop["id"]})
        assert nothing.status_code == 204
        refunds = (workdir / "outbox" / "refunds.txt").read_text().splitlines()
        assert refunds == ["refund 500 cents on A1"]  # one decision, one effect

        snapshot = (await http.get(base_run)).json()
        assert snapshot["status"] == "completed" and snapshot["cursor"]


async def test_an_agui_client_gets_a_valid_stream(served: tuple[str, Path]) -> None:
    base, workdir = served
    body = {
        "threadId": "agui",
        "runId": "agui-1",
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    }
    async with httpx.AsyncClient(base_url=base, headers=ACME, timeout=60) as http:
        answer = await http.post("/ag-ui", json=body)
    assert answer.status_code == 200
    events = [
        json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")
    ]
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "Hello there."
    recorded = workdir / "agui.sse"
    recorded.write_text(answer.text)
    tool = Path(sys.executable).parent / "ag-ui-validate"
    checked = subprocess.run(
        [str(tool), str(recorded), "--no-color"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout

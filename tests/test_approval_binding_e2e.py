"""From outside: an approval is bound to the call a person reviewed.

A real dev server, the worker and `steadyloop approve` as separate processes, and a
scripted provider that numbers calls per turn (llama.cpp-style): turn 1 asks
`wire {"amount":100,"to":"acme"}` as `call_0`, turn 2 asks
`wire {"amount":999,"to":"evil"}`, also as `call_0`. A person approves the first with
the SHA they reviewed; a second person who reviewed that same call runs the same
command once the second call waits under the same id. It must not run.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from steering_harness import eventually
from temporalio.client import WorkflowUpdateFailedError
from test_cli_worker import cli_environment, start_worker, steadyloop

from steadyloop._receipts.decision import tool_call_args_hash
from steadyloop._worker.dev_server import DevServer, dev_server
from steadyloop.testing import ScriptedCall, ScriptedServer, text_response, tool_calls_response

pytestmark = pytest.mark.slow
TESTS = Path(__file__).parent


@pytest.fixture
async def temporal() -> AsyncIterator[DevServer]:
    async with dev_server(ui=False) as server:
        yield server


async def test_an_approval_of_a_reviewed_call_does_not_run_another_call_reusing_its_id(
    temporal: DevServer, tmp_path: Path
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    wires = tmp_path / "wires.txt"
    script = [
        tool_calls_response(ScriptedCall("wire", {"amount": 100, "to": "acme"}, id="call_0")),
        tool_calls_response(ScriptedCall("wire", {"amount": 999, "to": "evil"}, id="call_0")),
        text_response("done"),
    ]
    async with ScriptedServer(script) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url},model=scripted-model",
            "--tools",
            "approval_tools:TOOLS",
            environ=cli_environment(PYTHONPATH=str(TESTS), STEADYLOOP_TEST_WIRES=str(wires)),
        )
        environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
        run = ["run", "pay acme", *connection, "--endpoint", "scripted", "--tool", "wire"]
        try:
            code, out = await steadyloop(*run, "--detach", environ=environ)
            assert code == 0, out
            (workflow_id,) = out.split()
            approve = ["approve", workflow_id, *connection]
            decide = ["approve", workflow_id, "call_0", *connection]

            async def waiting(turn: int) -> dict[str, Any] | None:
                code, out = await steadyloop(*approve, "--json", environ=environ)
                assert code == 0, out
                listed: list[dict[str, Any]] = json.loads(out)
                return next((c for c in listed if c["turn"] == turn), None)

            await eventually(lambda: waiting(1), "turn 1's call waits")
            reviewed = await waiting(1)
            assert reviewed is not None and reviewed["call_id"] == "call_0"
            # What the person reviewed: the tool, its arguments' SHA (as listed) and turn.
            sha = tool_call_args_hash(reviewed["arguments"])
            assert reviewed.get("arguments_sha256", sha) == sha
            code, first = await steadyloop(*decide, environ=environ)
            assert code == 0, first

            await eventually(lambda: waiting(2), "turn 2's call waits")
            now_waiting = await waiting(2)
            # The wire id turn 1 used is qualified as turn 2 enters the transcript.
            assert now_waiting is not None and now_waiting["call_id"] == "call_0_t2"
            # A second person, who reviewed turn 1's call, approves what they reviewed
            # under the id that waits now.
            again = ["approve", workflow_id, "call_0_t2", *connection]
            code, second = await steadyloop(*again, "--sha", sha[:12], environ=environ)
            # Or a decision bound to turn 1's call reaches the run after the listing
            # changed (the race `approve ID CALL` closes): the run itself must refuse it.
            bound = {"call_id": "call_0_t2", "tool": "wire", "arguments_sha256": sha, "turn": 1}
            handle = temporal.client.get_workflow_handle(workflow_id)
            refusal = ""
            try:
                accepted = await handle.execute_update("approve_call", bound, result_type=str)
            except WorkflowUpdateFailedError as error:
                accepted, refusal = None, str(error.cause)
            assert accepted is None, f"the run applied turn 1's decision to turn 2: {accepted}"
            still = await waiting(2)
            code_stop, stopped = await steadyloop(
                "interrupt", workflow_id, *connection, environ=environ
            )
            assert code_stop == 0, stopped
        finally:
            assert await worker.stop() == 0, worker.output
    assert first.startswith('approved \'wire\' call \'call_0\' ({"amount":100,"to":"acme"})')
    assert code != 0
    assert "not the call you reviewed" in second
    assert 'waiting now is wire {"amount":999,"to":"evil"} (turn 2' in second
    assert "another call than the one waiting" in refusal
    assert still == now_waiting  # nothing was decided
    assert "stop reason: interrupted" in stopped
    assert wires.read_text() == "100 to acme\n"  # the 999 never ran

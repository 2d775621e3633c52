"""`steadyloop approve`, `send`, `pause`, `unpause`, `interrupt`: flags that fit together or
are refused with exit 2, output a person can act on, each command's whole path against a
run (time-skipping server), and (slow) the commands as separate processes against a
worker and a dev server, with `show` listing the call that waits for approval."""

from __future__ import annotations

import asyncio
import io
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest
from loop_harness import Loop, running_loop
from steering_harness import eventually, people_run, trickle, wait_for_approvals, wait_for_phase
from temporalio.client import Client
from test_cli_worker import cli_environment, start_worker, steadyloop, typed

from steadyloop._cli import live_run
from steadyloop._cli.live_run import RunCommandFailure
from steadyloop._cli.main import build_parser, run_cli
from steadyloop._cli.outcome import EXIT_USAGE
from steadyloop._cli.progress import approval_line, status_line
from steadyloop._cli.steering import (
    SteeringRequest,
    approval_lines,
    run_steering,
    steering_request,
    waiting_call,
)
from steadyloop._receipts.decision import tool_call_args_hash
from steadyloop._run.models import RunProgress
from steadyloop._run.steering import PendingApproval
from steadyloop._worker.config import ConfigError
from steadyloop._worker.dev_server import DevServer, dev_server, free_port
from steadyloop.client import (
    NotTheCallReviewed,
    NoWorkerAnswered,
    RequestRefused,
    RunEnded,
    RunSnapshot,
)
from steadyloop.testing import ScriptedCall, ScriptedServer, text_response, tool_calls_response

RUN = "steadyloop-5e4d"
TESTS = Path(__file__).parent


def request(*argv: str, stdin: str = "") -> SteeringRequest:
    return steering_request(build_parser().parse_args(list(argv)), io.StringIO(stdin))


TRANSFER_SHA = tool_call_args_hash({"amount": 5, "to": "ana"})


def pending(call_id: str = "call_1", tool: str = "wire") -> PendingApproval:
    return PendingApproval(
        call_id=call_id,
        tool=tool,
        arguments={"amount": 5, "to": "ana"},
        turn=2,
        requested_at="2026-01-01T00:00:00+00:00",
        arguments_sha256=tool_call_args_hash({"amount": 5, "to": "ana"}),
    )


# -- flags ------------------------------------------------------------------------------


def test_each_command_reads_its_flags() -> None:
    assert request("approve", RUN) == SteeringRequest("approve", RUN)
    assert request("approve", RUN, "--json") == SteeringRequest("approve", RUN, as_json=True)
    assert request("approve", RUN, "c1") == SteeringRequest("approve", RUN, call_id="c1")
    assert request("approve", RUN, "c1", "--reject", "too much") == SteeringRequest(
        "approve", RUN, call_id="c1", reject="too much"
    )
    assert request("send", RUN, "hi") == SteeringRequest("send", RUN, message="hi")
    assert request("send", RUN, "-", stdin="from a file\n") == SteeringRequest(
        "send", RUN, message="from a file"
    )
    assert request("pause", RUN) == SteeringRequest("pause", RUN)
    assert request("unpause", RUN) == SteeringRequest("unpause", RUN)
    assert request("interrupt", RUN, "--reason", "lunch", "--wait", "5") == SteeringRequest(
        "interrupt", RUN, reason="lunch", wait_s=5
    )


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["approve", RUN, "--reject", "no"], "needs the CALL"),
        (["approve", RUN, "c1", "--reject", " "], "needs a REASON"),
        (["approve", RUN, "c1", "--json"], "does not go with CALL"),
        (["send", RUN, " \n"], "blank"),
        (["interrupt", RUN, "--wait", "-1"], "--wait"),
        (["interrupt", RUN, "--wait", "nan"], "--wait must be a finite number"),
        (["interrupt", RUN, "--wait", "inf"], "--wait must be a finite number"),
    ],
)
def test_flags_that_do_not_fit_are_refused(argv: list[str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        request(*argv)


def test_usage_errors_exit_2_before_any_connection(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens: a connection would fail (exit 1)
    assert run_cli(["approve", RUN, "--reject", "no", "--address", address]) == EXIT_USAGE
    assert "needs the CALL" in capsys.readouterr().err


# -- what a person reads ----------------------------------------------------------------


def test_the_waiting_calls_are_listed_with_the_commands_that_decide_them() -> None:
    lines = approval_lines(RUN, [pending("call_1"), pending("call_22", tool="refund")])
    assert lines[0] == f"run {RUN}: 2 calls wait for approval"
    header, first, second = lines[2:5]
    assert header.split() == ["CALL", "TOOL", "TURN", "SHA", "ARGUMENTS"]
    sha = tool_call_args_hash({"amount": 5, "to": "ana"})[:12]
    assert first.split() == ["call_1", "wire", "2", sha, '{"amount":5,"to":"ana"}']
    assert header.index("TOOL") == first.index("wire") == second.index("refund")
    assert f"  steadyloop approve {RUN} CALL --reject REASON" in lines
    assert approval_lines(RUN, []) == [f"run {RUN}: no calls wait for approval"]


def test_a_call_that_does_not_wait_is_a_usage_error_naming_those_that_do() -> None:
    assert waiting_call([pending("a")], "a", RUN).call_id == "a"
    with pytest.raises(ConfigError, match=r"no call 'b' .* waiting: a \(wire\)"):
        waiting_call([pending("a")], "b", RUN)


def test_following_a_run_shows_pauses_approvals_and_queued_messages() -> None:
    progress = RunProgress(
        turn=2, tool_calls=1, tokens=9, phase="tools", paused=True, pending_approvals=1,
        pending_messages=2,
    )  # fmt: skip
    line = status_line(progress)
    assert "pausing at the next turn boundary" in line
    assert "1 awaiting approval" in line and "2 messages to send" in line
    assert "pausing" not in status_line(progress.model_copy(update={"phase": "paused"}))
    assert approval_line(RUN, pending()) == (
        'turn 2  ? wire {"amount":5,"to":"ana"} waits for approval: '
        f"steadyloop approve {RUN} call_1 [--reject REASON]"
    )


# -- each command against a run ---------------------------------------------------------


async def steer(loop: Loop, *argv: str) -> str:
    out = io.StringIO()
    assert await run_steering(loop.client, request(*argv), out) == 0
    return out.getvalue()


@pytest.mark.slow
async def test_each_command_steers_a_run_through_its_own_path() -> None:
    transfer = ScriptedCall("transfer", {"amount": 5, "to": "ana"}, id="x1")
    script = [
        tool_calls_response(transfer),
        tool_calls_response(ScriptedCall("add", {"a": 1, "b": 1}), pause_s=0.3),
    ]
    async with running_loop([*script, trickle(400)]) as loop:
        with pytest.raises(ConfigError, match="no workflow 'nope'"):
            await steer(loop, "pause", "nope")
        handle = await loop.start(people_run())
        await wait_for_approvals(handle)
        listing = await steer(loop, "approve", handle.id)
        with pytest.raises(ConfigError, match="waiting: x1 \\(transfer\\)"):
            await steer(loop, "approve", handle.id, "x2")
        sent = await steer(loop, "send", handle.id, "and log it")
        with pytest.raises(ConfigError, match="not the call you reviewed"):
            await steer(loop, "approve", handle.id, "x1", "--sha", "deadbeef")
        approved = await steer(loop, "approve", handle.id, "x1", "--sha", TRANSFER_SHA[:8])
        await eventually(lambda: len(loop.server.exchanges) == 2, "turn 2 streams")
        paused = await steer(loop, "pause", handle.id)
        await wait_for_phase(handle, "paused")
        unpaused = await steer(loop, "unpause", handle.id)
        await eventually(lambda: len(loop.server.exchanges) == 3, "turn 3 streams")
        stopped = await steer(loop, "interrupt", handle.id, "--reason", "enough")
        with pytest.raises(RunCommandFailure, match=r"has ended \(stopped: interrupted\)"):
            await steer(loop, "send", handle.id, "too late")
    row = next(line for line in listing.splitlines() if line.startswith("x1 "))
    assert row.split() == ["x1", "transfer", "1", TRANSFER_SHA[:12], '{"amount":5,"to":"ana"}']
    assert sent.startswith(f"sent to run {handle.id}: queued for turn 2 (1 waiting)")
    assert approved.startswith("approved 'transfer' call 'x1'")
    assert paused == f"run {handle.id}: pausing at the next turn boundary\n"
    assert unpaused == f"run {handle.id}: going on\n"
    assert f"run {handle.id} stopped" in stopped
    assert "stop reason: interrupted: enough (the model turn was cancelled)\n" in stopped
    second = loop.server.requests[1].json
    assert second["messages"][-1] == {"role": "user", "content": "and log it"}
    assert loop.effects.notes == ["transfer 5 to ana"]


async def _raising(error: Exception) -> str:
    raise error


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (
            RequestRefused("r1", "the decision", "no call 'x9' waits"),
            "run r1 refused the decision on x9 (wire): no call 'x9' waits. Check with `show`",
        ),
        (
            NotTheCallReviewed("r1", "x9", []),
            "run r1 refused the decision on x9 (wire): run r1: 'x9' is not the call you "
            "reviewed; waiting now: nothing; nothing was decided. Check with `show`",
        ),
        (
            NoWorkerAnswered("r1", "the decision", 10),
            "no answer from run r1 within 30s; is a worker running for its task queue? The "
            "decision may still be applied when one answers: check with `show`",
        ),
        (
            RunEnded("r1", "stopped: interrupted", "the decision"),
            "run r1 ended (stopped: interrupted) before the decision reached it; nothing was "
            "recorded. `show` shows how it ended",
        ),
    ],
)
async def test_each_typed_steering_error_is_one_sentence_naming_what_to_check(
    error: Exception, says: str
) -> None:
    with pytest.raises(RunCommandFailure) as failure:
        await live_run.steer(
            _raising(error),
            "r1",
            what="the decision",
            refused="run r1 refused the decision on x9 (wire)",
            check="`show`",
        )
    assert str(failure.value) == says
    assert "\n" not in str(failure.value)


# -- as separate processes --------------------------------------------------------------


@pytest.fixture
async def temporal() -> AsyncIterator[DevServer]:
    async with dev_server(ui=False) as server:
        yield server


@pytest.mark.slow
async def test_the_commands_as_a_person_runs_them(temporal: DevServer, tmp_path: Path) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    wires = tmp_path / "wires.txt"
    wire = ScriptedCall("wire", {"amount": 5, "to": "ana"}, id="w1")
    script = [tool_calls_response(wire), text_response("Wired, and logged."), trickle(2000)]
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
        run = ["run", "wire 5 to ana", *connection, "--endpoint", "scripted", "--tool", "wire"]
        try:
            code, out = await steadyloop(*run, "--detach", environ=environ)
            assert code == 0, out
            (workflow_id,) = out.split()
            shown = asyncio.ensure_future(
                steadyloop("show", workflow_id, *connection, environ=environ)
            )

            async def listed() -> str:
                code, out = await steadyloop("approve", workflow_id, *connection, environ=environ)
                assert code == 0, out
                return "" if "no calls wait" in out else out

            await eventually(listed, "the call waits for approval")
            code, out = await steadyloop(
                "send", workflow_id, "and log it", *connection, environ=environ
            )
            assert code == 0, out
            code, out = await steadyloop("approve", workflow_id, "w1", *connection, environ=environ)
            assert code == 0 and out.startswith("approved 'wire' call 'w1'"), out
            code, shown_out = await shown
            assert code == 0, shown_out
            assert (
                f'turn 1  ? wire {{"amount":5,"to":"ana"}} waits for approval: '
                f"{typed('approve', workflow_id, 'w1', *connection)} [--reject REASON]"
            ) in shown_out
            assert "turn 1  <- wire (approved by a person): wired 5 to ana" in shown_out
            assert "Wired, and logged." in shown_out
            assert provider.requests[1].messages[-1]["content"] == "and log it"

            code, out = await steadyloop(*run, "--detach", environ=environ)
            second_id = out.strip()
            await eventually(lambda: len(provider.exchanges) == 3, "the second run streams")
            code, out = await steadyloop("interrupt", second_id, *connection, environ=environ)
            assert code == 0, out
            assert "stop reason: interrupted: interrupted from the command line" in out
            code, out = await steadyloop("pause", second_id, *connection, environ=environ)
            assert code == 1 and "has ended (stopped: interrupted)" in out, out
        finally:
            assert await worker.stop() == 0, worker.output
    assert wires.read_text() == "5 to ana\n"
    await asyncio.wait_for(provider.exchanges[2].ended.wait(), 30)
    assert provider.exchanges[2].client_disconnected


class _Snapshots:
    """The client API's handle, its `snapshot()` answering or raising as told."""

    answer: RunSnapshot | Exception

    def __init__(self, _client: object, workflow_id: str, **_: object) -> None:
        self.workflow_id = workflow_id

    async def snapshot(self) -> RunSnapshot:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (
            NoWorkerAnswered("r1", "the progress query", 10),
            "run r1 did not answer the progress query within 10s. A worker must be running "
            "for its task queue (`steadyloop worker`) to answer.",
        ),
        (
            RequestRefused("r1", "the pending_approvals query", "unknown query"),
            "run r1 refused the pending_approvals query: unknown query",
        ),
        (
            RunSnapshot(workflow_id="r1", status="completed"),
            "run r1 has ended (completed) meanwhile; nothing waits in it. "
            "`steadyloop show r1` shows how it ended.",
        ),
    ],
)
async def test_what_waits_is_read_through_the_client_and_its_errors_are_one_sentence(
    monkeypatch: pytest.MonkeyPatch, answer: RunSnapshot | Exception, says: str
) -> None:
    monkeypatch.setattr(_Snapshots, "answer", answer, raising=False)
    monkeypatch.setattr(live_run, "ClientRunHandle", _Snapshots)
    handle = cast(live_run.RunHandle, _Named("r1"))
    with pytest.raises(RunCommandFailure) as failure:
        await live_run.waiting_now(cast(Client, None), handle)
    assert str(failure.value) == says
    assert "\n" not in str(failure.value)


async def test_the_listings_are_the_snapshot_s_waiting_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waiting = pending()
    snapshot = RunSnapshot(workflow_id="r1", status="running", pending_approvals=[waiting])
    monkeypatch.setattr(_Snapshots, "answer", snapshot, raising=False)
    monkeypatch.setattr(live_run, "ClientRunHandle", _Snapshots)
    handle = cast(live_run.RunHandle, _Named("r1"))
    assert (await live_run.waiting_now(cast(Client, None), handle)).pending_approvals == [waiting]


class _Named:
    def __init__(self, workflow_id: str) -> None:
        self.id = workflow_id

"""`ToolBatch`: every tool call of a model turn answered, exactly once, in order.

An assistant tool call left unanswered makes the provider reject the next request.
Every call gets exactly one tool message with its id, whatever happened: run, unknown
tool, unparseable arguments, unsupported type, the tool raised, timed out, or the run
was interrupted before the batch ran. So:

- arguments are read for the whole batch before any tool runs (two phases), so a batch
  with one unreadable call does not half-run; results keep the model's order even
  though calls run concurrently;
- arguments the data converter cannot encode are answered, never a failed run
  (`_unencodable`);
- `activate_plugin` is workflow state, answered without an activity or a receipt;
- every other call takes its receipt path (`ReceiptPath`); a second call with the same
  receipt key in one batch waits for the first and replays its answer, with its own
  tool message and id.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ToolCall
    from steadyloop._receipts.decision import ReceiptKey, receipt_key
    from steadyloop._run.models import RunInput
    from steadyloop._stream.arguments import parse_tool_call_arguments
    from steadyloop.telemetry._workflow import traced_tool
    from steadyloop.tools._payloads import ToolDescription, ToolInvocation, ToolOutcome

from steadyloop._workflows.receipt_path import ReceiptPath
from steadyloop._workflows.run_state import RunState
from steadyloop._workflows.tool_attempt import ToolAttempt


@dataclass(frozen=True)
class Runnable:
    """A call read whole, to run under its receipt: its place in the batch and its key."""

    position: int
    description: ToolDescription
    invocation: ToolInvocation
    key: ReceiptKey


class ToolBatch:
    """Reads a turn's calls, runs the readable ones under their receipts, answers all."""

    def __init__(self, state: RunState) -> None:
        self._state = state
        self.attempts = ToolAttempt(state)
        self.receipts = ReceiptPath(state, self.attempts)

    async def answer(
        self,
        run: RunInput,
        tools: dict[str, ToolDescription],
        calls: list[ToolCall],
        *,
        said: str | None = None,
    ) -> None:
        """Read every call, then run the readable ones; one tool message per call, in order.
        `said`: the model's text beside the calls when it was not forwarded (for the log)."""
        state = self._state
        answers: list[ToolOutcome | None] = []
        runnable: list[Runnable] = []
        for position, call in enumerate(calls):
            read = await self.read(run, tools, position, call)
            if isinstance(read, Runnable):
                runnable.append(read)
                answers.append(None)
            else:
                answers.append(read)
        state.notes.calls(state.turn, calls, {r.position: r.key for r in runnable}, said)
        await state.events.flush(carried=True)  # a log in history: on the first tool's input
        self.attempts.begin_batch(run.limits.tool_concurrency, run.local_pure_tools_s)
        results = await self._run_all(runnable)
        state.durable_clock().settle()  # what the batch's activities woke to, in any order
        for read, outcome in zip(runnable, results, strict=True):
            answers[read.position] = outcome
        for call, answer in zip(calls, answers, strict=True):
            assert answer is not None
            if answer.status != "ok":
                state.stats.tool_errors += 1
            state.transcript.append(answer.to_message(call.id))
            state.notes.result(state.turn, call, answer)
        await state.events.flush(carried=True)  # a log in history: on the next model turn's

    def interrupted_before_running(self) -> ToolOutcome:
        return not_run(f"the run was interrupted: {self._state.steering.interrupted}")

    async def read(
        self, run: RunInput, tools: dict[str, ToolDescription], position: int, call: ToolCall
    ) -> ToolOutcome | Runnable:
        """The call's answer when it cannot run (or needs no activity), else what runs."""
        state = self._state
        state.stats.tool_calls += 1
        if state.steering.interrupted is not None:
            return self.interrupted_before_running()
        description = tools.get(call.name)
        if description is None:
            return state.disclosure.unknown_tool(call.name, tools)
        reading = parse_tool_call_arguments(call)
        if reading.kind != "parsed":
            return ToolOutcome(
                status="invalid_arguments",
                content=f"Invalid tool arguments: {reading.detail}",
                error_type=reading.kind,
            )
        if state.disclosure.handles(call.name):  # workflow state: no activity, no receipt
            return state.disclosure.activate(reading.arguments)
        try:
            key = receipt_key(run.tenant_id, state.receipt_scope, call.name, reading.arguments)
        except ValueError as refused:  # CanonicalJsonError: no faithful identity
            return ToolOutcome(
                status="invalid_arguments",
                content=f"Invalid tool arguments: {refused}",
                error_type="unhashable",
            )
        invocation = ToolInvocation(
            tool=call.name,
            arguments=reading.arguments,
            call_id=call.id,
            workflow_id=workflow.info().workflow_id,
            tenant_id=run.tenant_id,
            allowed_tools=state.disclosure.allowed(tools),
            idempotency_key=key.text,
        )
        try:
            await state.ceiling.check(invocation, f"the arguments of tool call {call.name!r}")
        except ValueError as unencodable:  # the converter refused them: answer, never die
            return _unencodable(unencodable)
        return Runnable(position, description, invocation, key)

    async def _run_all(self, runnable: list[Runnable]) -> list[ToolOutcome]:
        """Run each call under its receipt, concurrently; a repeat of a key in the batch
        waits for the first and replays its answer. An interrupt answers what is left."""
        first_by_key: dict[str, asyncio.Task[ToolOutcome]] = {}
        first_ids: dict[str, str] = {}
        tasks: list[asyncio.Task[ToolOutcome]] = []
        for read in runnable:
            description, invocation, key = read.description, read.invocation, read.key
            first = first_by_key.get(key.text)
            if first is None:
                task = asyncio.ensure_future(
                    traced_tool(
                        description, invocation, self.receipts.run(description, invocation, key)
                    )
                )
                first_by_key[key.text] = task
                first_ids[key.text] = invocation.call_id
            else:
                replay = self._replay_of(first, invocation.call_id, key, first_ids[key.text])
                task = asyncio.ensure_future(
                    traced_tool(description, invocation, replay, decided="replay")
                )
            tasks.append(task)
        return await self._state.steering.settle(tasks, self.interrupted_before_running)

    async def _replay_of(
        self, first: asyncio.Task[ToolOutcome], call_id: str, key: ReceiptKey, twin: str
    ) -> ToolOutcome:
        await workflow.wait_condition(first.done)
        self.receipts.replayed(call_id, key, twin)
        return first.result()


def not_run(reason: str) -> ToolOutcome:
    return ToolOutcome(status="tool_error", content=f"Not run: {reason}.", error_type="NotRun")


def _unencodable(error: ValueError) -> ToolOutcome:
    """The answer to arguments the reader accepted but the data converter cannot encode.

    `parse_tool_call_arguments` refuses every such value it knows of (lone surrogates,
    deep nesting); this is the net under it, so the call is answered, not the run
    failed. The converter's message is escaped: it may quote the offending text.
    """
    reason = str(error)[:500].encode("utf-8", "backslashreplace").decode("utf-8")
    return ToolOutcome(
        status="invalid_arguments",
        content=f"Invalid tool arguments: they cannot be sent to the tool ({reason}).",
        error_type="unencodable",
    )

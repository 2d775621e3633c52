"""A finished run, read the way a test of an agent asks about it.

`AgentRun` wraps the `RunResult` (kept whole in `result`) with the questions tests ask:
which tools were called with what and what each call was answered (`tool_calls`,
`calls_to`; `unknown_tool_calls`: calls of tools the run never offered), what the
receipt ledger holds (`receipts`: one row per distinct call, so a call asked for twice
but run once shows as one completed row and one replay), and whether the transcript
still satisfies the rule providers enforce (`assert_every_call_answered`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from steadyloop._chat import ChatMessage
from steadyloop._receipts.decision import tool_call_args_hash
from steadyloop._run.models import RunResult, RunStats, StopReason
from steadyloop.testing._scripted_model import ScriptedModel


@dataclass(frozen=True)
class ToolCallRecord:
    """One assistant tool call and the tool message that answered it (None: unanswered)."""

    id: str
    tool: str
    arguments: dict[str, Any] | str  # parsed when it is a JSON object, else the raw text
    result: str | None
    turn: int  # 1-based model turn of the run that asked for it


@dataclass(frozen=True)
class ReceiptRecord:
    """One row of the run's receipt ledger (content-keyed: tool + arguments hash)."""

    tool: str
    arguments_sha256: str
    arguments: dict[str, Any] | None  # from the transcript's calls; None if none matches
    status: str  # running, completed, failed
    attempt: int
    result: str | None
    resolution: str | None  # how a person resolved it, when the call was ambiguous


@dataclass(frozen=True)
class AgentRun:
    result: RunResult
    workflow_id: str
    model: ScriptedModel

    @property
    def stop_reason(self) -> StopReason:
        return self.result.stop_reason

    @property
    def answer(self) -> str | None:
        return self.result.final_answer

    @property
    def transcript(self) -> list[ChatMessage]:
        return self.result.transcript

    @property
    def stats(self) -> RunStats:
        return self.result.stats

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Every call the model made, in order, each with the answer it got."""
        answers = {m.tool_call_id: m.content for m in self.transcript if m.role == "tool"}
        records: list[ToolCallRecord] = []
        turn = 0
        for message in self.transcript:
            if message.role != "assistant":
                continue
            turn += 1
            for tool_call in message.tool_calls:
                records.append(
                    ToolCallRecord(
                        id=tool_call.id,
                        tool=tool_call.name,
                        arguments=_parsed(tool_call.arguments),
                        result=answers.get(tool_call.id),
                        turn=turn,
                    )
                )
        return records

    def calls_to(self, tool: str) -> list[ToolCallRecord]:
        return [record for record in self.tool_calls if record.tool == tool]

    @property
    def unknown_tool_calls(self) -> list[ToolCallRecord]:
        """Calls of a tool no request of the run offered the model: a misspelt name in
        the script (`AgentEnv` warns of it at start, `UnknownToolWarning`), or the
        hallucinated tool a test is about. Each was answered with an error; none ran."""
        offered = self.model.offered_tools
        return [record for record in self.tool_calls if record.tool not in offered]

    @property
    def receipts(self) -> list[ReceiptRecord]:
        """The receipt ledger the run ended with (empty when it did not fit the result)."""
        if self.result.receipts is None:
            return []
        ledger, _ = self.result.receipts.unpack(self.transcript)
        by_hash: dict[tuple[str, str], dict[str, Any]] = {}
        for record in self.tool_calls:
            if isinstance(record.arguments, dict):
                digest = tool_call_args_hash(record.arguments)
                by_hash.setdefault((record.tool, digest), record.arguments)
        rows: list[ReceiptRecord] = []
        for parts, receipt in ledger.items():
            rows.append(
                ReceiptRecord(
                    tool=parts.tool,
                    arguments_sha256=parts.args_hash,
                    arguments=by_hash.get((parts.tool, parts.args_hash)),
                    status=receipt.status,
                    attempt=receipt.attempt,
                    result=receipt.result,
                    resolution=receipt.resolution,
                )
            )
        return rows

    def assert_every_call_answered(self) -> None:
        """Each assistant tool call answered by exactly one tool message with its id, right
        after it: what a provider checks on the next request."""
        position = 0
        transcript = self.transcript
        while position < len(transcript):
            message = transcript[position]
            position += 1
            if message.role == "tool":
                raise AssertionError(f"tool message {message.tool_call_id!r} answers no call")
            if message.role != "assistant" or not message.tool_calls:
                continue
            ids = [c.id for c in message.tool_calls]
            answers = [m.tool_call_id for m in transcript[position : position + len(ids)]]
            if len(set(ids)) != len(ids) or answers != ids:
                raise AssertionError(f"calls {ids} are answered by {answers}")
            position += len(ids)


def _parsed(arguments: str) -> dict[str, Any] | str:
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value if isinstance(value, dict) else arguments

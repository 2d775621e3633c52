"""What `steadyloop run` and `show` print of a given event log, with no server.

`printed(events, ...)` runs the command line's own follower (`steadyloop._cli.follow`)
over `events` as the run's log, and over a run whose result holds the messages given:
the lines a person sees, in the order they see them, with nothing reimplemented here.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Sequence
from typing import cast

import pytest
from temporalio.client import Client

import steadyloop._cli.follow
from steadyloop._chat import ChatMessage
from steadyloop._cli.follow import RunHandle, follow
from steadyloop._cli.progress import ProgressDisplay
from steadyloop._run.models import RunResult, RunStats
from steadyloop.events import RunEventItem, TextDeltaEvent, ToolCallEvent

RUN_ID = "run-1"


class _Run:
    """A run that has ended: its result holds `transcript` (following sends no query)."""

    id = RUN_ID

    def __init__(self, transcript: Sequence[ChatMessage]) -> None:
        self._result = RunResult(
            final_answer=None,
            stop_reason="final_answer",
            transcript=list(transcript),
            stats=RunStats(),
        )

    async def result(self) -> RunResult:
        return self._result


def _as_published(
    events: Sequence[RunEventItem], transcript: Sequence[ChatMessage]
) -> list[RunEventItem]:
    """`events` as the loop publishes them: a turn whose text was not streamed carries what
    the model said beside its calls on the turn's first call event (`said`)."""
    streamed = {e.turn for e in events if isinstance(e, TextDeltaEvent)}
    said = {
        m.tool_calls[0].id: m.content
        for m in transcript
        if m.role == "assistant" and m.tool_calls and m.content
    }
    return [
        e.model_copy(update={"said": said[e.call_id]})
        if isinstance(e, ToolCallEvent)
        and e.said is None
        and e.turn not in streamed
        and e.call_id in said
        else e
        for e in events
    ]


def _log_of(events: Sequence[RunEventItem]) -> type:
    class _Log:
        def __init__(self, _client: object, _workflow_id: str) -> None:
            pass

        async def events(self, **_: object) -> AsyncIterator[RunEventItem]:
            for number, event in enumerate(events):
                yield event.model_copy(update={"cursor": f"000000-{number:012d}"})

    return _Log


async def printed(
    monkeypatch: pytest.MonkeyPatch,
    events: Sequence[RunEventItem],
    transcript: Sequence[ChatMessage] = (),
    *,
    ended: bool = True,
) -> list[str]:
    """The lines the command line prints while following `events` (an ended run's by
    default, as `show` prints it: no status lines)."""
    monkeypatch.setattr(
        steadyloop._cli.follow, "ClientRunHandle", _log_of(_as_published(events, transcript))
    )
    out = io.StringIO()
    run = _Run(transcript)
    await follow(
        cast(Client, None), cast(RunHandle, run), ProgressDisplay(out, live=False), ended=ended
    )
    return out.getvalue().splitlines()

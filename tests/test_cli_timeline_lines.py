"""The timeline's sentences and where the CLI puts them, without a server; and the CLI's
own errors (a refused run, a typo, a 404's address, an unknown endpoint) as a user meets
them. The same through real processes: `test_cli_timeline.py`."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from follow_fakes import printed

from steadyloop._activities.model_stream import _url_for_people
from steadyloop._chat import ChatMessage, ToolCall
from steadyloop._cli.main import run_cli
from steadyloop._cli.outcome import EXIT_USAGE
from steadyloop._cli.progress import (
    ProgressDisplay,
    result_lines,
    status_line,
)
from steadyloop._history.healing import Healing
from steadyloop._output.forwarding import OutputDelta
from steadyloop._routing.endpoints import UnknownEndpointError
from steadyloop._routing.route_plan import (
    PlannedCandidate,
    RouteCandidate,
    RoutePlan,
    SkippedCandidate,
)
from steadyloop._routing.taxonomy import StreamFailure
from steadyloop._run.models import RunProgress, RunResult, RunStats
from steadyloop._workflows.routed_turn import RouteAttempt
from steadyloop._workflows.run_timeline import (
    attempt_events,
    earlier_call,
    healing_text,
    plan_events,
)
from steadyloop.events import (
    RunEventItem,
    StopEvent,
    TextDeltaEvent,
    TimelineEntryEvent,
    ToolCallEvent,
    ToolResultEvent,
)

NOWHERE = "127.0.0.1:1"


def failed(facts: StreamFailure, **fields: object) -> RouteAttempt:
    return RouteAttempt.model_validate(
        {
            "endpoint": "local",
            "model": "m",
            "attempt": 1,
            "sequence": 1,
            "outcome": "failed",
            "failure": facts,
            **fields,
        }
    )


# -- what the workflow records ---------------------------------------------------------


def test_a_retry_names_the_failure_kind_first_and_what_happens_next() -> None:
    cut = StreamFailure(kind="network", network_reason="cut", message="peer closed")
    assert attempt_events(failed(cut, action="retry", delay_s=2.0, rule="network")) == [
        (
            "model_retry",
            "model attempt 1 failed, network (cut); retrying in 2 s (endpoint 'local'): "
            "peer closed",
        )
    ]
    stall = StreamFailure(kind="stall", stall_phase="before_first_token", message="30 s")
    ((kind, text),) = attempt_events(failed(stall, action="traverse", rule="stall"))
    assert kind == "model_retry"
    assert text.startswith(
        "model attempt 1 failed, stalled before first token; not retried on endpoint 'local', "
        "the route's next endpoint (if any) is tried"
    )
    limited = StreamFailure(kind="http_status", category="rate_limit", status=429)
    said = attempt_events(
        failed(limited, action="stop", rule="produced_output", breaker_recorded=True)
    )
    assert said == [
        (
            "model_failed",
            "model attempt 1 failed, http_status (rate_limit, HTTP 429); not retried: "
            "produced_output (endpoint 'local')",
        ),
        ("breaker", "failure recorded on the breaker of endpoint 'local'"),
    ]
    ok = failed(cut).model_copy(update={"outcome": "ok", "failure": None})
    assert attempt_events(ok) == []


def test_breaker_skips_probes_and_healing_are_sentences() -> None:
    open_until = datetime(2026, 1, 1, tzinfo=UTC)
    plan = RoutePlan(
        candidates=[
            PlannedCandidate(candidate=RouteCandidate(endpoint="b", model="m"), probe=True)
        ],
        skipped=[
            SkippedCandidate(
                candidate=RouteCandidate(endpoint="a", model="m"),
                reason="breaker open (last failure: HTTP 500)",
                open_until=open_until,
            )
        ],
    )
    assert plan_events(plan) == [
        "skipped endpoint 'a': breaker open (last failure: HTTP 500) until "
        "2026-01-01T00:00:00+00:00",
        "endpoint 'b' is half-open: this turn is its probe",
    ]
    healed = [
        Healing(kind="missing_answer_added", index=None, call_id="c1", detail="c1 had no answer"),
        Healing(kind="missing_answer_added", index=None, call_id="c2", detail="c2 had no answer"),
    ]
    assert healing_text(healed) == (
        "transcript healed before the request (missing_answer_added x2): c1 had no answer"
    )


def test_an_earlier_call_is_found_by_content_not_by_id() -> None:
    from steadyloop._receipts.decision import receipt_key

    key = receipt_key("t", "run", "add", {"a": 2, "b": 3})
    transcript = [
        ChatMessage(role="user", content="add"),
        ChatMessage(
            role="assistant",
            tool_calls=[ToolCall(id="x1", name="add", arguments='{"b": 3, "a": 2}')],
        ),
        ChatMessage(role="tool", tool_call_id="x1", content="5"),
        ChatMessage(
            role="assistant", tool_calls=[ToolCall(id="x2", name="add", arguments='{"a":2,"b":3}')]
        ),
    ]
    assert earlier_call(transcript, key.text, "t", "run") == (1, "x1")
    # The batch being answered (the last assistant message) is not "earlier".
    assert earlier_call(transcript[:2], key.text, "t", "run") is None


def test_timeline_events_go_on_the_log_numbered_across_the_run_and_bounded() -> None:
    from steadyloop._workflows.event_log import EventLog
    from steadyloop._workflows.run_events import RunEventNotes

    log = EventLog()
    log.in_history = True  # so `carried()` hands over what was noted
    notes = RunEventNotes(log)
    notes.timeline_count = 7  # as carried from the execution before
    notes.timeline(1, "model", "model_retry", "retry")
    notes.timeline(1, "tools", "healed", "x" * 1000, "c1")
    first, second = [TimelineEntryEvent.model_validate(e) for e in log.carried() or []]
    assert (first.seq, second.seq, notes.timeline_count) == (8, 9, 9)
    assert len(second.text) == 240 and second.text.endswith("...")
    assert second.call_id == "c1" and second.phase == "tools"


# -- where the CLI puts it -------------------------------------------------------------


def event(seq: int, text: str, *, call_id: str | None = None) -> TimelineEntryEvent:
    phase = "tools" if call_id else "model"
    kind = "replay" if call_id else "model_retry"
    return TimelineEntryEvent(seq=seq, turn=1, phase=phase, kind=kind, text=text, call_id=call_id)


def two_turns() -> list[ChatMessage]:
    return [
        ChatMessage(role="user", content="add"),
        ChatMessage(
            role="assistant",
            content="Adding.",
            tool_calls=[
                ToolCall(id="a", name="add", arguments='{"a":1}'),
                ToolCall(id="b", name="add", arguments='{"a":1}'),
            ],
        ),
        ChatMessage(role="tool", tool_call_id="a", content="1"),
        ChatMessage(role="tool", tool_call_id="b", content="1"),
        ChatMessage(role="assistant", content="One."),
    ]


def add(call_id: str, turn: int = 1) -> list[RunEventItem]:
    return [ToolCallEvent(turn=turn, call_id=call_id, name="add", arguments='{"a":1}')]


async def test_events_are_printed_where_they_happened_and_never_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    retry = event(1, "model attempt 1 failed, network (cut); retrying in 1 s")
    replay = event(2, "replayed, not run: same call twice in this batch (a's answer)", call_id="b")
    late = TimelineEntryEvent(
        seq=3,
        turn=2,
        phase="model",
        kind="model_retry",
        text="model attempt 3 failed, network (reset); retrying now",
    )
    orphan = event(4, "replayed, not run: receipt already complete", call_id="gone")
    log: list[RunEventItem] = [
        retry,  # the turn in flight: its retry is said before anything of it
        *add("a"),
        *add("b"),
        ToolResultEvent(turn=1, call_id="a", name="add", text="1"),
        replay,  # it lands on its call's answer
        ToolResultEvent(turn=1, call_id="b", name="add", text="1", replayed=True),
        # A retried attempt: the loop publishes its retry before the attempt runs, so the
        # retry is said before the attempt's text.
        late,
        TextDeltaEvent(turn=2, attempt=3, text="One."),
        orphan,  # its call's answer never comes: printed at the end
        StopEvent(turn=2, reason="final_answer", final_answer="One."),
    ]
    lines = await printed(monkeypatch, log, two_turns())
    assert lines == [
        "turn 1  ! model attempt 1 failed, network (cut); retrying in 1 s",
        "turn 1  model: Adding.",
        'turn 1  -> add {"a":1}',
        'turn 1  -> add {"a":1}',
        "turn 1  <- add: 1",
        "turn 1  <- add (replayed, not run: same call twice in this batch (a's answer)): 1",
        "turn 2  ! model attempt 3 failed, network (reset); retrying now",
        "turn 2  model: One.",
        "turn 2  ! replayed, not run: receipt already complete",
    ]


async def test_a_streamed_turn_s_calls_follow_its_text_and_the_text_is_not_repeated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[RunEventItem] = [
        TextDeltaEvent(turn=1, attempt=1, text="Add"),
        TextDeltaEvent(turn=1, attempt=1, text="ing."),
        *add("a"),
        ToolResultEvent(turn=1, call_id="a", name="add", text="1"),
        TextDeltaEvent(turn=2, attempt=1, text="One."),
        StopEvent(turn=2, reason="final_answer", final_answer="One."),
    ]
    assert await printed(monkeypatch, log, two_turns()) == [
        "turn 1  model: Adding.",
        'turn 1  -> add {"a":1}',
        "turn 1  <- add: 1",
        "turn 2  model: One.",
    ]


def test_the_display_knows_which_text_it_showed() -> None:
    display = ProgressDisplay(io.StringIO(), live=False)
    for piece in ("Two ", "lines."):
        display.text(OutputDelta(turn=2, attempt=1, kind="text", text=piece))
    assert display.showed("Two lines.") and display.showed("  Two lines.\n")
    assert not display.showed("Two") and not display.showed("")
    display.live_from_turn = 3  # an attached run: turn 2 came from the transcript
    assert not display.wants(OutputDelta(turn=2, attempt=1, kind="text", text="x"))


def test_the_result_leaves_out_an_answer_already_printed_and_counts_replays() -> None:
    result = RunResult(
        final_answer="Forty-two.",
        stop_reason="final_answer",
        transcript=[],
        stats=RunStats(turns=2, tool_calls=6, tool_replays=4),
    )
    shown = result_lines(result, answer_shown=True)
    assert "Forty-two." not in "\n".join(shown)
    assert shown[1].startswith("2 turns, 6 tool calls (4 of them replayed from receipts")
    assert result_lines(result)[:2] == ["answer:", "  Forty-two."]
    progress = RunProgress(turn=2, tool_calls=6, tokens=1, phase="tools", tool_replays=4)
    assert status_line(progress).startswith("turn 2 | tools | 6 tool calls (4 replayed)")


# -- errors that speak the CLI ---------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--max-turns", "0"], "--max-turns: must be at least 1 (got 0)"),
        (["--token-budget", "0"], "--token-budget: must be at least 1 (got 0)"),
        (["--deadline", "0"], "--deadline: must be a finite number of seconds above 0"),
        (["--tenant", ""], "--tenant: must not be blank"),
        (["--tool", ""], "--tool: must not be blank"),
        (["--plugin", ""], "--plugin: must not be blank"),
    ],
)
def test_a_refused_run_is_one_line_naming_the_flag_and_its_rule(
    flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["run", "x", "--model", "m", *flags, "--address", NOWHERE]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"steadyloop: {said}"), err
    assert err.count("\n") == 1 and "Input should" not in err and "validation" not in err


def test_an_empty_prompt_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["run", "", "--model", "m", "--address", NOWHERE]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        "steadyloop: PROMPT: must not be empty (a run needs a prompt or messages)\n"
    )


@pytest.mark.parametrize(
    ("argv", "suggested"),
    [
        (["rn", "x"], "did you mean 'run'?"),
        (["recipts", "x"], "did you mean 'receipts'?"),
        (["run", "x", "--max-trns", "3"], "--max-trns: did you mean '--max-turns'"),
        (["run", "x", "--detch"], "--detch: did you mean '--detach'?"),
        (["run", "x", "--profile", "opena"], "did you mean 'openai'?"),
        (["show", "x", "--adress", "h:1"], "--adress: did you mean '--address'?"),
    ],
)
def test_a_typo_gets_a_suggestion(
    argv: list[str], suggested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        run_cli(argv)
    assert exited.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert suggested in err, err
    assert err.splitlines()[0].startswith("usage: steadyloop")


def test_an_unknown_flag_with_nothing_close_points_at_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        run_cli(["run", "x", "--zzz"])
    assert "unrecognized arguments: --zzz; `steadyloop run --help` lists its flags" in (
        capsys.readouterr().err
    )


def test_a_url_is_named_without_what_may_be_secret() -> None:
    shown = _url_for_people(
        "https://user:pw@api.example.com:8443/v1/chat/completions?key=s3cr3t#x", None
    )
    assert shown == "https://api.example.com:8443/v1/chat/completions"
    in_path = _url_for_people(
        "https://gw.example.com/k/sk-live-abcdef123456/v1/chat/completions", "sk-live-abcdef123456"
    )
    assert "abcdef123456" not in in_path and in_path.startswith("https://gw.example.com/k/")


def test_an_unknown_endpoint_says_how_to_add_it_on_the_command_line() -> None:
    said = str(UnknownEndpointError("nowhere", ["local", "cloud"]))
    assert "knows: 'cloud', 'local'" in said
    assert "steadyloop worker --endpoint nowhere=BASE_URL" in said
    assert "EndpointRegistry" not in said


async def test_a_resumed_run_does_not_print_the_conversation_it_carries_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    carried = [
        ChatMessage(role="user", content="Tell me."),
        ChatMessage(role="assistant", content="The first half,"),
        ChatMessage(role="user", content="Go on."),
    ]
    done = [*carried, ChatMessage(role="assistant", content="and the second half.")]
    # The resumed run's log is its own (a log per execution): its turns count from 1.
    log: list[RunEventItem] = [
        StopEvent(turn=1, reason="final_answer", final_answer="and the second half.")
    ]
    assert await printed(monkeypatch, log, done) == ["turn 1  model: and the second half."]

"""`steadyloop replay`: the check a user runs before upgrading workers with runs in flight.

Offline over the project's recorded histories (each replays; one with an activity
renamed, as a release that reorders commands would, is named with the nondeterminism
the core found and exit 1, with no SDK traceback or core log line on the terminal), and
against a dev server (a run waiting in a tool is read from the server and replays).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path

import loop_harness
import pytest
from loop_harness import run_input, running_loop

from steadyloop._cli.main import run_cli
from steadyloop._cli.replay import report
from steadyloop.testing._chunks import ScriptedCall, finish_chunk, text_chunks, tool_call_chunks
from steadyloop.testing._scripted_server import ScriptedResponse, sse_response

HISTORIES = Path(__file__).parent / "histories"
# One of each workflow a worker serves, and runs whose ids derive from the workflow id
# (a child run's): `tests/test_replay.py` replays every fixture; this reads them as a user.
SAMPLE = (
    "delegation_admitted_by_the_tenant_entity",
    "receipts_replay_and_ambiguous",
    "chain_admission_entity",
    "endpoint_health_cycle",
    "forwarded_output_interrupted",
)


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_cli(["replay", *argv])
    return code, out.getvalue()


def fixture_copies(tmp_path: Path) -> list[Path]:
    """The fixtures under the workflow ids they were recorded with (`replay-<name>`)."""
    copies = []
    for name in SAMPLE:
        copy = tmp_path / f"replay-{name}.json"
        copy.write_text((HISTORIES / f"{name}.json").read_text())
        copies.append(copy)
    return copies


def test_recorded_histories_replay_on_this_version(tmp_path: Path) -> None:
    copies = fixture_copies(tmp_path)
    code, out = cli(*map(str, copies))
    assert code == 0, out
    assert out.count("ok ") == len(copies) == len(SAMPLE)
    assert f"{len(copies)} of {len(copies)} replay on this version" in out


def test_a_history_this_version_would_not_replay_is_named_with_the_reason(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    source = HISTORIES / "multi_turn_parallel_calls.json"
    history = json.loads(source.read_text())
    renamed = 0
    for event in history["events"]:
        scheduled = event.get("activityTaskScheduledEventAttributes")
        if scheduled is not None and renamed == 0:
            scheduled["activityType"]["name"] = "steadyloop.renamed_by_a_release"
            renamed += 1
    assert renamed == 1
    diverging = tmp_path / "replay-multi_turn_parallel_calls.json"
    diverging.write_text(json.dumps(history))
    kept = tmp_path / "replay-continued_answers.json"
    kept.write_text((HISTORIES / "continued_answers.json").read_text())

    code, out = cli(str(diverging), str(kept))

    assert code == 1
    line = next(line for line in out.splitlines() if line.startswith("DIVERGES"))
    assert "replay-multi_turn_parallel_calls" in line and "Nondeterminism" in line
    assert "steadyloop.renamed_by_a_release" in line
    assert "ok        replay-continued_answers" in out
    assert "1 of 2 replay on this version; 1 would fail on it" in out
    terminal = capfd.readouterr()
    assert "Traceback" not in terminal.err + terminal.out
    assert "WARN" not in terminal.err + terminal.out


@pytest.mark.parametrize(
    "content",
    [
        b"not json at all",
        b"",
        b"\xff\xfe\x00bad",  # invalid UTF-8, a NUL
        b'{"events": []}',
        b'{"events": [{"eventId": "1e300"}]}',
        b'{"events": "\\ud800"}',
    ],
    ids=["text", "empty", "invalid-utf8", "no-events", "1e300", "lone-surrogate"],
)
def test_a_file_that_is_not_a_history_is_refused_by_name(tmp_path: Path, content: bytes) -> None:
    notes = tmp_path / "notes.json"
    notes.write_bytes(content)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code, _ = cli(str(notes))
    assert code == 2
    assert str(notes) in err.getvalue() and "not a workflow history" in err.getvalue()
    assert len(err.getvalue()) < 600  # one line, not a protobuf value quoted whole


def call(name: str, arguments: dict[str, str], call_id: str) -> ScriptedResponse:
    scripted = ScriptedCall(name, arguments, id=call_id)
    return sse_response([*tool_call_chunks([scripted]), finish_chunk("tool_calls")])


@pytest.mark.slow
async def test_the_runs_in_flight_are_read_from_the_server_and_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop_harness, "start_environment", loop_harness.dev_server_environment)
    script = [
        call("long_hold", {"label": "c"}, "lc"),
        sse_response([*text_chunks("done"), finish_chunk("stop")]),
    ]
    async with running_loop(script) as loop:
        held = await loop.start(run_input().model_copy(update={"tools": ["long_hold"]}))
        while not loop.effects.started["long_hold"]:
            await asyncio.sleep(0.05)
        target = loop.client.service_client.config.target_host
        code, running = await asyncio.to_thread(cli, "--address", target)
        loop.effects.release.set()
        await held.result()
        code_closed, closed = await asyncio.to_thread(cli, "--address", target, "--closed")

    assert code == 0, running
    assert f"ok        {held.id}" in running
    assert code_closed == 0, closed
    assert f"ok        {held.id}" in closed


def test_no_history_to_check_is_said_in_words() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = report([], nothing="no steadyloop run is open on this server")
    assert code == 0
    assert out.getvalue() == "no steadyloop run is open on this server: nothing to check\n"

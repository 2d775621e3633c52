"""The command line refuses what no run could carry, naming the argument, before it connects.

Unchecked, `steadyloop run --deadline 1e12` starts a run whose workflow task fails
forever; `--deadline inf` silently means no deadline; `steadyloop run $'caf\\xe9'` (bytes
that are not UTF-8) prints a traceback. Each is a usage error (exit 2) that names
the flag, and no workflow is started: every command here points at an address where
nothing listens, so reaching the point of connecting would exit 1 instead.

Also item 13's other half: a call suspended as ambiguous is shown with the commands
that list and resolve it, as calls awaiting approval are.
"""

from __future__ import annotations

import functools
import io
import locale
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import cast

import pytest
from temporalio.client import Client

import steadyloop._cli.follow
from steadyloop._cli.follow import RunHandle, follow
from steadyloop._cli.main import run_cli
from steadyloop._cli.outcome import EXIT_USAGE
from steadyloop._cli.progress import ProgressDisplay, status_line
from steadyloop._cli.receipts import short_key, waiting_lines
from steadyloop._run.models import AmbiguousCall, RunProgress, RunResult, RunStats
from steadyloop._worker.dev_server import free_port
from steadyloop.events import AmbiguousReceiptEvent, RunEventItem, StopEvent, ToolCallEvent

NOWHERE = f"127.0.0.1:{free_port()}"  # nothing listens: connecting would exit 1
RUN = ["run", "hi", "--model", "m", "--address", NOWHERE]
NOT_UTF8 = os.fsdecode(b"caf\xe9")  # what Python hands over for those bytes in UTF-8


@pytest.fixture(autouse=True)
def _no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("STEADYLOOP_", "OPENAI_", "TEMPORAL_")):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("deadline", ["1e12", "inf", "Infinity", "nan", "-inf", "0", "-5", "1e400"])
def test_a_deadline_the_workflow_cannot_keep_is_refused_before_any_run_starts(
    deadline: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli([*RUN, f"--deadline={deadline}"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--deadline: must be a finite number of seconds above 0" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--tenant", ""], "--tenant: must not be blank"),
        (["--tenant", "a\tb"], "--tenant: contains a control character"),
        (["--max-turns", "1" + "0" * 30], "--max-turns: must be at most 2147483647"),
        (["--token-budget", "1" + "0" * 30], "--token-budget: must be at most"),
        (["--tool", "x\x1b[2J"], "--tool: contains a control character"),
        (["--system", "\ud83d"], "argument --system: is not valid UTF-8 text"),
    ],
)
def test_run_flags_no_run_could_carry_are_named(
    flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _exit_code(lambda: run_cli([*RUN, *flags]))
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert named in err


def test_a_model_from_the_environment_is_named_with_its_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STEADYLOOP_MODEL", os.fsdecode(b"gpt\xff"))  # how os.environ gives it
    assert run_cli(["run", "hi", "--address", NOWHERE]) == EXIT_USAGE
    assert "--model (or STEADYLOOP_MODEL): contains a lone surrogate" in (capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["run", NOT_UTF8, "--model", "m"], "argument prompt"),
        (["run", "hi", "--system", NOT_UTF8], "argument --system"),
        (["run", "hi", "--tool", NOT_UTF8], "argument --tool"),
        (["run", "hi", "--tenant", NOT_UTF8], "argument --tenant"),
        (["run", "hi", "--id", NOT_UTF8], "argument --id"),
        (["run", "hi", "--route", NOT_UTF8], "argument --route"),
        (["show", NOT_UTF8], "argument ID"),
        (["resume", "r1", "--prompt", NOT_UTF8], "argument --prompt"),
        (["send", "r1", NOT_UTF8], "argument MESSAGE"),
        (["approve", "r1", "c1", "--reject", NOT_UTF8], "argument --reject"),
        (["approve", "r1", NOT_UTF8], "argument CALL"),
        (["interrupt", "r1", "--reason", NOT_UTF8], "argument --reason"),
        (["receipts", "r1", "--resolve", "abcd", "--give-up", NOT_UTF8], "argument --give-up"),
        (["receipts", "r1", "--resolve", "abcd", "--happened", NOT_UTF8], "argument --happened"),
        (["receipts", "r1", "--resolve", NOT_UTF8, "--did-not-happen"], "argument --resolve"),
        (["run", "hi", "--address", NOT_UTF8], "argument --address"),
        (["worker", "--endpoint", NOT_UTF8], "argument --endpoint"),
    ],
)
def test_every_free_text_argument_that_is_not_text_is_a_usage_error_naming_it(
    argv: list[str], argument: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _exit_code(lambda: run_cli(argv))
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert f"{argument}: is not valid UTF-8 text: the bytes given are b'caf\\xe9'" in err, err


def test_bytes_valid_in_the_locales_own_encoding_are_decoded_faithfully(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Python in UTF-8 mode reads argv as UTF-8 even where the locale is Latin-1, in
    # which b"caf\xe9" is "café".
    monkeypatch.setattr(locale, "nl_langinfo", lambda _item: "ISO-8859-1")
    code = _exit_code(lambda: run_cli(["run", NOT_UTF8, "--tenant", "", *RUN[2:]]))
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert "UTF-8" not in err  # the prompt was read as text; the tenant is refused
    assert "--tenant: must not be blank" in err


def test_a_non_utf8_argument_from_a_real_shell_exits_2_without_a_traceback() -> None:
    """The issue's repro as a separate process: `steadyloop run $'caf\\xe9'`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("STEADYLOOP_", "LC_"))}
    environ |= {"LC_ALL": "C.UTF-8", "PYTHONUTF8": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "steadyloop", "run", b"caf\xe9", "--address", NOWHERE],
        capture_output=True,
        env=environ,
        timeout=120,
        check=False,
    )
    err = done.stderr.decode(errors="replace")
    assert done.returncode == EXIT_USAGE, err
    assert "argument prompt: is not valid UTF-8 text" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["interrupt", "r1", "--wait", "inf"], "--wait must be a finite number"),
        (["worker", "--graceful-shutdown", "nan"], "--graceful-shutdown must be a finite"),
        (["worker", "--graceful-shutdown", "1e300"], "--graceful-shutdown must be a finite"),
        (["demo", "--pace", "inf"], "--pace must be a finite number"),
    ],
)
def test_other_durations_on_the_command_line_are_bounded_too(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli([*argv, "--address", NOWHERE] if argv[0] != "demo" else argv) == EXIT_USAGE
    assert named in capsys.readouterr().err


@pytest.mark.parametrize("workflow_id", [" ", "a\nb", "x" * 1001])
def test_a_workflow_id_no_server_or_terminal_takes_is_refused(
    workflow_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["show", workflow_id], ["receipts", workflow_id], [*RUN, "--id", workflow_id]):
        assert _exit_code(functools.partial(run_cli, argv)) == EXIT_USAGE
        assert "a workflow id" in capsys.readouterr().err


# -- ambiguous calls: the hint a person needs ---------------------------------------------


def _ambiguous() -> AmbiguousCall:
    return AmbiguousCall(
        key='["default","run-7","send_email","' + "a" * 64 + '"]',
        tool="send_email",
        arguments={"to": "ana"},
        attempt=1,
        reason="the attempt timed out; it may have taken effect",
        call_ids=["call_1"],
    )


def test_following_a_run_names_the_command_for_an_ambiguous_call() -> None:
    call = _ambiguous()
    first, second = waiting_lines("run-7", call)
    assert first.startswith('  ! send_email {"to":"ana"} may already have taken effect')
    assert first.endswith("Why, and every open call: steadyloop receipts run-7")
    assert second == (
        f"    resolve: steadyloop receipts run-7 --resolve {short_key(call.key)} "
        "--happened RESULT | --did-not-happen | --give-up [NOTE]"
    )
    progress = RunProgress(turn=1, tool_calls=1, tokens=0, phase="awaiting a person", ambiguous=1)
    assert "1 ambiguous call awaiting a person: steadyloop receipts run-7" in status_line(
        progress, workflow_id="run-7"
    )
    assert "ambiguous" not in status_line(progress.model_copy(update={"ambiguous": 0}))


def _exit_code(command: Callable[[], int]) -> int:
    """The exit code of `command()`, whether it returns it or argparse exits with it."""
    try:
        return command()
    except SystemExit as exit_:
        return int(exit_.code or 0)


class _WaitingRun:
    """A run handle whose run waited on one ambiguous call, then ended."""

    id = "run-7"

    def __init__(self) -> None:
        self.queries = 0

    async def result(self) -> RunResult:
        return RunResult(
            final_answer="ok", stop_reason="final_answer", transcript=[], stats=RunStats()
        )

    async def query(self, query: Callable[..., object], *_args: object, **_: object) -> object:
        self.queries += 1
        return [_ambiguous()] if getattr(query, "__name__", "") == "ambiguous_receipts" else []


class _Log:
    """The run's event log: its call, the call turning ambiguous (said twice: an attempt
    of the call ran again and turned ambiguous again), and the stop."""

    def __init__(self, _client: object, _workflow_id: str) -> None:
        pass

    async def events(self, **_: object) -> AsyncIterator[RunEventItem]:
        call = _ambiguous()
        found: list[RunEventItem] = [
            ToolCallEvent(
                turn=1,
                call_id="c1",
                name=call.tool,
                arguments="{}",
                sha="ab" * 32,
                said="Sending it.",
            ),
            *[
                AmbiguousReceiptEvent(
                    turn=1,
                    key=call.key,
                    tool=call.tool,
                    attempt=1,
                    reason="lost",
                    call_ids=["c1"],
                    arguments='{"to":"ana"}',
                )
                for _ in range(2)
            ],
            StopEvent(turn=1, reason="final_answer", final_answer="ok"),
        ]
        for number, event in enumerate(found):
            yield event.model_copy(update={"cursor": f"000000-{number:012d}"})


async def test_run_and_show_print_the_receipts_command_once_per_ambiguous_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(steadyloop._cli.follow, "ClientRunHandle", _Log)
    out = io.StringIO()
    run = _WaitingRun()
    client = cast(Client, None)
    await follow(client, cast(RunHandle, run), ProgressDisplay(out, live=False))
    printed = out.getvalue()
    assert printed.count("may already have taken effect") == 1  # shown once, not per event
    assert f"steadyloop receipts run-7 --resolve {short_key(_ambiguous().key)}" in printed
    assert "[turn 1 | tools | 1 tool call | 1 ambiguous call awaiting a person: " in printed
    assert printed.count('  ! send_email {"to":"ana"} may already have taken effect') == 1
    assert "turn 1  model: Sending it.\n" in printed  # the turn's text, from its call
    assert run.queries == 0  # the events carry the turn's text and the receipt's arguments

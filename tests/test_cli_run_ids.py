"""A run id a person chooses (`run --id`, `resume --id`), and the next-step commands the CLI
prints: an id whose run has ended is refused unless reuse is asked for (a reused id is a
new run whose receipts start empty, so its tools run again), and every printed command
keeps the program and the connection flags it was typed with. Unit tests of the
spelling, then (slow) the commands as separate processes against a worker and a dev
server."""

from __future__ import annotations

import argparse
import os
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.common import WorkflowIDReusePolicy
from test_cli_worker import cli_environment, start_worker, steadyloop, typed

from steadyloop._cli.demo_conversation import ORDER_PATH, ORDER_TEXT, DemoProvider
from steadyloop._cli.invocation import Invocation, command, from_arguments, invoked, program_name
from steadyloop._cli.main import build_parser, run_cli
from steadyloop._cli.outcome import EXIT_USAGE
from steadyloop._cli.run_ids import reuse_policy
from steadyloop._worker.dev_server import DevServer, dev_server, free_port
from steadyloop.testing import ScriptedServer

# -- how a printed command is spelled ----------------------------------------------------


def _script(directory: Path, name: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_program_is_named_so_that_it_works_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path, clone = tmp_path / "bin", tmp_path / "clone" / ".venv" / "bin"
    on_path.mkdir()
    clone.mkdir(parents=True)
    installed, local = _script(on_path, "steadyloop"), _script(clone, "steadyloop")
    python = _script(clone, "python")
    monkeypatch.setenv("PATH", str(on_path))
    # The console script PATH finds: its plain name.
    assert program_name(str(installed), str(python)) == "steadyloop"
    # Typed as `.venv/bin/steadyloop` in the clone: that works only there; the absolute
    # path works anywhere (PATH's `steadyloop` is another program).
    monkeypatch.chdir(tmp_path / "clone")
    assert program_name(".venv/bin/steadyloop", str(python)) == str(local)
    # `python -m steadyloop` with an interpreter PATH does not find: its absolute path.
    assert program_name("/x/steadyloop/__main__.py", ".venv/bin/python") == (
        f"{python} -m steadyloop"
    )
    monkeypatch.setenv("PATH", str(clone))
    assert program_name("/x/steadyloop/__main__.py", str(python)) == "python -m steadyloop"


def test_printed_commands_keep_the_connection_flags_that_were_given(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["show", "r-1", "--address", "tc.example:7233", "--namespace", "prod", "--config",
         "cfg.toml"]
    )  # fmt: skip
    invocation = from_arguments(args, prog="steadyloop")
    config = os.path.abspath("cfg.toml")
    assert invocation.command("resume", "r 1") == (
        f"steadyloop resume 'r 1' --address tc.example:7233 --namespace prod --config {config}"
    )
    # None given: nothing added (the environment's settings are where they were).
    plain = from_arguments(build_parser().parse_args(["show", "r-1"]), prog="steadyloop")
    assert plain.command("show", "r-1") == "steadyloop show r-1"
    # A dev worker's hint names its own server's address, whatever was given.
    moved = invocation.with_flag("--address", "127.0.0.1:9")
    assert moved.command("run", last=["What is 17 * 23?"]) == (
        f"steadyloop run --address 127.0.0.1:9 --namespace prod --config {config} "
        "'What is 17 * 23?'"
    )
    with invoked(invocation):
        assert command("show", "r-1").startswith("steadyloop show r-1 --address tc.example")
    assert command("show", "r-1") == "steadyloop show r-1"  # outside a command: plain
    assert Invocation().command("show", "r-1") == "steadyloop show r-1"


def test_an_ended_runs_id_is_refused_unless_reuse_is_asked_for() -> None:
    assert reuse_policy(False) == WorkflowIDReusePolicy.REJECT_DUPLICATE
    assert reuse_policy(True) == WorkflowIDReusePolicy.ALLOW_DUPLICATE
    parser = build_parser()
    assert parser.parse_args(["run", "x", "--id", "a"]).reuse_id is False
    assert parser.parse_args(["run", "x", "--id", "a", "--reuse-id"]).reuse_id is True
    assert parser.parse_args(["resume", "a", "--id", "b", "--reuse-id"]).reuse_id is True


def test_reuse_without_an_id_is_a_usage_error_before_any_connection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens: a connection would fail (exit 1)
    for argv in (["run", "x", "--reuse-id"], ["resume", "a", "--reuse-id"]):
        assert run_cli([*argv, "--address", address]) == EXIT_USAGE
        assert "--reuse-id goes with --id ID" in capsys.readouterr().err


def test_blank_and_absent_flags_add_nothing() -> None:
    invocation = from_arguments(argparse.Namespace(address=" ", namespace=None), prog="p")
    assert invocation.connection == ()


# -- as a user runs them -----------------------------------------------------------------


@pytest.fixture
async def temporal() -> AsyncIterator[DevServer]:
    async with dev_server(ui=False) as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> dict[str, str]:
    """The example tools' directories: `append_note` writes to the outbox."""
    sandbox, outbox = tmp_path / "sandbox", tmp_path / "outbox"
    (sandbox / ORDER_PATH).parent.mkdir(parents=True)
    (sandbox / ORDER_PATH).write_text(ORDER_TEXT, encoding="utf-8")
    return {"STEADYLOOP_SANDBOX_DIR": str(sandbox), "STEADYLOOP_OUTBOX_DIR": str(outbox)}


def _notes(workspace: dict[str, str]) -> list[str]:
    path = Path(workspace["STEADYLOOP_OUTBOX_DIR"]) / "notes.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.is_file() else []


@pytest.mark.slow
async def test_a_reused_id_is_refused_naming_how_its_run_stopped_and_allowed_on_purpose(
    temporal: DevServer, workspace: dict[str, str]
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
    async with ScriptedServer(DemoProvider(pace_s=0)) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url},model=scripted-model",
            environ=cli_environment(**workspace),
        )
        try:
            run_id = f"reuse-{uuid.uuid4().hex[:6]}"
            code, out = await steadyloop("run", "first", "--id", run_id, *connection,
                                         environ=environ)  # fmt: skip
            assert code == 0, out
            assert len(_notes(workspace)) == 1

            code, out = await steadyloop("run", "second", "--id", run_id, *connection,
                                         environ=environ)  # fmt: skip
            assert code == 2, out
            (line,) = out.splitlines()  # one line, nothing started, nothing run
            assert line.startswith(f"steadyloop: run {run_id!r} has already run and ended "
                                   "(completed: final_answer) at ")  # fmt: skip
            assert "--reuse-id" in line and "empty receipts" in line
            # The next step it names works where it was typed: the connection flags kept.
            assert f'{typed("resume", run_id, *connection)} --prompt "..."' in line
            assert len(_notes(workspace)) == 1

            # Asked for on purpose: a new run under the id. Its receipts start empty, so
            # the note is written again (what the refusal warned of).
            code, out = await steadyloop("run", "second", "--id", run_id, "--reuse-id",
                                         *connection, environ=environ)  # fmt: skip
            assert code == 0, out
            assert "stop reason: final_answer" in out
            assert len(_notes(workspace)) == 2

            # A run that stopped at a limit: the refusal says so, and its own hint keeps
            # the flags the run was started with.
            limited = f"limited-{uuid.uuid4().hex[:6]}"
            code, out = await steadyloop("run", "x", "--id", limited, "--max-turns", "1",
                                         *connection, environ=environ)  # fmt: skip
            assert code == 3, out
            resume = typed("resume", limited, *connection)
            assert f"resume the run with fresh turns: {resume}" in out
            code, out = await steadyloop("run", "x", "--id", limited, *connection,
                                         environ=environ)  # fmt: skip
            assert code == 2, out
            assert f"run {limited!r} has already run and ended (stopped: max_turns)" in out

            # `resume --id` follows the same rule.
            code, out = await steadyloop("resume", limited, "--id", run_id, *connection,
                                         environ=environ)  # fmt: skip
            assert code == 2, out
            assert f"run {run_id!r} has already run and ended" in out
        finally:
            assert await worker.stop() == 0, worker.output

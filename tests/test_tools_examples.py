"""The example tools, run the way a worker runs them (through the run-tool activity)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue
from temporalio.testing import ActivityEnvironment

from steadyloop._activities.tool_execution import ToolActivities
from steadyloop._receipts.canonical_json import canonical_json
from steadyloop._receipts.ledger import DEFAULT_PROGRESS_LIMIT_BYTES
from steadyloop.tools import ToolInvocation
from steadyloop.tools._payloads import ToolOutcome
from steadyloop.tools.examples import (
    DEFAULT_OUTBOX_DIR,
    DEFAULT_SANDBOX_DIR,
    MAX_RECIPIENT_CHARS,
    MAX_RECIPIENTS,
    NOTES_FILE,
    OUTBOX_DIR_ENV,
    SANDBOX_DIR_ENV,
    SENT_FILE,
    example_registry,
    outbox_dir,
    sandbox_dir,
)

SECRET = "the secret outside the sandbox"


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A sandbox with a file, a subdirectory, and a secret file beside it (outside)."""
    root = tmp_path / "sandbox"
    (root / "docs").mkdir(parents=True)
    (root / "hello.txt").write_text("hello from the sandbox\n")
    (root / "docs" / "guide.md").write_text("# Guide\n")
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(SECRET)
    monkeypatch.setenv(SANDBOX_DIR_ENV, str(root))
    return root


@pytest.fixture
def outbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "outbox" / "nested"  # created on first write
    monkeypatch.setenv(OUTBOX_DIR_ENV, str(directory))
    return directory


async def run(
    tool_name: str, arguments: dict[str, Any] | None = None, call: str = "c1"
) -> ToolOutcome:
    activities = ToolActivities(example_registry())
    outcome = await ActivityEnvironment().run(
        activities.run_tool,
        ToolInvocation(
            tool=tool_name, arguments=arguments or {}, call_id=call, workflow_id="w", tenant_id="t"
        ),
    )
    assert isinstance(outcome, ToolOutcome)
    return outcome


def test_registry_has_one_of_each_kind() -> None:
    registry = example_registry()
    effects = {d.name: d.effect for d in registry.describe()}
    assert effects == {
        "add": "pure",
        "calculate": "pure",
        "read_file": "pure",
        "append_note": "opaque",
        "send_batch": "resumable",
        "list_notes": "pure",
        "current_time": "pure",
    }
    zero_argument = [d.name for d in registry.describe() if not d.parameters["properties"]]
    assert zero_argument == ["list_notes", "current_time"]
    assert example_registry() is not registry  # fresh each time


# ---------------------------------------------------------------- arithmetic


async def test_add() -> None:
    assert (await run("add", {"a": 2, "b": 0.5})).content == "2.5"


@pytest.mark.parametrize(
    ("expression", "value"),
    [("(17 * 23) + 4 / 2", "393.0"), ("-2 ** 3", "-8"), ("7 // 2 % 3", "0"), (" 1e3 ", "1000.0")],
)
async def test_calculate(expression: str, value: str) -> None:
    outcome = await run("calculate", {"expression": expression})
    assert (outcome.status, outcome.content) == ("ok", value)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("__import__('os').system('true')", "unsupported element"),
        ("x + 1", "unsupported element"),
        ("True + 1", "unsupported element"),
        ("'a' * 3", "unsupported element"),
        ("9 ** 9 ** 9", "exponent 387420489 is larger than 1000"),
        ("10 ** 400", "result is out of range"),
        ("1e308 * 10", "result is out of range"),
        ("(-8) ** 0.5", "result is out of range"),
        ("1 / 0", "ZeroDivisionError"),
        ("1 +", "not an arithmetic expression"),
        ("1+" * 101 + "1", "longer than 200 characters"),
    ],
)
async def test_calculate_refusals_are_tool_errors(expression: str, reason: str) -> None:
    outcome = await run("calculate", {"expression": expression})
    assert outcome.status == "tool_error"
    assert reason in outcome.content


# ---------------------------------------------------------------- read_file


async def test_read_file_inside_the_sandbox(sandbox: Path) -> None:
    assert (await run("read_file", {"path": "hello.txt"})).content == "hello from the sandbox\n"
    assert (await run("read_file", {"path": "docs/../docs/guide.md"})).content == "# Guide\n"
    assert (await run("read_file", {"path": str(sandbox / "hello.txt")})).status == "ok"


async def test_symlink_that_stays_inside_is_followed(sandbox: Path) -> None:
    (sandbox / "alias.txt").symlink_to(sandbox / "hello.txt")
    assert (await run("read_file", {"path": "alias.txt"})).content == "hello from the sandbox\n"


@pytest.mark.parametrize(
    "make_path",
    [
        pytest.param(lambda root: "../secret.txt", id="dotdot"),
        pytest.param(lambda root: "docs/../../secret.txt", id="nested-dotdot"),
        pytest.param(lambda root: str(root.parent / "secret.txt"), id="absolute"),
        pytest.param(lambda root: "/etc/passwd", id="absolute-system"),
        pytest.param(
            lambda root: _link(root / "link.txt", root.parent / "secret.txt"), id="file-symlink"
        ),
        pytest.param(
            lambda root: _link(root / "out", root.parent / "outside") + "/secret.txt",
            id="dir-symlink",
        ),
        pytest.param(
            lambda root: _link(root / "docs" / "up", Path("../..")) + "/secret.txt",
            id="relative-symlink",
        ),
    ],
)
async def test_paths_escaping_the_sandbox_are_refused(sandbox: Path, make_path: Any) -> None:
    outcome = await run("read_file", {"path": make_path(sandbox)})
    assert outcome.status == "tool_error"
    assert outcome.error_type == "SandboxEscape"
    assert SECRET not in outcome.content


def _link(link: Path, target: Path) -> str:
    """Make a symlink; return its path relative to the sandbox (its "sandbox" ancestor)."""
    link.symlink_to(target)
    root = next(parent for parent in link.parents if parent.name == "sandbox")
    return str(link.relative_to(root))


@pytest.mark.parametrize(
    ("path", "error_type"),
    [
        ("missing.txt", "FileNotFoundError"),
        ("docs", "IsADirectoryError"),
        ("", "IsADirectoryError"),
    ],
)
async def test_missing_files_and_directories_are_tool_errors(
    sandbox: Path, path: str, error_type: str
) -> None:
    outcome = await run("read_file", {"path": path})
    assert (outcome.status, outcome.error_type) == ("tool_error", error_type)


async def test_missing_sandbox_is_a_tool_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SANDBOX_DIR_ENV, str(tmp_path / "nowhere"))
    outcome = await run("read_file", {"path": "hello.txt"})
    assert outcome.status == "tool_error"
    assert "sandbox directory" in outcome.content


async def test_sandbox_is_read_from_the_environment_at_call_time(
    sandbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "hello.txt").write_text("other sandbox")
    assert (await run("read_file", {"path": "hello.txt"})).content == "hello from the sandbox\n"
    monkeypatch.setenv(SANDBOX_DIR_ENV, str(other))
    assert (await run("read_file", {"path": "hello.txt"})).content == "other sandbox"


def test_directory_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SANDBOX_DIR_ENV, raising=False)
    monkeypatch.setenv(OUTBOX_DIR_ENV, "")
    assert sandbox_dir() == DEFAULT_SANDBOX_DIR.expanduser()
    assert outbox_dir() == DEFAULT_OUTBOX_DIR.expanduser()
    assert sandbox_dir() != Path.cwd()


# ---------------------------------------------------------------- outbox side effect


async def test_each_append_note_call_appends_exactly_one_line(outbox: Path) -> None:
    for n in range(3):
        outcome = await run("append_note", {"text": f"note {n}"}, call=f"c{n}")
        assert outcome.status == "ok"
    await run("append_note", {"text": "note 1"}, call="c-repeat")  # same text again: a 2nd effect
    lines = (outbox / NOTES_FILE).read_text().splitlines()
    assert lines == ["note 0", "note 1", "note 2", "note 1"]


async def test_concurrent_notes_never_interleave(outbox: Path) -> None:
    texts = [f"note {n} " + "x" * 500 for n in range(40)]
    await asyncio.gather(*(run("append_note", {"text": text}) for text in texts))
    lines = (outbox / NOTES_FILE).read_text().splitlines()
    assert sorted(lines) == sorted(texts)


async def test_multiline_note_stays_one_line(outbox: Path) -> None:
    await run("append_note", {"text": "first\nsecond\r\n\tthird"})
    assert (outbox / NOTES_FILE).read_text() == "first second third\n"


async def test_invalid_or_blank_notes_write_nothing(outbox: Path) -> None:
    assert (await run("append_note", {"text": ""})).status == "invalid_arguments"
    assert (await run("append_note", {"text": "x", "extra": 1})).status == "invalid_arguments"
    assert (await run("append_note", {"text": " \n "})).status == "tool_error"
    assert not (outbox / NOTES_FILE).exists()


# ---------------------------------------------------------------- resumable side effect


async def send(
    arguments: dict[str, Any], **extra: Any
) -> tuple[ToolOutcome, list[list[JsonValue]]]:
    environment = ActivityEnvironment()
    beats: list[list[JsonValue]] = []
    environment.on_heartbeat = lambda *details: beats.append(details[0])
    outcome = await environment.run(
        ToolActivities(example_registry()).run_tool,
        ToolInvocation(
            tool="send_batch",
            arguments=arguments,
            call_id="c1",
            workflow_id="w",
            tenant_id="t",
            **extra,
        ),
    )
    assert isinstance(outcome, ToolOutcome)
    return outcome, beats


async def test_send_batch_sends_one_line_per_recipient_and_records_each(outbox: Path) -> None:
    recipients = ["a@x.io", "b@x.io", "a@x.io", "c@x.io"]  # a repeat is sent once
    outcome, beats = await send({"recipients": recipients, "message": "hi\nthere"})
    assert outcome == ToolOutcome(status="ok", content="Sent to 3 recipient(s).")
    assert (outbox / SENT_FILE).read_text().splitlines() == [
        "a@x.io\thi there",
        "b@x.io\thi there",
        "c@x.io\thi there",
    ]
    assert beats == [["a@x.io"], ["a@x.io", "b@x.io"], ["a@x.io", "b@x.io", "c@x.io"]]


async def test_send_batch_reclaimed_sends_only_to_those_not_recorded(outbox: Path) -> None:
    outcome, beats = await send(
        {"recipients": ["a@x.io", "b@x.io", "c@x.io"], "message": "hi"},
        attempt=2,
        reclaimed=True,
        previous_progress=["a@x.io", "b@x.io"],
    )
    assert outcome.content == (
        "Sent to 1 recipient(s). 2 had already been sent by an earlier attempt."
    )
    assert (outbox / SENT_FILE).read_text() == "c@x.io\thi\n"
    assert beats[-1] == ["a@x.io", "b@x.io", "c@x.io"]


async def test_send_batch_refuses_bad_recipients_and_blank_messages(outbox: Path) -> None:
    for arguments in [
        {"recipients": [], "message": "hi"},
        {"recipients": ["not an address"], "message": "hi"},
        {"recipients": ["é@x.io"], "message": "hi"},
        {"recipients": ["a@x.io"] * (MAX_RECIPIENTS + 1), "message": "hi"},
        {"recipients": ["a@x.io"], "message": ""},
    ]:
        outcome, _ = await send(arguments)
        assert outcome.status == "invalid_arguments", arguments
    outcome, _ = await send({"recipients": ["a@x.io"], "message": " \t "})
    assert outcome.status == "tool_error"
    assert not (outbox / SENT_FILE).exists()


async def test_send_batch_worst_case_trail_fits_what_a_receipt_keeps(outbox: Path) -> None:
    # Quotes and backslashes double in JSON: the longest trail the schema admits.
    worst = [f"{n:02d}@" + '"\\' * ((MAX_RECIPIENT_CHARS - 3) // 2) for n in range(MAX_RECIPIENTS)]
    assert all(len(r) <= MAX_RECIPIENT_CHARS for r in worst)
    outcome, beats = await send({"recipients": worst, "message": "hi"})
    assert outcome.status == "ok", outcome.content
    assert len(beats[-1]) == MAX_RECIPIENTS
    assert len(canonical_json(beats[-1])) <= DEFAULT_PROGRESS_LIMIT_BYTES


# ---------------------------------------------------------------- zero-argument tools


async def test_list_notes_before_and_after(outbox: Path) -> None:
    assert (await run("list_notes")).content == "[]"
    await run("append_note", {"text": "remember the milk"})
    assert (await run("list_notes")).content == '["remember the milk"]'


async def test_current_time_is_utc_iso8601() -> None:
    outcome = await run("current_time")
    assert outcome.status == "ok"
    assert datetime.fromisoformat(outcome.content).utcoffset() is not None
    assert outcome.content.endswith("+00:00")

"""Example tools for the demo and the tests, one of each kind a real agent needs.

- `add`, `calculate`: pure arithmetic. `calculate` evaluates an arithmetic expression
  by walking its syntax tree (numbers, `+ - * / // % **`, parentheses), never with
  `eval`; it refuses names, calls and attributes, expressions over 200 characters,
  exponents over 1000 and results over 10**300 (so `9**9**9` cannot hang a worker).
- `read_file`: reads a UTF-8 text file under the sandbox directory. Refused, as a tool
  error the model sees: any path that resolves outside the sandbox, whether by `..`,
  by an absolute path or through a symlink (the path is resolved, symlinks included,
  before it is compared); directories; missing files. At most 1 MB is read. Residual
  risk, stated: the check and the open are two steps, so a process that can rewrite
  the sandbox between them could swap in a symlink; do not share a sandbox with
  untrusted writers.
- `append_note`: a real side effect, so repeats are observable. Appends one line per
  call to `notes.txt` in the outbox directory, with a single `O_APPEND` write, so
  concurrent calls and even a worker killed mid-call never interleave half lines.
  Line breaks in the note are folded to spaces, to keep one call one line. Effect
  `opaque`: a lost call may or may not have written its line.
- `send_batch`: a resumable side effect. "Sends" one message to each recipient by
  appending one line (`recipient<TAB>message`) to `sent.txt` in the outbox, recording
  each recipient after its line is written (`current_progress().record`), and skipping
  the recipients an earlier attempt recorded; so a worker killed halfway through and a
  new attempt that reclaims the call send each message once (a repeated recipient in
  the list is sent once too). Recipients are printable ASCII addresses of at most 120
  characters, at most 50 of them: that bounds the recorded trail well under what a
  receipt keeps. Heartbeat timeout 10 s: a killed worker is noticed within that.
- `list_notes`, `current_time`: zero-argument tools (the model sends `""` or `{}`).

Directories are read from the environment at call time, not import time, so a test or
a worker can point them elsewhere without reimporting:
`STEADYLOOP_SANDBOX_DIR` (default `~/.steadyloop/sandbox`) and `STEADYLOOP_OUTBOX_DIR`
(default `~/.steadyloop/outbox`, created on first write). Defaults sit in a dedicated
directory, never the current directory, so a default run cannot read a project's files.
"""

from __future__ import annotations

import ast
import asyncio
import math
import operator
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from steadyloop.errors import SteadyloopError
from steadyloop.tools._context import current_progress
from steadyloop.tools._definition import tool
from steadyloop.tools._registry import ToolRegistry

__all__ = [
    "EXAMPLE_TOOLS",
    "add",
    "append_note",
    "calculate",
    "current_time",
    "example_registry",
    "list_notes",
    "read_file",
    "send_batch",
]

SANDBOX_DIR_ENV = "STEADYLOOP_SANDBOX_DIR"
OUTBOX_DIR_ENV = "STEADYLOOP_OUTBOX_DIR"
DEFAULT_SANDBOX_DIR = Path("~/.steadyloop/sandbox")
DEFAULT_OUTBOX_DIR = Path("~/.steadyloop/outbox")
NOTES_FILE = "notes.txt"
SENT_FILE = "sent.txt"
MAX_RECIPIENTS = 50
MAX_RECIPIENT_CHARS = 120
MAX_MESSAGE_CHARS = 1000
MAX_READ_BYTES = 1024 * 1024

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 10**300

Number = int | float


class SandboxEscape(SteadyloopError, PermissionError):
    """A path that resolves outside the sandbox directory."""


def sandbox_dir() -> Path:
    """The sandbox directory, from `STEADYLOOP_SANDBOX_DIR` now, or the default."""
    return Path(os.environ.get(SANDBOX_DIR_ENV) or DEFAULT_SANDBOX_DIR).expanduser()


def outbox_dir() -> Path:
    """The outbox directory, from `STEADYLOOP_OUTBOX_DIR` now, or the default."""
    return Path(os.environ.get(OUTBOX_DIR_ENV) or DEFAULT_OUTBOX_DIR).expanduser()


@tool(effect="pure")
async def add(a: float, b: float) -> float:
    """Add two numbers and return the sum."""
    return a + b


@tool(effect="pure")
async def calculate(
    expression: Annotated[
        str, Field(description="An arithmetic expression, e.g. '(17 * 23) + 4 / 2'.")
    ],
) -> Number:
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses.

    Names, function calls and anything but numbers and operators are refused.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"not an arithmetic expression: {error.msg}") from None
    return _evaluate(tree.body)


_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.expr) -> Number:
    value: Number
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):  # `True` is an int to Python, not a number here
            raise ValueError(f"unsupported element {node.value!r}: only numbers and operators")
        value = node.value
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        value = _UNARY[type(node.op)](_evaluate(node.operand))
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent {right} is larger than {MAX_EXPONENT}")
        value = _BINARY[type(node.op)](left, right)
    else:
        raise ValueError(f"unsupported element {ast.unparse(node)!r}: only numbers and operators")
    if isinstance(value, complex) or abs(value) > MAX_MAGNITUDE or not math.isfinite(value):
        raise ValueError("result is out of range")
    return value


@tool(effect="pure")
async def read_file(
    path: Annotated[str, Field(description="Path of a text file, relative to the sandbox.")],
) -> str:
    """Read a UTF-8 text file from the sandbox directory.

    Paths are relative to the sandbox; anything resolving outside it is refused.
    """
    root = sandbox_dir().resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"the sandbox directory {root} does not exist")
    # `resolve()` follows every symlink and folds every `..`, so the comparison below
    # sees where the path really leads; an absolute `path` replaces `root` entirely.
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise SandboxEscape(f"{path!r} is outside the sandbox; use a path inside it")
    if target.is_dir():
        raise IsADirectoryError(f"{path!r} is a directory, not a file")
    if not target.is_file():
        raise FileNotFoundError(f"no file {path!r} in the sandbox")
    data = await asyncio.to_thread(_read_head, target)
    text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_READ_BYTES:
        text += f"\n[steadyloop: file longer than {MAX_READ_BYTES} bytes, rest not read]"
    return text


def _read_head(target: Path) -> bytes:
    with target.open("rb") as file:
        return file.read(MAX_READ_BYTES + 1)


class NoteArguments(BaseModel):
    """A note to keep."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, description="The note, one line of text.")


@tool(effect="opaque")
async def append_note(note: NoteArguments) -> str:
    """Append a note to the outbox's notes file (a real side effect: one line per call)."""
    folded = " ".join(note.text.split())
    if not folded:
        raise ValueError("the note is empty; send some text")
    line = folded + "\n"
    await asyncio.to_thread(_append_line, outbox_dir() / NOTES_FILE, line)
    return f"Saved note: {line.strip()}"


def _append_line(target: Path, line: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # One write to an O_APPEND descriptor: the line lands whole, after every other line.
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


Recipient = Annotated[
    str,
    Field(
        min_length=3,
        max_length=MAX_RECIPIENT_CHARS,
        pattern=r"^[!-~]+@[!-~]+$",
        description="An address like name@example.com (printable ASCII, no spaces).",
    ),
]


@tool(effect="resumable", heartbeat_timeout=timedelta(seconds=10))
async def send_batch(
    recipients: Annotated[
        list[Recipient],
        Field(min_length=1, max_length=MAX_RECIPIENTS, description="Who to send it to."),
    ],
    message: Annotated[
        str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="One line of text.")
    ],
) -> str:
    """Send one message to each recipient (a real side effect: one outbox line each).

    Resumable: if the worker is lost halfway, the retry sends only to those not yet sent.
    """
    folded = " ".join(message.split())
    if not folded:
        raise ValueError("the message is empty; send some text")
    progress = current_progress()
    target = outbox_dir() / SENT_FILE
    sent = skipped = 0
    for recipient in dict.fromkeys(recipients):
        if progress.done(recipient):
            skipped += 1
            continue
        await asyncio.to_thread(_append_line, target, f"{recipient}\t{folded}\n")
        progress.record(recipient)  # after the effect: a recorded step has happened
        sent += 1
    text = f"Sent to {sent} recipient(s)."
    if skipped:
        text += f" {skipped} had already been sent by an earlier attempt."
    return text


@tool(effect="pure")
async def list_notes() -> list[str]:
    """List the notes saved in the outbox, oldest first."""
    target = outbox_dir() / NOTES_FILE
    if not target.is_file():
        return []
    text = await asyncio.to_thread(target.read_text, encoding="utf-8")
    return text.splitlines()


@tool(effect="pure")
async def current_time() -> str:
    """The current date and time in UTC, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


EXAMPLE_TOOLS = (add, calculate, read_file, append_note, send_batch, list_notes, current_time)


def example_registry() -> ToolRegistry:
    """A fresh registry of the example tools."""
    return ToolRegistry(EXAMPLE_TOOLS)

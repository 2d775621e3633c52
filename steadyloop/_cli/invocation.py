"""The command line as the user typed it, so every command the CLI prints works when pasted.

A printed next step (`follow the run with steadyloop show ID`, `Attach again:`, `resume
the run:`, the tour's commands) is wrong in two quiet ways when spelled from constants:

- it drops the connection flags that were given (`--address`, `--namespace`,
  `--task-queue`, `--config`), so against anything but the default server the pasted
  command looks for the run in the wrong place and answers "no workflow";
- it names the program as installed in one place (`.venv/bin/steadyloop` works only
  from the clone; `steadyloop` only when it is on PATH).

`Invocation` keeps both, read once from the parsed arguments (`from_arguments`) and set
for the command's duration (`invoked`), and `command(...)` spells a next step with
them. What the environment or Temporal's profile file set (`TEMPORAL_ADDRESS`, an API
key, TLS) is not repeated: it is where it was, and a secret is never printed. The flags
are the only connection settings a command line carries, and none of them is a secret.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import sys
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

# The connection flags every command shares (`cli.main.build_parser`), by argparse dest.
CONNECTION_FLAGS = (
    ("address", "--address"),
    ("namespace", "--namespace"),
    ("task_queue", "--task-queue"),
    ("config", "--config"),
)


@dataclass(frozen=True)
class Invocation:
    """`prog`: the program, spelled to work from any directory; `connection`: the
    connection flags that were given, as words ready to append."""

    prog: str = "steadyloop"
    connection: tuple[str, ...] = ()

    def command(self, *words: str, last: Sequence[str] = ()) -> str:
        """`steadyloop show ID --address HOST:PORT`: a command to paste, quoted for a
        shell; `last` goes after the connection flags (a prompt reads best at the end)."""
        return f"{self.prog} {shlex.join([*words, *self.connection, *last])}"

    def with_flag(self, flag: str, value: str) -> Invocation:
        """This invocation with connection `flag` set to `value` (a dev server's address)."""
        pairs = list(zip(self.connection[::2], self.connection[1::2], strict=True))
        kept = [word for name, given in pairs if name != flag for word in (name, given)]
        return Invocation(prog=self.prog, connection=(flag, value, *kept))


def program_name(argv0: str | None = None, executable: str | None = None) -> str:
    """How to start steadyloop again from anywhere: `steadyloop` when that name on PATH is
    the program running now, else its absolute path (`.venv/bin/steadyloop` typed in the
    clone works only there); `python -m steadyloop` (started as a module) with the
    interpreter's absolute path unless PATH finds the same one."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if Path(argv0).name == "steadyloop":
        return "steadyloop" if _on_path("steadyloop", argv0) else shlex.quote(_absolute(argv0))
    python = Path(executable).name
    interpreter = python if _on_path(python, executable) else _absolute(executable)
    return f"{shlex.quote(interpreter)} -m steadyloop"


def from_arguments(args: argparse.Namespace, prog: str | None = None) -> Invocation:
    """The program and the connection flags `args` holds (argparse keeps no defaults for
    them, so a value present is one that was given)."""
    words: list[str] = []
    for dest, flag in CONNECTION_FLAGS:
        value = getattr(args, dest, None)
        if value is None or not str(value).strip():
            continue
        if isinstance(value, Path):  # a config file named relative to where it was typed
            value = _absolute(str(value))
        words += [flag, str(value)]
    return Invocation(prog=prog or program_name(), connection=tuple(words))


_PLAIN = Invocation()
# Invocation is frozen: sharing the default between contexts is safe.
_current: ContextVar[Invocation] = ContextVar("steadyloop_invocation", default=_PLAIN)


def current() -> Invocation:
    """The invocation of the command running now (plain `steadyloop` outside one)."""
    return _current.get()


def command(*words: str) -> str:
    """A next step for the command running now, with its program and connection flags."""
    return current().command(*words)


@contextlib.contextmanager
def invoked(invocation: Invocation) -> Iterator[None]:
    """`invocation` is the current one inside the block (tasks started inside inherit it)."""
    token = _current.set(invocation)
    try:
        yield
    finally:
        _current.reset(token)


def _on_path(name: str, running: str) -> bool:
    found = shutil.which(name)
    if found is None:
        return False
    try:
        return os.path.samefile(found, _absolute(running))
    except OSError:
        return False


def _absolute(path: str) -> str:
    if os.sep not in path and shutil.which(path):
        return os.path.abspath(shutil.which(path) or path)
    return os.path.abspath(path)

"""Workflow code reads no clock, no randomness and does no I/O: checked in the source.

The sandbox checks calls such as `datetime.now()` at run time, but only in modules it
re-imports; the worker passes steadyloop's workflow helper modules through (see
`steadyloop._worker.process`), so the rule of `steadyloop._workflows` is checked here
as well, for every module of the folder and every code path, not only those a test runs.
Time comes from `workflow.now()`, randomness from `workflow.random()` / `workflow.uuid4()`,
and I/O from activities.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import steadyloop._workflows

FOLDER = Path(steadyloop._workflows.__file__).parent
MODULES = sorted(FOLDER.glob("*.py"))

# Modules whose import alone means a clock, randomness, a thread or I/O.
FORBIDDEN_IMPORTS = {
    "random", "secrets", "time", "uuid", "threading", "multiprocessing", "concurrent",
    "socket", "ssl", "subprocess", "os", "pathlib", "shutil", "tempfile", "sqlite3",
    "httpx", "requests", "urllib", "http",
}  # fmt: skip
# Calls that read the wall clock, whatever they are imported as.
CLOCK_CALLS = {"now", "utcnow", "today", "fromtimestamp", "utcfromtimestamp"}
# Builtins that do I/O.
IO_BUILTINS = {"open", "input", "breakpoint"}


def problems(source: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            if name.split(".")[0] in FORBIDDEN_IMPORTS:
                assert isinstance(node, ast.Import | ast.ImportFrom)
                found.append(f"line {node.lineno}: imports {name}")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in CLOCK_CALLS:
                owner = func.value
                if isinstance(owner, ast.Name) and owner.id in {"datetime", "date"}:
                    found.append(f"line {node.lineno}: {owner.id}.{func.attr}() reads the clock")
            if isinstance(func, ast.Name) and func.id in IO_BUILTINS:
                found.append(f"line {node.lineno}: {func.id}() does I/O")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_workflow_code_reads_no_clock_and_does_no_io(path: Path) -> None:
    assert problems(path.read_text()) == []


@pytest.mark.parametrize(
    "line",
    [
        "import random",
        "from time import monotonic",
        "import httpx",
        "x = datetime.now()",
        "x = date.today()",
        "x = open('f').read()",
    ],
)
def test_the_check_sees_what_the_sandbox_would_have(line: str) -> None:
    assert problems(line) != []


def test_the_check_allows_workflow_time() -> None:
    assert problems("x = workflow.now()\ny = timedelta(seconds=1)\nz = workflow.uuid4()") == []

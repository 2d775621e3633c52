"""The workflow code stays in parts a reader can hold: no module of `workflows/` has a
function over 60 lines or with branch complexity over 15, and the loop's own module
stays under 500 lines. Measured as `scripts/codebase_figures.py` measures (the same
functions, imported), so the test and the printed figures cannot disagree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / "steadyloop" / "_workflows"
LOOP_MODULE = "_workflows/tool_loop.py"  # as named when the folder alone is measured
LOOP_MODULE_LINES = 500


def _figures_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "codebase_figures", ROOT / "scripts" / "codebase_figures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("codebase_figures", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


FIGURES = _figures_script()


def test_no_workflow_function_is_long_or_branched() -> None:
    measured = FIGURES.walk_source(WORKFLOWS)
    assert len(measured.functions) > 100  # the whole folder was measured
    over = [
        f"{f.module}:{f.name} ({f.lines} lines, complexity {f.complexity})"
        for f in measured.functions
        if f.lines > FIGURES.LONG_FUNCTION_LINES or f.complexity > FIGURES.COMPLEX_FUNCTION
    ]
    assert over == [], "split these into the parts the loop owns"


def test_the_loop_module_reads_as_the_loop() -> None:
    measured = FIGURES.walk_source(WORKFLOWS)
    assert measured.module_lines[LOOP_MODULE] < LOOP_MODULE_LINES


def test_the_measure_counts_what_it_says() -> None:
    import ast

    branched = ast.parse(
        "def f(x):\n"
        "    if x and x > 1:\n"
        "        return [y for y in x if y]\n"
        "    for _ in x:\n"
        "        pass\n"
    ).body[0]
    # 1, the `if`, its extra `and` operand, the comprehension and its filter, the loop.
    assert FIGURES.branch_complexity(branched) == 6

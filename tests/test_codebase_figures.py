"""The figures `scripts/codebase_figures.py` prints for the development page.

The complexity measure is pinned on small functions whose count is known by hand, so a
change to what it counts shows here before it moves a figure in the docs; the whole
walk runs over the package and finds what the layout promises (no replay patch before
the first release, one exception root).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def figures_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "codebase_figures", ROOT / "scripts" / "codebase_figures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def complexity(source: str) -> int:
    function = ast.parse(source).body[0]
    result: int = figures_script().branch_complexity(function)
    return result


def test_a_straight_function_counts_one() -> None:
    assert complexity("def f(x):\n    return x + 1\n") == 1


def test_each_decision_point_counts_once() -> None:
    source = """
def f(xs, y):
    if y and xs or not y:          # if +1, two extra operands +2
        return [x for x in xs if x]  # comprehension +1, its filter +1
    elif y:                        # elif +1
        pass
    for x in xs:                   # +1
        while x:                   # +1
            x -= 1
    try:
        pass
    except ValueError:             # +1
        pass
    with open(y) as h:             # +1
        assert h                   # +1
    return 1 if y else 2           # +1
"""
    assert complexity(source) == 13


def test_a_nested_function_is_measured_on_its_own() -> None:
    source = """
def outer(x):
    def inner(y):
        if y:
            return 1
        return 2
    return inner(x)
"""
    assert complexity(source) == 1


def test_the_walk_reports_every_figure_over_the_package() -> None:
    figures = figures_script().gather()
    assert figures["workflow.patched calls"] == 0  # a clean 0.x baseline
    assert figures["exception roots (no steadyloop base)"] == 1
    assert figures["exception names used twice or more"] == []
    assert int(str(figures["lines under steadyloop/"])) > 10_000

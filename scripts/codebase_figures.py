"""Print the figures a reader of the codebase feels: size, shape and the public surface.

Run from the project's root: `python scripts/codebase_figures.py`. Every figure is
measured afresh from the source (an AST walk, plus an import of the package for its
exception classes and root exports). To compare with an older commit, measure a
checkout of it and print both side by side:

    git worktree add /tmp/before OLD_COMMIT
    python scripts/codebase_figures.py --root /tmp/before --json > before.json
    python scripts/codebase_figures.py --compare before.json

Branch complexity counts decision points as radon does: `if`/`elif`, conditional
expressions, loops, `except` clauses, `with`, `assert`, comprehensions and their
filters, `match` cases and each extra operand of `and`/`or`. A nested function is
measured on its own, not inside its parent.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import pkgutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONG_FUNCTION_LINES = 60
COMPLEX_FUNCTION = 15
FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class FunctionShape:
    """One function or method: where it is, how long and how branched."""

    module: str
    name: str
    lines: int
    complexity: int


@dataclass
class ClassShape:
    """One class: its length, methods and the attributes its methods assign on self."""

    module: str
    name: str
    lines: int
    methods: int
    attributes: int


@dataclass
class Figures:
    """Every figure the script prints, gathered in one walk of the source tree."""

    modules: list[str] = field(default_factory=list)
    module_lines: dict[str, int] = field(default_factory=dict)
    functions: list[FunctionShape] = field(default_factory=list)
    classes: list[ClassShape] = field(default_factory=list)
    patches: int = 0
    inline_error_types: int = 0


def branch_complexity(function: ast.AST) -> int:
    """Radon-style cyclomatic complexity of one function body, nested functions apart."""
    count = 1
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (*FUNCTION_TYPES, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(
            node,
            (
                ast.If,
                ast.IfExp,
                ast.For,
                ast.AsyncFor,
                ast.While,
                ast.ExceptHandler,
                ast.With,
                ast.AsyncWith,
                ast.Assert,
                ast.match_case,
            ),
        ):
            count += 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        stack.extend(ast.iter_child_nodes(node))
    return count


def _self_attributes(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                names.add(target.attr)
    return names


def _is_patch_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"patched", "deprecate_patch"}
    )


def _is_inline_error_type(node: ast.AST) -> bool:
    """An `ApplicationError(..., type="literal")` written at its raise site."""
    if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ApplicationError"):
        attr = getattr(node, "func", None)
        if not (isinstance(attr, ast.Attribute) and attr.attr == "ApplicationError"):
            return False
    assert isinstance(node, ast.Call)
    return any(
        kw.arg == "type" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)
        for kw in node.keywords
    )


def walk_source(package: Path) -> Figures:
    """Measure every module under the package from its text."""
    figures = Figures()
    for path in sorted(package.rglob("*.py")):
        module = str(path.relative_to(package.parent))
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        figures.modules.append(module)
        figures.module_lines[module] = len(text.splitlines())
        for node in ast.walk(tree):
            if isinstance(node, FUNCTION_TYPES):
                end = node.end_lineno or node.lineno
                figures.functions.append(
                    FunctionShape(module, node.name, end - node.lineno + 1, branch_complexity(node))
                )
            elif isinstance(node, ast.ClassDef):
                end = node.end_lineno or node.lineno
                methods = sum(isinstance(item, FUNCTION_TYPES) for item in node.body)
                figures.classes.append(
                    ClassShape(
                        module,
                        node.name,
                        end - node.lineno + 1,
                        methods,
                        len(_self_attributes(node)),
                    )
                )
            elif _is_patch_call(node):
                figures.patches += 1
            if _is_inline_error_type(node):
                figures.inline_error_types += 1
    return figures


def _folder(module: str) -> str:
    parts = module.split("/")
    return "/".join(parts[:2]) + "/" if len(parts) > 2 else parts[0] + "/ (root)"


def _is_private(module: str) -> bool:
    parts = module.removesuffix(".py").split("/")[1:]
    return any(part.startswith("_") and not part.startswith("__") for part in parts)


def exception_classes() -> tuple[list[type[BaseException]], list[type[BaseException]]]:
    """Every exception class defined in the package, and those with no base of its own."""
    import steadyloop

    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(steadyloop.__path__, "steadyloop."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    classes = list(found.values())
    roots = [
        cls
        for cls in classes
        if not any(base.__module__.startswith("steadyloop") for base in cls.__mro__[1:])
    ]
    return classes, roots


def gather(root: Path = ROOT) -> dict[str, object]:
    """All figures of the checkout at `root`, as one flat mapping in the order they print."""
    sys.path.insert(0, str(root))
    figures = walk_source(root / "steadyloop")
    largest_class = max(figures.classes, key=lambda c: c.lines)
    largest_module = max(figures.module_lines.items(), key=lambda item: item[1])
    long_by_folder = Counter(
        _folder(f.module) for f in figures.functions if f.lines > LONG_FUNCTION_LINES
    )
    complex_by_folder = Counter(
        _folder(f.module) for f in figures.functions if f.complexity > COMPLEX_FUNCTION
    )
    worst = max(figures.functions, key=lambda f: f.complexity)
    steadyloop = importlib.import_module("steadyloop")
    root_exports = getattr(steadyloop, "__all__", None)
    if root_exports is None:
        root_exports = [n for n in vars(steadyloop) if not n.startswith("_")]
    classes, roots = exception_classes()
    names = Counter(cls.__name__ for cls in classes)
    workflows_module = max(
        figures.module_lines.get("steadyloop/workflows/tool_loop.py", 0),
        figures.module_lines.get("steadyloop/_workflows/tool_loop.py", 0),
    )
    return {
        "lines under steadyloop/": sum(figures.module_lines.values()),
        "modules": len(figures.modules),
        "largest class": (
            f"{largest_class.name} ({largest_class.module}): {largest_class.lines} lines, "
            f"{largest_class.methods} methods, {largest_class.attributes} attributes"
        ),
        "largest module": f"{largest_module[0]}: {largest_module[1]} lines",
        "the loop's module (tool_loop.py) lines": workflows_module,
        f"functions over {LONG_FUNCTION_LINES} lines": sum(long_by_folder.values()),
        f"  by folder (over {LONG_FUNCTION_LINES} lines)": dict(sorted(long_by_folder.items())),
        f"functions with complexity over {COMPLEX_FUNCTION}": sum(complex_by_folder.values()),
        f"  by folder (complexity over {COMPLEX_FUNCTION})": dict(
            sorted(complex_by_folder.items())
        ),
        "in the workflows folder: over 60 lines / complexity over 15": (
            f"{sum(n for f, n in long_by_folder.items() if 'workflows' in f)} / "
            f"{sum(n for f, n in complex_by_folder.items() if 'workflows' in f)}"
        ),
        "most complex function": f"{worst.module}:{worst.name} ({worst.complexity})",
        "names exported by the package root": len(root_exports),
        "_private modules": f"{sum(map(_is_private, figures.modules))} of {len(figures.modules)}",
        "exception classes": len(classes),
        "exception roots (no steadyloop base)": len(roots),
        "exception names used twice or more": sorted(n for n, c in names.items() if c > 1),
        "ApplicationError types written inline": figures.inline_error_types,
        "workflow.patched calls": figures.patches,
    }


def _cell(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key.removeprefix('steadyloop/')} {n}" for key, n in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def compare(before: dict[str, object], after: dict[str, object]) -> str:
    """A markdown table of two measurements, one row per figure."""
    rows = ["| figure | before | after |", "|---|---|---|"]
    for name in after:
        label = name.strip()
        rows.append(f"| {label} | {_cell(before.get(name, '-'))} | {_cell(after[name])} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument(
        "--compare", type=Path, metavar="BEFORE_JSON", help="print a table against this"
    )
    args = parser.parse_args()
    figures = gather(args.root.resolve())
    if args.compare is not None:
        print(compare(json.loads(args.compare.read_text(encoding="utf-8")), figures))
        return
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for name, value in figures.items():
        if isinstance(value, dict):
            for folder, count in value.items():
                print(f"{name}: {folder} {count}")
        else:
            print(f"{name}: {value}")


if __name__ == "__main__":
    main()

"""How many lines a Temporal app gains to adopt steadyloop, counted in examples/orders/.

- The worker (`worker.py`): every line that names something imported from steadyloop,
  or imports it. The app's own worker would be the same file without them.
- Running an agent with a typed answer from a workflow (`workflows.py`): the import of
  `steadyloop.workflow`, the `Agent(...)` definition and the `.run(...)` that awaits it.
  The agent's instructions (the prompt's text, which any agent needs) are counted apart.

Also checks every steadyloop import is from a public module (`tests/test_layout.py`'s
`PUBLIC_MODULES`): a private path in an example is a path a user would copy.
Run: `python scripts/adoption_lines.py`.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "orders"
PUBLIC = {
    "steadyloop",
    "steadyloop.plugin",
    "steadyloop.tools",
    "steadyloop.workflow",
    "steadyloop.client",
    "steadyloop.testing",
}


def steadyloop_imports(tree: ast.Module) -> tuple[set[int], set[str], list[str]]:
    """The lines importing from steadyloop, the names imported, and private modules."""
    lines: set[int] = set()
    names: set[str] = set()
    private: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("steadyloop"):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            names.update(alias.asname or alias.name for alias in node.names)
            if node.module not in PUBLIC:
                private.append(str(node.module))
    return lines, names, private


def naming_lines(tree: ast.Module, names: set[str]) -> set[int]:
    """Lines of the statements' parts that name an imported steadyloop name."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            lines.add(node.lineno)
    return lines


def worker_lines() -> tuple[int, list[str]]:
    tree = ast.parse((EXAMPLE / "worker.py").read_text())
    imports, names, private = steadyloop_imports(tree)
    return len(imports | naming_lines(tree, names)), private


def agent_lines() -> tuple[int, int, list[str]]:
    source = (EXAMPLE / "workflows.py").read_text()
    tree = ast.parse(source)
    imports, names, private = steadyloop_imports(tree)
    counted = set(imports)
    agents: set[str] = set()
    instructions = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and func.id in names:
                counted.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
                agents.update(t.id for t in node.targets if isinstance(t, ast.Name))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "RULES" for t in node.targets
        ):
            instructions = (node.end_lineno or node.lineno) - node.lineno + 1
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in agents
        ):
            counted.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return len(counted), instructions, private


def main() -> int:
    worker, private_worker = worker_lines()
    agent, instructions, private_agent = agent_lines()
    print(f"lines added to an existing worker (examples/orders/worker.py): {worker} (goal: 3)")
    print(
        f"lines to run an agent with a typed answer (examples/orders/workflows.py): {agent} "
        f"(goal: 6), plus {instructions} of instructions text"
    )
    private = private_worker + private_agent
    print(f"imports from outside the public API: {', '.join(private) or 'none'}")
    return 1 if private else 0


if __name__ == "__main__":
    sys.exit(main())

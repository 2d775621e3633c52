"""No patch check, clock reading or random draw in workflow code can land in another
workflow task on replay than live: checked in the source, for every code path.

After a local activity, live code can resume one workflow task later than a replay of
the same history does. A `workflow.patched()` asked there records its marker in the
later task live and finds none on replay; a `workflow.now()` read there differs; a
branch on either is a nondeterminism error that Temporal retries forever, and the run
and its queries are wedged. So:

- no patch is asked at all (where a run keeps its log is a rule of its input, which
  `EventLog.begin` reads before the run's first await);
- `workflow.now()` is read only where the reading cannot decide a branch after a local
  activity: `durable_time` (the clock and the deadline timer), workflows that run no
  local activity, the run's first activation, and lengths or texts (a timer's length, a
  lease's expiry shown to people, a statistic) that replay does not compare;
- no random draw at all (`workflow.random`, `workflow.uuid4`).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import steadyloop._workflows

FOLDER = Path(steadyloop._workflows.__file__).parent

# (module, function) -> how many readings, and why none can decide a branch on replay.
NOW_ALLOWED = {
    ("durable_time", "__init__"): (1, "the clock starts in the run's first activation"),
    ("durable_time", "woke"): (1, "read right after an event of history resolved the await"),
    ("durable_time", "start"): (1, "the execution's first activation, before any await"),
    ("durable_time", "remaining"): (1, "an activity timeout's length"),
    ("chain_admission", "*"): (1, "the admission entity runs no local activity"),
    ("endpoint_health", "*"): (1, "the health entity runs no local activity"),
    ("hand_over", "restore"): (
        2,
        "the run's first activation (start, deadline), before any await",
    ),
    ("tool_loop", "_stopped"): (1, "the run's wall time, a statistic in its result"),
    ("receipt_path", "_wait_out_lease"): (1, "the lease timer's length"),
    ("tool_attempt", "_execute"): (1, "a lease's expiry, shown to people and sizing its timer"),
    ("approvals", "ask"): (1, "when a person was asked, shown to people"),
}
# Workflows whose every `workflow.now()` is allowed because they run no local activity.
NO_LOCAL_ACTIVITY = ("chain_admission", "endpoint_health")


def _calls(tree: ast.AST, attribute: str) -> list[tuple[str, int]]:
    """(enclosing function, line) of each `workflow.<attribute>(...)` call."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if isinstance(child, ast.Call):
                func = child.func
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr == attribute
                    and isinstance(func.value, ast.Name)
                    and func.value.id == "workflow"
                ):
                    found.append((function, child.lineno))
            visit(child, name)

    visit(tree, "<module>")
    return found


def _modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text()) for path in sorted(FOLDER.glob("*.py"))}


def misplaced_clock_readings(modules: dict[str, ast.Module]) -> list[str]:
    """Readings outside `NOW_ALLOWED`, and any past an allowed function's count (another
    reading there is a new place, to be judged)."""
    wrong = []
    for module, tree in modules.items():
        seen: Counter[str] = Counter()
        for function, line in _calls(tree, "now"):
            if (module, "*") in NOW_ALLOWED:
                continue
            seen[function] += 1
            allowed, _ = NOW_ALLOWED.get((module, function), (0, ""))
            if seen[function] > allowed:
                wrong.append(f"{module}.py:{line} ({function}) reads workflow.now()")
    return wrong


def test_every_clock_reading_sits_where_it_cannot_decide_a_branch_on_replay() -> None:
    assert misplaced_clock_readings(_modules()) == [], (
        "decide by a durable timer (`durable_time.Deadline`, a lease's timer) or read "
        "`DurableClock.now`, not `workflow.now()`"
    )


def test_a_clock_reading_added_after_a_local_activity_is_caught() -> None:
    modules = _modules()
    modules["routed_turn"] = ast.parse(
        "async def _route():\n"
        "    health = await _read_health([])\n"
        "    return plan(workflow.now(), health)\n"
    )
    assert misplaced_clock_readings(modules) == ["routed_turn.py:3 (_route) reads workflow.now()"]


def test_the_workflows_trusted_with_the_clock_run_no_local_activity() -> None:
    modules = _modules()
    for module in NO_LOCAL_ACTIVITY:
        assert _calls(modules[module], "execute_local_activity") == [], module
        assert _calls(modules[module], "start_local_activity") == [], module


def test_no_patch_and_the_deadline_read_the_run_only_in_its_first_activation() -> None:
    modules = _modules()
    patches = {
        (module, function)
        for module, tree in modules.items()
        for function, _ in _calls(tree, "patched")
    }
    assert patches == set()
    run = next(
        node
        for node in ast.walk(modules["tool_loop"])
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "run"
    )
    first_await = min(node.lineno for node in ast.walk(run) if isinstance(node, ast.Await))
    assert _first_call(run, "events", "begin") < first_await, "EventLog.begin: before any await"
    assert _first_call(run, "deadline", "start") < first_await, "Deadline.start: the same"
    restore = _first_call(run, "_hand_over", "restore")
    assert restore < first_await, "HandOver.restore reads the clock: the same"


def _first_call(function: ast.AST, owner: str, method: str) -> int:
    """The line of the first `<...>.<owner>.<method>(...)` in `function`."""
    return min(
        node.lineno
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == owner
    )


def test_workflow_code_draws_no_randomness() -> None:
    for module, tree in _modules().items():
        for draw in ("random", "uuid4"):
            assert _calls(tree, draw) == [], f"{module} calls workflow.{draw}()"

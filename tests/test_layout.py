"""The package's layout keeps its promises: concept folders, no cycles, pure concepts pure.

A newcomer finds a README section's code by folder name; that only stays true if nobody
re-grows a flat room, a cycle or a Temporal import in a pure concept. Read from the source
with `ast`, so the checks hold for code paths no test happens to import.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import steadyloop

ROOT = Path(steadyloop.__file__).parent

# One folder per concept the docs teach (a page each); each says in its docstring what it
# guarantees.
CONCEPTS = (
    "_stream",
    "_receipts",
    "_chains",
    "_routing",
    "_history",
    "_output",
    "_run",
    "_stops",
    "events",
    "_cli",
)

# Concepts whose code decides, and so must run without a Temporal server: no module in them
# may reach temporalio, directly or through another steadyloop module. The exceptions are
# the named Temporal adapters, each the one module of its concept that speaks Temporal.
PURE = (
    "_stream",
    "_receipts",
    "_chains",
    "_routing",
    "_history",
    "_output",
    "_run",
    "_stops",
    "events",
)
TEMPORAL_ADAPTERS = frozenset(
    {
        "steadyloop._chains.search_attributes",
        "steadyloop._history.payload_storage",
    }
)

# What a user builds and catches, exported by the package root; the rules, verdicts
# and stream primitives under them are private.
ROOT_EXPORTS = frozenset(
    [
        "AgentProfile",
        "Backoff",
        "ChatMessage",
        "ClientError",
        "CompactionPolicy",
        "ConfigError",
        "ContinuationOptions",
        "CursorExpired",
        "Delegation",
        "ForwardingOptions",
        "FunctionCall",
        "InvalidCursor",
        "NoWorkerAnswered",
        "NotTheCallReviewed",
        "NothingToResume",
        "Price",
        "RequestRefused",
        "RouteCandidate",
        "RouteConfig",
        "RunEnded",
        "RunEventItem",
        "RunFailed",
        "RunHandle",
        "RunInput",
        "RunLimits",
        "RunNotFound",
        "RunOptions",
        "RunPlugins",
        "RunResult",
        "RunSnapshot",
        "Sampling",
        "SteadyloopClient",
        "StopUnread",
        "TemporalUnreachable",
        "Thread",
        "ThreadBusy",
        "ThreadCannotContinue",
        "ToolCall",
        "connect",
        "resume_input",
    ]
)

# The modules a user imports, each with an `__all__`.
PUBLIC_MODULES = (
    "steadyloop",
    "steadyloop.client",
    "steadyloop.events",
    "steadyloop.tools",
    "steadyloop.tools.examples",
    "steadyloop.testing",
    "steadyloop.telemetry",
    "steadyloop.errors",
    "steadyloop.delegation",
    "steadyloop.plugin",
    "steadyloop.workflow",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def module_level_imports(path: Path) -> set[str]:
    """Modules imported when this module is imported or type-checked (not inside functions)."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in MODULES:
                        found.add(f"{node.module}.{alias.name}")
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)
                if isinstance(node, ast.Try):
                    for handler in node.handlers:
                        visit(handler.body)

    visit(ast.parse(path.read_text()).body)
    return found


def internal(importer: str, imports: set[str]) -> set[str]:
    """The steadyloop modules imported, less the importer's own packages: a submodule is
    only ever imported while its package's `__init__` is already running."""
    return {
        name
        for name in imports
        if name in MODULES and not (importer == name or importer.startswith(name + "."))
    }


GRAPH = {name: internal(name, module_level_imports(path)) for name, path in MODULES.items()}


def test_no_module_imports_itself_through_a_cycle() -> None:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def walk(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for nxt in sorted(GRAPH[name]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        stack.pop()
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            walk(name)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def reaches_temporalio(name: str, seen: set[str] | None = None) -> list[str] | None:
    """The import path from `name` to temporalio, or None when there is none."""
    seen = seen if seen is not None else set()
    seen.add(name)
    if any(
        i == "temporalio" or i.startswith("temporalio.")
        for i in module_level_imports(MODULES[name])
    ):
        return [name, "temporalio"]
    for nxt in sorted(GRAPH[name]):
        if nxt not in seen and (path := reaches_temporalio(nxt, seen)) is not None:
            return [name, *path]
    return None


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in MODULES
        if n.split(".")[1:2] and n.split(".")[1] in PURE and n not in TEMPORAL_ADAPTERS
    ],
)
def test_pure_concepts_import_nothing_from_temporalio(name: str) -> None:
    assert reaches_temporalio(name) is None, " -> ".join(reaches_temporalio(name) or [])


def test_the_temporal_adapters_are_the_ones_named() -> None:
    # An adapter that stops speaking Temporal should lose its exception, not keep it.
    for name in TEMPORAL_ADAPTERS:
        assert reaches_temporalio(name) is not None, name


@pytest.mark.parametrize("concept", CONCEPTS)
def test_each_concept_is_a_folder_that_says_what_it_guarantees(concept: str) -> None:
    package = importlib.import_module(f"steadyloop.{concept}")
    doc = package.__doc__ or ""
    assert len(doc.strip().splitlines()) >= 3, f"steadyloop.{concept} needs a docstring"
    # Every module in the folder is named in its docstring, so the docstring is a map.
    # A public concept's modules are private (`_models.py`); the docstring names them bare.
    here = {p.stem.lstrip("_") for p in (ROOT / concept).glob("*.py") if p.stem != "__init__"}
    named = set(re.findall(r"`([a-z_]+)`", doc))
    assert here - named == set(), f"steadyloop.{concept}'s docstring does not name these modules"


def test_the_top_level_is_no_longer_a_flat_room() -> None:
    top = {p.stem for p in ROOT.glob("*.py")}
    assert top <= {
        "__init__",
        "__main__",
        "_chat",
        "errors",  # the one exception base every folder's errors derive from
        "delegation",  # the agents a run may delegate to, and the chain limits
        "plugin",  # steadyloop on a user's own Temporal client and worker
        "workflow",  # an agent run from a user's own workflow
        "_redaction",
        "_failure_details",
        "_temporal_binaries",
    }


def test_the_command_line_is_apart_from_the_worker_process() -> None:
    worker = {p.stem for p in (ROOT / "_worker").glob("*.py")}
    assert not worker & {
        "cli",
        "receipts_cli",
        "steering_cli",
        "progress",
        "follow",
        "live_run",
        "demo",
    }
    for name in MODULES:
        if name.startswith("steadyloop._worker."):
            assert not any(i.startswith("steadyloop._cli") for i in GRAPH[name]), name


def test_the_root_exports_what_a_user_builds_and_catches() -> None:
    assert set(steadyloop.__all__) >= ROOT_EXPORTS
    # Chain rules and limits are a concept's own API, not the root's.
    assert [name for name in steadyloop.__all__ if name.endswith(("Limit", "Rule"))] == []
    for name in steadyloop.__all__:
        assert getattr(steadyloop, name) is not None, name


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_each_public_module_says_what_it_exports(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported, f"{name} has no __all__"
    for item in exported:
        assert hasattr(module, item), f"{name}.__all__ names {item}, which it does not have"


def test_every_other_module_is_private_by_name() -> None:
    # The pytest plugin is named by an entry point (installed metadata records it), not
    # imported; `__main__` is what `python -m steadyloop` runs.
    named_elsewhere = {"steadyloop.__main__", "steadyloop.testing.pytest_plugin"}
    exposed = [
        name
        for name in MODULES
        if name not in PUBLIC_MODULES
        and name not in named_elsewhere
        and not any(part.startswith("_") for part in name.split(".")[1:])
    ]
    assert exposed == [], "public by name but not in PUBLIC_MODULES"

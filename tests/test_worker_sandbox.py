"""The worker's sandbox passes through the workflow helpers every run would re-import.

Temporal's sandbox re-imports a workflow's module, and every module it reaches that is
not passed through, for every run: per run, CPU spent on imports rather than on the
loop (issue 19). `steadyloop.worker.process.workflow_runner` passes the helper modules of
`ToolLoopWorkflow` through. That is safe only for modules without state of their own,
so this checks what decides it: every name a passed-through module defines at module
level is a module, function, class, type variable or an immutable constant, and the
workflow modules themselves are still re-imported per run. It also checks that the
worker `steadyloop worker` builds uses this runner.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from datetime import timedelta
from typing import TypeVar

import pytest
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from steadyloop.routing.endpoints import EndpointRegistry
from steadyloop.tools.registry import ToolRegistry
from steadyloop.worker import process
from steadyloop.worker.process import (
    PASSED_THROUGH_WORKFLOW_HELPERS,
    RUN_WORKFLOWS,
    WorkerOptions,
    workflow_runner,
)

IMMUTABLE = (str, bytes, int, float, bool, type(None), timedelta, frozenset, tuple)


@pytest.mark.parametrize("name", PASSED_THROUGH_WORKFLOW_HELPERS)
def test_a_passed_through_helper_holds_no_state(name: str) -> None:
    module = importlib.import_module(name)
    for attribute, value in vars(module).items():
        if attribute.startswith("__") or attribute == "annotations":  # the __future__ flag
            continue
        stateless = (
            inspect.ismodule(value)
            or inspect.isfunction(value)
            or inspect.isclass(value)
            # Constants, type variables and forms (Literal, Any), and the options handed
            # to `execute_activity` (never changed).
            or isinstance(value, (TypeVar, typing._SpecialForm, RetryPolicy, *IMMUTABLE))
            or typing.get_origin(value) is not None  # a type alias
        )
        assert stateless, f"{name}.{attribute} is module-level state: {value!r}"


def test_the_workflow_modules_themselves_are_still_re_imported_per_run() -> None:
    passed = workflow_runner().restrictions.passthrough_modules
    for workflow in RUN_WORKFLOWS:
        module = workflow.__module__
        assert module not in passed
        assert not any(module.startswith(prefix + ".") for prefix in passed)
    assert set(PASSED_THROUGH_WORKFLOW_HELPERS) <= passed


def test_the_worker_runs_workflows_in_this_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    class Recorder:
        def __init__(self, client: Client, **options: object) -> None:
            seen.update(options)

    monkeypatch.setattr(process, "Worker", Recorder)
    options = WorkerOptions(task_queue="q", endpoints=EndpointRegistry([]), tools=ToolRegistry([]))
    process.build_worker(object(), options, model=_NoModel())  # type: ignore[arg-type]
    runner = seen["workflow_runner"]
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert set(PASSED_THROUGH_WORKFLOW_HELPERS) <= runner.restrictions.passthrough_modules


class _NoModel:
    def activities(self) -> list[object]:
        return []

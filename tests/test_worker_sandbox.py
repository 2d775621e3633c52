"""The worker's sandbox passes through the workflow helpers every run would re-import.

Temporal's sandbox re-imports a workflow's module, and every module it reaches that is
not passed through, for every run: per run, CPU spent on imports rather than on the
loop. `steadyloop._worker.process.workflow_runner` passes the helper modules of
`ToolLoopWorkflow` through. That is safe only for modules without state of their own,
so this checks what decides it: every name a passed-through module defines at module
level is a module, function, class, type variable or an immutable constant, and a
passed-through workflow class keeps no mutable state on the class. The entity workflows
are still re-imported per run. It also checks that the worker `steadyloop worker` builds
uses this runner. (What the sandbox's runtime checks did inside passed-through modules,
`tests/test_workflow_determinism.py` now does statically.)
"""

from __future__ import annotations

import importlib
import inspect
import typing
from datetime import timedelta
from typing import TypeVar

import pytest
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._worker import process
from steadyloop._worker.process import (
    PASSED_THROUGH_WORKFLOW_HELPERS,
    PASSED_THROUGH_WORKFLOW_MODULES,
    RUN_WORKFLOWS,
    WorkerOptions,
    workflow_runner,
)
from steadyloop._worker.sandbox import PASSED_THROUGH
from steadyloop.tools._registry import ToolRegistry

IMMUTABLE = (str, bytes, int, float, bool, type(None), timedelta, frozenset, tuple)


@pytest.mark.parametrize("name", PASSED_THROUGH)
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


def test_a_passed_through_workflow_class_keeps_no_state_on_the_class() -> None:
    # Runs share the class object: what a run keeps must live on its instance.
    for workflow in RUN_WORKFLOWS:
        if workflow.__module__ not in PASSED_THROUGH_WORKFLOW_MODULES:
            continue
        for klass in workflow.__mro__[:-1]:
            for attribute, value in vars(klass).items():
                shared = isinstance(value, (list, dict, set, bytearray))
                assert not shared, f"{klass.__name__}.{attribute} is shared by every run"


def test_the_per_run_workflows_are_passed_through_and_the_entities_re_imported() -> None:
    passed = workflow_runner().restrictions.passthrough_modules
    per_run = {w.__module__ for w in RUN_WORKFLOWS} & set(PASSED_THROUGH_WORKFLOW_MODULES)
    assert per_run == set(PASSED_THROUGH_WORKFLOW_MODULES)  # each names a workflow's module
    for workflow in RUN_WORKFLOWS:
        module = workflow.__module__
        assert (module in passed) == (module in PASSED_THROUGH_WORKFLOW_MODULES), module
    assert set(PASSED_THROUGH_WORKFLOW_HELPERS) <= passed


def test_the_worker_runs_workflows_in_this_sandbox() -> None:
    # The plugin gives a worker that set no runner steadyloop's; `steadyloop worker`'s
    # worker is built by the plugin.
    options = WorkerOptions(task_queue="q", endpoints=EndpointRegistry([]), tools=ToolRegistry([]))
    plugin = process.worker_plugin(options, model=_NoModel())  # type: ignore[arg-type]
    config = plugin.configure_worker({"client": _PydanticClient(), "task_queue": "q"})  # type: ignore[typeddict-item]
    runner = config["workflow_runner"]
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert set(PASSED_THROUGH) <= runner.restrictions.passthrough_modules


class _PydanticClient:
    data_converter = pydantic_data_converter


class _NoModel:
    def activities(self) -> list[object]:
        return []

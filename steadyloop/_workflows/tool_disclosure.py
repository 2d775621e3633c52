"""A run's tools, described once at its start: core tools, plugins, `activate_plugin`.

Deterministic workflow code. `ToolLoopWorkflow` calls `disclose_tools` before its first
turn (and again in each run after a continue-as-new, with the activations it carried);
the returned `steadyloop.tools._disclosure.PluginDisclosure` decides what each turn offers
and answers activations without an activity. Everything a run's configuration can get
wrong fails it at the start with a non-retryable error that names the fix, never at the
turn a plugin is activated: a tool or plugin the worker lacks, and a tool of the run
named like a built-in.

The description is a local activity: it reads the worker's own registry, so it needs no
task queue, and it runs in the run's first workflow task beside the first endpoint-health
read, whose markers Temporal Cloud bills as one action for the task. A worker that
cannot answer locally (it lacks the activity, or lacks a named tool) is asked again
through the task queue, so the activity workers stay the authority on what exists.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from steadyloop._chains.delegation_tool import DELEGATE_TOOL
    from steadyloop._routing.provider_profiles import schema_profile
    from steadyloop._run.models import RunInput
    from steadyloop.errors import RESERVED_TOOL_NAME, UNKNOWN_PLUGINS, UNKNOWN_TOOLS
    from steadyloop.tools._disclosure import ACTIVATE_PLUGIN_TOOL, PluginDisclosure
    from steadyloop.tools._payloads import (
        DESCRIBE_TOOLS_ACTIVITY,
        DescribeToolsInput,
        DescribeToolsResult,
    )

DESCRIBE_TIMEOUT = timedelta(seconds=30)
LOCAL_DESCRIBE_TIMEOUT = timedelta(seconds=5)


def describes_locally(run: RunInput) -> bool:
    """Whether this run describes its tools by a local activity: it has tools to describe."""
    return bool(run.tools or run.plugins.named)


async def disclose_tools(run: RunInput, *, locally: bool) -> PluginDisclosure:
    """The run's tools as the worker describes them, with the plugins it activated before
    (`locally`: `describes_locally(run)`)."""
    if not run.tools and not run.plugins.named:
        return PluginDisclosure.none()
    profile = schema_profile(run.provider_profile)
    request = DescribeToolsInput(names=run.tools, plugins=run.plugins.named, schema_profile=profile)
    described = None
    if locally:
        described = await _described_locally(request)
    if described is None or described.unknown or described.unknown_plugins:
        described = await workflow.execute_activity(
            DESCRIBE_TOOLS_ACTIVITY,
            request,
            result_type=DescribeToolsResult,
            start_to_close_timeout=DESCRIBE_TIMEOUT,
        )
    if described.unknown:
        raise ApplicationError(
            f"the run asks for tools the worker does not have: {described.unknown}; "
            f"available: {described.available}",
            type=UNKNOWN_TOOLS,
            non_retryable=True,
        )
    if described.unknown_plugins:
        raise ApplicationError(
            f"the run asks for plugins the worker does not have: {described.unknown_plugins}; "
            f"available: {described.available_plugins}",
            type=UNKNOWN_PLUGINS,
            non_retryable=True,
        )
    disclosure = PluginDisclosure(
        tools=run.tools,
        plugins=run.plugins,
        described=described,
        activated=[] if run.carried is None else run.carried.activated_plugins,
        profile=profile,
    )
    reserved = [ACTIVATE_PLUGIN_TOOL] if run.plugins.on_demand else []
    if run.delegation is not None and run.delegation.to:
        reserved.append(DELEGATE_TOOL)
    taken = disclosure.reserved_names_taken(reserved)
    if taken:
        raise ApplicationError(
            f"the run has tools named {taken}, reserved for the run's built-in tools "
            f"({ACTIVATE_PLUGIN_TOOL!r} when it has on-demand plugins, {DELEGATE_TOOL!r} when "
            "it may delegate); rename the tools",
            type=RESERVED_TOOL_NAME,
            non_retryable=True,
        )
    return disclosure


async def _described_locally(request: DescribeToolsInput) -> DescribeToolsResult | None:
    """This worker's description, or None when its one attempt failed (the task queue
    is asked next). A worker without the activity fails the run instead: the SDK refuses
    to schedule a local activity its worker lacks, before any command."""
    try:
        described: DescribeToolsResult = await workflow.execute_local_activity(
            DESCRIBE_TOOLS_ACTIVITY,
            request,
            result_type=DescribeToolsResult,
            start_to_close_timeout=LOCAL_DESCRIBE_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
    except ActivityError as error:
        if isinstance(error.cause, CancelledError):
            raise
        workflow.logger.info("tools not described locally, asking the task queue: %s", error)
        return None
    return described

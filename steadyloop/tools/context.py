"""Which call a tool is answering, for tool code that needs to know.

A tool's parameters are what the model chose. What the run knows about the call (its
id, the workflow id, the tenant) is not the model's to choose, so it does not travel as
an argument: the run-tool activity sets it here for the duration of the call, and tool
code reads it with `current_invocation()` (for example to tag a side effect with the
call id, or to scope it to a tenant). Outside a tool call it raises, rather than
returning a made-up invocation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from steadyloop.tools.payloads import ToolInvocation

_current: ContextVar[ToolInvocation | None] = ContextVar("steadyloop_tool_invocation", default=None)


def current_invocation() -> ToolInvocation:
    """The invocation being run. Raises `RuntimeError` when called outside a tool call."""
    invocation = _current.get()
    if invocation is None:
        raise RuntimeError("current_invocation() is only available while a tool call runs")
    return invocation


@contextmanager
def invocation_scope(invocation: ToolInvocation) -> Iterator[None]:
    """Make `invocation` current for the body (used by the run-tool activity)."""
    token = _current.set(invocation)
    try:
        yield
    finally:
        _current.reset(token)

"""What the client API raises, one type per thing a caller would do differently.

Every message names the run (`thread/n` workflow id) and, where there is one, what to do
next. A caller branches on the type, never on the text:

- `ThreadBusy`: a run of the thread is in flight; a new message would be a second run.
  Steer it (`start(..., steer=True)`) or wait for it (`handle.result()`).
- `ThreadCannotContinue`: the thread's last run left nothing a follow-up could inherit
  safely (it failed, was terminated, or its receipts did not fit its result), so going
  on could repeat an effect it already had.
- `RunEnded`: a request to a run that has ended (it reads no more decisions).
- `NotTheCallReviewed`: the call waiting under that id is not the one the person
  reviewed (or nothing waits under it); `waiting` lists what waits now.
- `NoWorkerAnswered`: the server took the request, but no worker accepted it within
  the bound. A decision is not lost: it waits on the server for a worker, and a retry
  under the same key is applied at most once.
- `RequestRefused`: the run refused the request for another reason it states.
- `RunFailed`: the run's workflow did not complete (failed, terminated, timed out);
  `handle.result()` raises it, and so does `handle.events()` at the end of the log of
  such a run, with the same cause (e.g. `UnknownTools: ...`).
- `ToolsNotServed`: the run names tools or plugins the worker of its task queue does
  not serve; nothing was started. Name tools it serves, or give the worker the tools.
- `RunNotFound`: no run has that workflow id (a typo, another namespace, or retention
  has deleted it).
- `StopUnread`: the run completed, so its event log holds a stop, but a follower could
  not read on to it within the bound; it names the cursor to follow again after.
"""

from __future__ import annotations

from collections.abc import Sequence

from steadyloop._run.steering import PendingApproval
from steadyloop.errors import SteadyloopError

__all__ = [
    "ClientError",
    "NoWorkerAnswered",
    "NotTheCallReviewed",
    "RequestRefused",
    "RunEnded",
    "RunFailed",
    "RunNotFound",
    "StopUnread",
    "TemporalLost",
    "ThreadBusy",
    "ThreadCannotContinue",
    "ToolsNotServed",
]


class ClientError(SteadyloopError):
    """Base of every error the client API raises about a thread or a run."""

    def __init__(self, message: str, *, workflow_id: str) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id


class ThreadBusy(ClientError):
    """A run of the thread is in flight: a message now is refused, naming that run."""

    def __init__(self, thread: str, workflow_id: str) -> None:
        super().__init__(
            f"thread {thread!r} has a run in flight ({workflow_id}); a thread runs one run "
            "at a time: pass steer=True to give it the message at its next turn, or wait "
            "for it to end (handle.result()) and start again",
            workflow_id=workflow_id,
        )
        self.thread = thread


class ThreadCannotContinue(ClientError):
    """The thread's last run cannot be inherited without risking a repeated effect."""

    def __init__(self, thread: str, workflow_id: str, why: str) -> None:
        super().__init__(
            f"thread {thread!r} cannot go on from its last run {workflow_id}: {why}. A "
            "follow-up inherits the last run's transcript and receipts; without them it "
            "could repeat an effect that run already had. Start a new thread (pass the "
            "conversation as messages=, e.g. from handle.snapshot().transcript)",
            workflow_id=workflow_id,
        )
        self.thread = thread
        self.why = why


class RunEnded(ClientError):
    """The run has ended: it reads no more messages or decisions."""

    def __init__(self, workflow_id: str, how: str, what: str) -> None:
        super().__init__(
            f"run {workflow_id} has ended ({how}): {what} reached no running run; nothing "
            "was recorded",
            workflow_id=workflow_id,
        )
        self.how = how


class NotTheCallReviewed(ClientError):
    """The call waiting under `call_id` is not the one reviewed; `waiting` is what waits."""

    def __init__(
        self,
        workflow_id: str,
        call_id: str,
        waiting: Sequence[PendingApproval],
        detail: str = "",
    ) -> None:
        now = "; ".join(
            f"{c.call_id}: {c.tool} (turn {c.turn}, sha {c.arguments_sha256[:12]})" for c in waiting
        )
        super().__init__(
            f"run {workflow_id}: {call_id!r} is not the call you reviewed"
            + (f" ({detail})" if detail else "")
            + f"; waiting now: {now or 'nothing'}; nothing was decided",
            workflow_id=workflow_id,
        )
        self.call_id = call_id
        self.waiting = list(waiting)


class NoWorkerAnswered(ClientError):
    """No worker took the request within the bound; it waits on the server for one."""

    def __init__(self, workflow_id: str, what: str, waited_s: float) -> None:
        super().__init__(
            f"run {workflow_id}: no worker accepted {what} within {waited_s:g}s. It is not "
            "lost: it waits on the server for a worker of the run's task queue (is "
            "`steadyloop worker` running?); retrying with the same key applies it at most once",
            workflow_id=workflow_id,
        )
        self.what = what
        self.waited_s = waited_s


class RequestRefused(ClientError):
    """The run refused the request, for the reason it gave."""

    def __init__(self, workflow_id: str, what: str, reason: str) -> None:
        super().__init__(f"run {workflow_id} refused {what}: {reason}", workflow_id=workflow_id)
        self.reason = reason


class RunFailed(ClientError):
    """The run's workflow did not complete: there is no `RunResult`."""

    def __init__(self, workflow_id: str, status: str, cause: str) -> None:
        super().__init__(
            f"run {workflow_id} did not complete ({status}): {cause}", workflow_id=workflow_id
        )
        self.status = status
        self.cause = cause


class ToolsNotServed(ClientError):
    """The run names tools or plugins the worker of its task queue does not serve, so it
    was not started (it would fail at its first task). `tools` and `plugins` are the
    missing names; `served_tools` and `served_plugins` what the worker serves."""

    def __init__(
        self,
        workflow_id: str,
        task_queue: str,
        text: str,
        *,
        tools: Sequence[str],
        plugins: Sequence[str],
        served_tools: Sequence[str],
        served_plugins: Sequence[str],
    ) -> None:
        super().__init__(
            f"run {workflow_id} was not started: {text}. Name tools the worker serves "
            f"(RunOptions.tools), or start the worker of task queue {task_queue!r} with them",
            workflow_id=workflow_id,
        )
        self.task_queue = task_queue
        self.tools = list(tools)
        self.plugins = list(plugins)
        self.served_tools = list(served_tools)
        self.served_plugins = list(served_plugins)


class RunNotFound(ClientError):
    """No workflow has that id in the client's namespace."""

    def __init__(self, workflow_id: str, namespace: str) -> None:
        super().__init__(
            f"no run {workflow_id!r} in namespace {namespace!r}: check the id (a thread's runs "
            "are <thread>/1, <thread>/2, ...) and the namespace; an ended run is deleted "
            "after the namespace's retention",
            workflow_id=workflow_id,
        )


class StopUnread(ClientError):
    """The run completed (it published its stop before it returned), but the follower
    could not read on to the stop within `waited_s`: the log answered nothing after
    `cursor` (None: after the start). Nothing was skipped: following again after `cursor`
    reads the rest; the run's result says how it stopped. `why`, when given, says instead
    why the stop cannot be read at all (a log in history whose run's result had to leave
    its last events out to fit the payload limit)."""

    def __init__(
        self, workflow_id: str, cursor: str | None, waited_s: float, *, why: str | None = None
    ) -> None:
        after = "its start" if cursor is None else f"cursor {cursor}"
        again = "events()" if cursor is None else f"events(after={cursor!r})"
        if why is None:
            why = (
                f"its event log answered nothing after {after} for {waited_s:g}s after the "
                "run ended, so its stop was not read (is a worker of the run's task queue "
                f"running?). Nothing was skipped: follow again with {again} to read the rest"
            )
        super().__init__(
            f"run {workflow_id} completed, but {why}; how the run stopped is in handle.result()",
            workflow_id=workflow_id,
        )
        self.cursor = cursor
        self.waited_s = waited_s


class TemporalLost(ClientError):
    """Temporal did not answer for `waited_s` while the run was followed (`cause`: the
    transport's words). Nothing is known of the run since: it lives on the server, not in
    the follower, and may have gone on or ended. Following again after `cursor` (None:
    from the start) once the server answers misses nothing."""

    def __init__(self, workflow_id: str, cursor: str | None, waited_s: float, cause: str) -> None:
        again = "events()" if cursor is None else f"events(after={cursor!r})"
        super().__init__(
            f"run {workflow_id}: Temporal did not answer for {waited_s:.0f}s ({cause}); how "
            f"the run is doing is unknown, not failed. Once Temporal is back, follow again "
            f"with {again}: nothing is skipped",
            workflow_id=workflow_id,
        )
        self.cursor = cursor
        self.waited_s = waited_s
        self.cause = cause

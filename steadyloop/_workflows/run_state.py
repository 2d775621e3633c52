"""What `ToolLoopWorkflow` and the parts it owns share: one run's state, and the stop.

The loop owns the parts (`ModelTurn`, `ToolBatch`, `HandOver`, with `Steering`,
`Approvals`, `LateResults`, `ChildRuns`); each part keeps its own state and reads and
writes the run's through one `RunState`, so a part replaced or restored (a transcript
healed, a ledger carried from the last execution) is seen by every other at once.
Workflow state only: nothing here makes a command.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from temporalio import workflow

if TYPE_CHECKING:  # annotations only: no module-level object the sandbox test cannot vouch for
    from pydantic import JsonValue

with workflow.unsafe.imports_passed_through():
    from steadyloop._chat import ChatMessage
    from steadyloop._output.forwarding import PartialOutput
    from steadyloop._receipts.ledger import ReceiptLedger
    from steadyloop._run.models import AmbiguousCall, RunLimits, RunStats, StopReason
    from steadyloop.errors import SteadyloopError
    from steadyloop.events._models import EventKind, EventPhase
    from steadyloop.tools._disclosure import PluginDisclosure
    from steadyloop.tools._payloads import ToolDescription

from steadyloop._workflows.approvals import Approvals
from steadyloop._workflows.delegation import ChildRuns
from steadyloop._workflows.durable_time import Deadline, DurableClock
from steadyloop._workflows.event_log import EventLog
from steadyloop._workflows.late_results import LateResults
from steadyloop._workflows.payload_ceiling import PayloadCeiling
from steadyloop._workflows.run_events import RunEventNotes
from steadyloop._workflows.steering import Steering


class Stop(SteadyloopError):
    """Ends the loop at a turn boundary with a named stop reason (and, for a final
    answer, the answer; for a typed run, its validated value, or the text that was not)."""

    def __init__(
        self,
        reason: StopReason,
        detail: str,
        *,
        answer: str | None = None,
        output: JsonValue = None,
        raw_output: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.answer = answer
        self.output = output
        self.raw_output = raw_output


class RunState:
    """One run's state, as the loop and its parts read and change it."""

    def __init__(self) -> None:
        self.transcript: list[ChatMessage] = []
        self.stats = RunStats()
        self.turn = 0
        self.phase = "starting"
        self.partial: PartialOutput | None = None
        self.steering = Steering()
        self.approvals = Approvals()
        self.receipts = ReceiptLedger()
        # The `run` part of receipt keys: the workflow id, or the scope a resumed run
        # inherited from the run it resumes (so that run's receipts match).
        self.receipt_scope = ""
        self.tenant = "default"  # the run's tenant, for receipt keys (set by `run`)
        self.ambiguous: dict[str, AmbiguousCall] = {}
        self.late = LateResults()  # timed-out attempts and what came back late
        self.deadline = Deadline(None)  # ended by its timer (`durable_time`)
        self.clock: DurableClock | None = None  # what time-dependent decisions read
        self.started = datetime.min  # set by `HandOver.restore` when the run begins
        self.child_runs: ChildRuns | None = None  # set when the run may delegate
        self.disclosure = PluginDisclosure.none()  # the run's tools, once described
        self.ceiling = PayloadCeiling()  # the limit on one activity input, once known
        self.updates = 0  # updates handled by this execution (Temporal caps them)
        self.events = EventLog()  # the run's events for followers, published per step
        self.notes = RunEventNotes(self.events)

    def event(
        self, phase: EventPhase, kind: EventKind, text: str, call_id: str | None = None
    ) -> None:
        """Note what a guarantee did in the current turn on the event log (workflow
        state, no command): the run's one record of it."""
        self.notes.timeline(self.turn, phase, kind, text, call_id)

    def durable_clock(self) -> DurableClock:
        assert self.clock is not None  # set first thing in `run`
        return self.clock

    def offered(self) -> dict[str, ToolDescription]:
        """This turn's tools: core and built-in first, then the active plugins' appended."""
        tools = self.disclosure.core()
        if self.child_runs is not None:
            tools = self.child_runs.offer(tools)
        return self.disclosure.with_active_plugins(tools)

    def check_interrupt(self) -> None:
        if self.steering.interrupted is not None:
            raise Stop("interrupted", self.steering.interrupted)

    def check_bounds(self, limits: RunLimits, *, boundary: bool = True) -> None:
        """Stop when a bound is reached. Within a turn (`boundary=False`: between the
        pieces of a continued answer) the turn count is not a bound: the turn is one."""
        self.check_interrupt()
        if self.deadline.passed:
            raise Stop("deadline", f"the run's deadline of {limits.deadline_s}s passed")
        budget = limits.token_budget
        # Children's tokens count: a run cannot escape its budget by delegating.
        if budget is not None and self.stats.tokens_with_children >= budget:
            raise Stop("token_budget", self.stats.budget_use(budget))
        if boundary and self.turn >= limits.max_turns:
            raise Stop("max_turns", f"{limits.max_turns} model turns taken")

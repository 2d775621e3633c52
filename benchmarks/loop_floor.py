"""The floor for `bench_loop.py`: a bare workflow doing only what Temporal itself charges.

`FloorWorkflow` executes the same activities as an N-turn `ToolLoopWorkflow` run, with
the same payload sizes to the byte, and does nothing else:

- one "describe" local activity at the start (steadyloop's `describe_tools`, which a run
  asks of its own worker);
- per turn, one "model" activity whose input is as large as steadyloop's model request
  that turn (the whole transcript so far) and whose result is as large as the assembled
  turn steadyloop's model activity returned, then one "tool" activity with the sizes of
  steadyloop's tool invocation and tool outcome;
- a last "model" activity with the sizes of the final-answer call, and a workflow result
  as large as steadyloop's `RunResult` (which carries the transcript).

The sizes (`PayloadSizes`) are read from the history of a steadyloop run with the same
turn count and text size, so both workflows make the server and the data converter move
the same bytes; the floor's payloads are padding (`"x" * n`) inside the smallest
envelope that carries them. Its model and tool activities are regular activities with the
same timeouts and retry policies as steadyloop's, run by the same worker. So the difference
between the two workflows' time per turn is what steadyloop's own logic costs: the
request it builds and checks, streaming and assembling a completion over HTTP, reading
and validating the arguments, running the tool through the registry, and the work of
serializing a transcript of messages rather than one string.

The workflow also records, from inside, the first turn in which Temporal suggested
continue-as-new (`workflow.info().is_continue_as_new_suggested()`), with the history
length and size it reported then: a cross-check for what `bench_loop.py` reads from the
outside (`WorkflowTaskStarted.suggest_continue_as_new`).

Workflow classes must live in an importable module, not `__main__`: this one is imported
by the benchmark and by `tests/test_bench_loop.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

FLOOR_DESCRIBE_ACTIVITY = "bench.floor_describe"
FLOOR_MODEL_ACTIVITY = "bench.floor_model"
FLOOR_TOOL_ACTIVITY = "bench.floor_tool"

# The timeouts and attempts steadyloop gives its activities (RunLimits defaults, a pure
# tool's three attempts, DESCRIBE_TIMEOUT), so the server keeps the same timers.
MODEL_TIMEOUT = timedelta(seconds=300)
MODEL_RETRY = RetryPolicy(maximum_attempts=3)
TOOL_TIMEOUT = timedelta(seconds=30)
TOOL_RETRY = RetryPolicy(maximum_attempts=3)
DESCRIBE_TIMEOUT = timedelta(seconds=30)

_PROSE = (
    "the quick brown fox reads a file of logs and finds three errors in the parser "
    "module while the build waits for tests to finish on a slow runner so the agent "
    "writes a patch adds a case and runs the suite again before it answers"
)
_WORDS = tuple(_PROSE.split())


def turn_text(turn: int, size: int) -> str:
    """`size` characters of plain words, different per turn, deterministic.

    What the scripted model sends as a turn's tool-call argument.
    """
    out: list[str] = [f"turn {turn}:"]
    length = len(out[0])
    position = turn * 7
    while length < size:
        word = _WORDS[position % len(_WORDS)]
        position += 3 if position % 2 else 5
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


@dataclass
class PayloadSizes:
    """Bytes of each payload's data (its JSON) in one steadyloop run.

    The lists have one entry per completed tool turn, in order: the model call's input
    and result, the tool call's input and result. `final_in`/`final_out` are the
    final-answer model call's, `result` the workflow result's; None when the run did
    not get that far.
    """

    describe_in: int
    describe_out: int
    model_in: list[int]
    model_out: list[int]
    tool_in: list[int]
    tool_out: list[int]
    final_in: int | None = None
    final_out: int | None = None
    result: int | None = None

    def for_turns(self, turns: int) -> PayloadSizes:
        """Sizes for `turns` tool turns; a run that stopped early is extended.

        Past the recorded turns, model inputs keep growing by the last turn's growth
        (the transcript grows by about the same bytes every turn) and the other sizes
        repeat the last turn's. The final call's input is the next model input unless
        the recorded run had exactly `turns` turns.
        """
        recorded = len(self.model_in)
        if recorded == 0:
            # Nothing to extend (the run it was read from stopped before a tool turn):
            # empty payloads, never an exception, which in workflow code would fail the
            # workflow task and be retried forever.
            zeros = [0] * turns
            return replace(
                self,
                model_in=zeros,
                model_out=list(zeros),
                tool_in=list(zeros),
                tool_out=list(zeros),
                final_in=self.final_in or 0,
                final_out=self.final_out or 0,
                result=self.result or 0,
            )
        growth = self.model_in[-1] - self.model_in[-2] if recorded >= 2 else 0
        model_in, model_out = self.model_in[:turns], self.model_out[:turns]
        tool_in, tool_out = self.tool_in[:turns], self.tool_out[:turns]
        while len(model_in) < turns:
            model_in.append(model_in[-1] + growth)
            model_out.append(model_out[-1])
            tool_in.append(tool_in[-1])
            tool_out.append(tool_out[-1])
        final_in = self.final_in if turns == recorded else None
        return replace(
            self,
            model_in=model_in,
            model_out=model_out,
            tool_in=tool_in,
            tool_out=tool_out,
            final_in=final_in if final_in is not None else model_in[-1] + growth,
            final_out=self.final_out if self.final_out is not None else 512,
            result=self.result if turns == recorded and self.result is not None else 0,
        )


@dataclass
class FloorInput:
    turns: int
    sizes: PayloadSizes


@dataclass
class FloorCall:
    """A floor activity's input: padding to the input size, and the result size to return."""

    result_bytes: int
    padding: str = ""


@dataclass
class FloorResult:
    tool_calls: int
    continue_as_new_suggested_at_turn: int | None = None
    history_length_then: int | None = None
    history_size_then: int | None = None
    padding: str = field(default="", repr=False)


def _data_bytes(value: object) -> int:
    return sum(len(p.data) for p in workflow.payload_converter().to_payloads([value]))


def _call(size: int, result_bytes: int) -> FloorCall:
    """A `FloorCall` whose JSON is `size` bytes (or as small as it can be)."""
    empty = FloorCall(result_bytes=result_bytes)
    return FloorCall(result_bytes=result_bytes, padding="x" * max(0, size - _data_bytes(empty)))


# Any error from the floor's workflow code fails the run (which the benchmark reports),
# rather than failing its workflow task over and over until the benchmark times out.
@workflow.defn(name="BenchFloorWorkflow", failure_exception_types=[Exception])
class FloorWorkflow:
    """N turns of (model-sized activity, tool-sized activity), then a final model call."""

    @workflow.run
    async def run(self, request: FloorInput) -> FloorResult:
        sizes = request.sizes.for_turns(request.turns)
        result = FloorResult(tool_calls=0)
        await workflow.execute_local_activity(
            FLOOR_DESCRIBE_ACTIVITY,
            _call(sizes.describe_in, sizes.describe_out),
            result_type=str,
            start_to_close_timeout=DESCRIBE_TIMEOUT,
        )
        for turn in range(1, request.turns + 1):
            await workflow.execute_activity(
                FLOOR_MODEL_ACTIVITY,
                _call(sizes.model_in[turn - 1], sizes.model_out[turn - 1]),
                result_type=str,
                start_to_close_timeout=MODEL_TIMEOUT,
                retry_policy=MODEL_RETRY,
            )
            _note_suggestion(result, turn)
            await workflow.execute_activity(
                FLOOR_TOOL_ACTIVITY,
                _call(sizes.tool_in[turn - 1], sizes.tool_out[turn - 1]),
                result_type=str,
                start_to_close_timeout=TOOL_TIMEOUT,
                retry_policy=TOOL_RETRY,
            )
            result.tool_calls += 1
            _note_suggestion(result, turn)
        await workflow.execute_activity(
            FLOOR_MODEL_ACTIVITY,
            _call(sizes.final_in or 0, sizes.final_out or 0),
            result_type=str,
            start_to_close_timeout=MODEL_TIMEOUT,
            retry_policy=MODEL_RETRY,
        )
        _note_suggestion(result, request.turns + 1)
        result.padding = "x" * max(0, (sizes.result or 0) - _data_bytes(result))
        return result


def _note_suggestion(result: FloorResult, turn: int) -> None:
    """Record the first turn in which Temporal suggested continue-as-new."""
    info = workflow.info()
    if result.continue_as_new_suggested_at_turn is None and info.is_continue_as_new_suggested():
        result.continue_as_new_suggested_at_turn = turn
        result.history_length_then = info.get_current_history_length()
        result.history_size_then = info.get_current_history_size()


def _answer(call: FloorCall) -> str:
    """A JSON string of `call.result_bytes` bytes (quotes included)."""
    return "y" * max(0, call.result_bytes - 2)


@activity.defn(name=FLOOR_DESCRIBE_ACTIVITY)
async def floor_describe(call: FloorCall) -> str:
    return _answer(call)


@activity.defn(name=FLOOR_MODEL_ACTIVITY)
async def floor_model(call: FloorCall) -> str:
    return _answer(call)


@activity.defn(name=FLOOR_TOOL_ACTIVITY)
async def floor_tool(call: FloorCall) -> str:
    return _answer(call)


FLOOR_ACTIVITIES = (floor_describe, floor_model, floor_tool)

"""Forwarding a model's output to people watching a run, and the values that say it was seen.

Once a person has read part of an answer, a retry of that attempt would append a
second answer to the one they are reading. So forwarding is the line that decides
retries: an attempt that forwarded nothing may be retried or repeated freely; an
attempt that forwarded something (`produced_output`) is never repeated, by Temporal's
retry policy or by steadyloop. The run stops with `output_interrupted` and keeps what
was shown, marked partial, and a person can resume it explicitly.

Forwarded text goes to a companion workflow per run (`steadyloop._workflows.output_stream`)
through `temporalio.contrib.workflow_streams`, not to the loop workflow, so the loop's
history does not grow with streamed tokens: the model activity publishes, subscribers
(`steadyloop run`) read with long-poll updates, and the host bounds its own history.

What is forwarded, by rule:
- answer text, as it arrives (one item per network read, not per token);
- reasoning text on its own kind, always; it counts as output only when the run says
  so (`reasoning_is_output`), because many interfaces show thinking as provisional;
- nothing at all when the request asks for JSON output (`response_format`
  `json_object`/`json_schema`): half a JSON document is of no use to a reader, and
  not forwarding keeps a malformed document retryable as a completion defect.
Tool-call arguments are never forwarded: they are not shown to anyone before the call
is answered.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from steadyloop._stream.surrogates import rejoin_surrogates

# The topic on the host's stream that carries `OutputDelta` items.
OUTPUT_TOPIC = "output"
OUTPUT_STREAM_WORKFLOW = "steadyloop.OutputStream"
CLOSE_OUTPUT_STREAM_SIGNAL = "close"
READ_FORWARDED_OUTPUT_ACTIVITY = "steadyloop.read_forwarded_output"

OutputKind = Literal["text", "reasoning"]
# How long a run's output host stays open with nothing published (`ForwardingOptions`).
HOST_IDLE_CLOSE_S = 3_600.0


# The output host's memo key holding its epoch (`steadyloop.events._cursor`): read by
# followers with `describe`, so they need no query to tell a host that started over.
HOST_EPOCH_MEMO = "steadyloop_epoch"


def output_stream_id(run_workflow_id: str, run_id: str) -> str:
    """The companion workflow's id: one per run, stable across continue-as-new.

    `run_id` is the run's first execution run id: keyed by it, a workflow id used again
    for a new run gets a new host, so one run's output never shows under another's.
    """
    return f"{run_workflow_id}/output/{run_id}"


class ForwardingOptions(BaseModel):
    """A run's forwarding option. Off by default: nothing is forwarded, nothing published.

    `batch_interval_s` is how long the publisher gathers text before one signal to the
    host: shorter is livelier and costs more history on the host (never on the loop).
    `host_max_events` bounds each host execution's history: past it, the host truncates
    and continues-as-new (Temporal allows 2,000 updates per execution; each subscriber
    poll is one).
    `host_idle_close_s` is how long the host waits with nothing published before it
    ends (a run that died without closing it holds no workflow open for ever). A run
    that goes on later, after a long tool call or a person's slow approval, starts it
    again with the log it kept, so followers see neither a gap nor a repeat; shorter
    frees the host sooner and costs a restart per long silence.
    """

    model_config = ConfigDict(frozen=True)

    enabled: bool = False
    reasoning_is_output: bool = False
    batch_interval_s: float = Field(default=0.25, gt=0, le=10)
    host_max_events: int = Field(default=2_000, ge=200, le=40_000)
    host_idle_close_s: float = Field(
        default=HOST_IDLE_CLOSE_S, ge=1, le=7 * 86_400, allow_inf_nan=False
    )


class ForwardTarget(BaseModel):
    """Where and as what one model attempt forwards (part of the model request)."""

    model_config = ConfigDict(frozen=True)

    stream_id: str
    turn: int
    attempt: int
    reasoning_is_output: bool = False
    batch_interval_s: float = 0.25
    host_max_events: int = 2_000
    host_idle_close_s: float = HOST_IDLE_CLOSE_S
    # Characters of this turn's output (text, and reasoning when it counts) already shown
    # that this attempt continues (`steadyloop._stops.continuation`): the host holding that
    # much from earlier attempts is expected, more is a repeat to refuse.
    accepted_chars: int = 0

    def counts(self, kind: OutputKind) -> bool:
        """Whether forwarding an item of this kind makes the attempt's output seen."""
        return kind == "text" or self.reasoning_is_output


class OutputDelta(BaseModel):
    """One forwarded piece of output: the text of one network read, of one kind.

    `turn` and `attempt` let a subscriber tell attempts apart: reasoning from an attempt
    that was retried is superseded by the next attempt's.
    """

    turn: int
    attempt: int
    kind: OutputKind
    text: str

    @field_validator("text")
    @classmethod
    def _serializable(cls, text: str) -> str:
        """A lone surrogate cannot be serialized, so it never reaches the host: the model
        activity forwards whole characters, and anything left unpaired is U+FFFD."""
        return rejoin_surrogates(text, json_escape=False)


class ForwardedOutput(BaseModel):
    """What the host retained of one turn: the text a person was shown.

    `complete` is False when the host had already truncated items of that turn (a very
    long answer under a small retention), so the text is a suffix of what was shown.
    """

    text: str = ""
    reasoning: str = ""
    attempts: list[int] = Field(default_factory=list)
    complete: bool = True


class ReadForwardedOutput(BaseModel):
    """Input of the activity that reads a turn's forwarded output back from the host."""

    stream_id: str
    turn: int
    before_attempt: int | None = None  # only attempts below this one (None: all)


class PartialOutput(BaseModel):
    """The output a person saw of a turn that could not finish (kept in the run's result).

    `source`: `activity` when the failed attempt reported its own text, `stream` when it
    was read back from the host (the worker died mid-stream, or a person interrupted the
    turn). `complete` is False when the text may be short of what was shown.
    """

    turn: int
    attempt: int
    text: str
    reasoning: str = ""
    source: Literal["activity", "stream"]
    complete: bool = True
    cause: str = ""
    shown: bool = True

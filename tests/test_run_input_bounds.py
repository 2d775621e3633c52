"""Run inputs a caller can get wrong: durations, counts and identities are refused where the
run is built, by name, instead of wedging the workflow task or blaming the model.

Unchecked, `deadline_s=1e12` (and `model_timeout_s` / heartbeat 1e300) would pass
validation and then raise `OverflowError` in workflow code, so Temporal would retry the
workflow task forever; `deadline_s=inf` would be written as JSON `null` (no deadline);
`tenant_id=""` would make every receipt key invalid, and each tool call would be answered
"Invalid tool arguments". The slow test at the end sends such inputs past the client, on the
wire, and reads the history: the workflow fails with the field's name, and no workflow
task fails.
"""

from __future__ import annotations

import math
import types
import typing
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated, Any, Union

import pytest
from loop_harness import running_loop
from pydantic import BaseModel, ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.common import RawValue

from steadyloop._chains.delegation_tool import read_delegate_request
from steadyloop._receipts.decision import receipt_key
from steadyloop._routing.circuit_breaker import BreakerPolicy
from steadyloop._routing.endpoints import EndpointConfig
from steadyloop._run.bounds import (
    MAX_SECONDS,
    identity_problem,
    sampling_problems,
    seconds_problem,
)
from steadyloop._run.models import (
    LOCAL_TOOL_MAX_S,
    AgentProfile,
    Delegation,
    RunInput,
    RunLimits,
    Sampling,
)
from steadyloop.testing import text_response
from steadyloop.tools._payloads import ToolDescription, ToolOutcome

# What the workflow is handed: the run (with everything inside it), a tool's description,
# and the worker's own configuration that workflow code adds to its clock.
ROOTS: tuple[type[BaseModel], ...] = (RunInput, ToolDescription, EndpointConfig, BreakerPolicy)
# What a run reports rather than obeys: measurements, never added to a clock.
NOT_BOUNDS = {"carried"}

HOSTILE_SECONDS = [1e12, 1e300, math.inf, -math.inf, math.nan, 0.0, -1.0, MAX_SECONDS + 1]


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        yield from _models(typing.get_args(annotation)[0])
    elif origin in (Union, types.UnionType, list, dict, tuple):
        for argument in typing.get_args(annotation):
            yield from _models(argument)


# A valid instance of each model that has a duration, to change one field at a time (so
# field and model validators run as they do on real input). A model the walk finds with
# no sample here fails `test_every_model_with_a_duration_has_a_sample`.
SAMPLES: dict[str, dict[str, Any]] = {
    "RunLimits": {},
    "Backoff": {},
    "RouteCandidate": {"endpoint": "e", "model": "m"},
    "CompactionPolicy": {"max_chars": 1000},
    "PairCooldownLimit": {"cooldown_s": 10},
    "TenantRateLimit": {"window_s": 10, "max_started": 3},
    "ForwardingOptions": {},
    "ToolDescription": {
        "name": "t",
        "description": "d",
        "parameters": {"type": "object", "properties": {}},
        "effect": "pure",
        "timeout_s": 30,
    },
    "EndpointConfig": {"name": "e", "base_url": "http://127.0.0.1:1/v1"},
    "BreakerPolicy": {},
    "RunInput": {"endpoint": "e", "model": "m", "prompt": "hi"},
    "ActivityTarget": {"activity_type": "charge_card", "start_to_close_s": 30},
}


def duration_fields() -> list[tuple[str, type[BaseModel], str]]:
    """Every `*_s` field of every model the roots reach: (Model.field, Model, field)."""
    seen: set[type[BaseModel]] = set()
    pending = list(ROOTS)
    found: list[tuple[str, type[BaseModel], str]] = []
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            if name in NOT_BOUNDS:
                continue
            pending.extend(_models(field.annotation))
            if name.endswith("_s"):
                found.append((f"{model.__name__}.{name}", model, name))
    return sorted(found, key=lambda item: item[0])


DURATIONS = duration_fields()
IDS = [label for label, _, _ in DURATIONS]


def _with(model: type[BaseModel], field: str, value: object) -> BaseModel:
    return model.model_validate(SAMPLES[model.__name__] | {field: value})


def test_every_model_with_a_duration_has_a_sample() -> None:
    missing = {model.__name__ for _, model, _ in DURATIONS} - set(SAMPLES)
    assert not missing, f"add a valid sample of {sorted(missing)} to SAMPLES"


def test_the_walk_finds_the_durations_the_issue_names() -> None:
    names = set(IDS)
    assert {
        "RunLimits.deadline_s",
        "RunLimits.model_timeout_s",
        "RunLimits.model_heartbeat_timeout_s",
        "RunLimits.model_retry_initial_s",
        "Backoff.initial_s",
        "Backoff.max_s",
        "RouteCandidate.max_retry_after_s",
        "CompactionPolicy.activity_timeout_s",
        "PairCooldownLimit.cooldown_s",
        "TenantRateLimit.window_s",
        "ToolDescription.timeout_s",
        "ToolDescription.heartbeat_timeout_s",
        "EndpointConfig.total_s",
        "EndpointConfig.read_timeout_s",
        "BreakerPolicy.cool_off_s",
    } <= names, sorted(names)


# 0 is meaningful for a Retry-After patience (never wait), so it is not hostile there.
REFUSALS = [
    pytest.param(label, model, field, value, id=f"{label}-{value!r}")
    for label, model, field in DURATIONS
    for value in HOSTILE_SECONDS
    if not (value == 0.0 and label == "RouteCandidate.max_retry_after_s")
]


@pytest.mark.parametrize(("label", "model", "field", "value"), REFUSALS)
def test_every_duration_refuses_what_the_clock_cannot_add(
    label: str, model: type[BaseModel], field: str, value: float
) -> None:
    with pytest.raises(ValidationError) as refused:
        _with(model, field, value)
    assert refused.value.errors()[0]["loc"][0] == field


# The forwarding batch interval is bounded at 10 s by its own rule, and the output host's
# idle close at 1 s to 7 days by its own (a host idle longer ends, and the next publish
# starts it again with its log: nothing is lost).
# A pure tool runs as a local activity only up to `LOCAL_TOOL_MAX_S`: a local
# activity holds the workflow task while it runs.
OWN_BOUNDS = {
    "ForwardingOptions.batch_interval_s",
    "ForwardingOptions.host_idle_close_s",
    "RunInput.local_pure_tools_s",
}
TEN_YEAR_FIELDS = [d for d in DURATIONS if d[0] not in OWN_BOUNDS]


@pytest.mark.parametrize("value", [0.5, 7 * 86_400 + 1, math.inf, math.nan])
def test_the_hosts_idle_close_is_refused_outside_its_own_bounds(value: float) -> None:
    from steadyloop._output.forwarding import ForwardingOptions

    with pytest.raises(ValidationError) as refused:
        ForwardingOptions(host_idle_close_s=value)
    assert refused.value.errors()[0]["loc"] == ("host_idle_close_s",)
    assert ForwardingOptions(host_idle_close_s=7 * 86_400).host_idle_close_s == 7 * 86_400


@pytest.mark.parametrize("value", [LOCAL_TOOL_MAX_S + 0.001, 1e300, math.inf, math.nan, 0.0, -1.0])
def test_local_pure_tools_are_refused_outside_their_own_bound(value: float) -> None:
    with pytest.raises(ValidationError) as refused:
        RunInput(endpoint="e", model="m", prompt="hi", local_pure_tools_s=value)
    assert refused.value.errors()[0]["loc"] == ("local_pure_tools_s",)
    kept = RunInput(endpoint="e", model="m", prompt="hi", local_pure_tools_s=LOCAL_TOOL_MAX_S)
    assert kept.local_pure_tools_s == LOCAL_TOOL_MAX_S


@pytest.mark.parametrize(
    ("label", "model", "field"), TEN_YEAR_FIELDS, ids=[d[0] for d in TEN_YEAR_FIELDS]
)
def test_every_duration_takes_up_to_ten_years(
    label: str, model: type[BaseModel], field: str
) -> None:
    heartbeat = {"effect": "resumable", "timeout_s": MAX_SECONDS}  # it must be the shorter
    extra = heartbeat if label == "ToolDescription.heartbeat_timeout_s" else {}
    for value in (float(MAX_SECONDS), 0.5):
        built = model.model_validate(SAMPLES[model.__name__] | extra | {field: value})
        assert getattr(built, field) == value


@pytest.mark.parametrize(
    ("limits", "named"),
    [
        ({"deadline_s": 1e12}, "deadline_s"),
        ({"deadline_s": math.inf}, "deadline_s"),
        ({"deadline_s": "Infinity"}, "deadline_s"),
        ({"deadline_s": math.nan}, "deadline_s"),
        ({"model_timeout_s": 1e300}, "model_timeout_s"),
        ({"model_heartbeat_timeout_s": 1e300}, "model_heartbeat_timeout_s"),
        ({"max_turns": 10**30}, "max_turns"),
        ({"token_budget": 10**30}, "token_budget"),
        ({"token_budget": 1e300}, "token_budget"),
    ],
)
def test_the_issues_limits_are_refused_naming_the_field(limits: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError) as refused:
        RunInput(endpoint="e", model="m", prompt="p", limits=limits)
    (error,) = refused.value.errors()
    assert error["loc"] == ("limits", named)


def test_an_infinite_deadline_is_refused_not_stored_as_no_deadline() -> None:
    # The bug: pydantic writes inf as JSON null, so the workflow read "no deadline".
    with pytest.raises(ValidationError, match="got infinity"):
        RunLimits(deadline_s=math.inf)
    with pytest.raises(ValidationError, match="NaN"):
        RunLimits.model_validate_json('{"deadline_s": NaN}')


def test_ten_years_is_the_most_and_the_workflows_clock_can_add_it() -> None:
    limits = RunLimits(
        deadline_s=MAX_SECONDS, model_timeout_s=MAX_SECONDS, model_heartbeat_timeout_s=MAX_SECONDS
    )
    from datetime import UTC, datetime

    now = datetime(9989, 1, 1, tzinfo=UTC)  # the clock has room even this late
    assert limits.deadline_s is not None
    assert now + timedelta(seconds=limits.deadline_s) > now


@pytest.mark.parametrize(
    ("sampling", "named"),
    [
        ({"temperature": math.nan}, "temperature"),
        ({"top_p": math.inf}, "top_p"),
        ({"max_tokens": 1e300}, "max_tokens"),
        ({"max_tokens": 2**31}, "max_tokens"),
        ({"seed": 2**64}, "seed"),
    ],
)
def test_sampling_refuses_what_json_or_the_provider_cannot_take(
    sampling: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        Sampling.model_validate(sampling)
    assert refused.value.errors()[0]["loc"] == (named,)


# -- identities (item 5) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tenant", "says"),
    [
        ("", "must not be blank"),
        ("   ", "must not be blank"),
        ("acme\ud83d", "lone surrogate"),
        ("ac\x00me", "control character"),
        ("ac\nme", "control character"),
        ("x" * 257, "at most 256"),
    ],
)
def test_a_tenant_id_that_would_break_receipt_keys_is_refused_by_name(
    tenant: str, says: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        RunInput(endpoint="e", model="m", prompt="p", tenant_id=tenant)
    (error,) = refused.value.errors()
    assert error["loc"] == ("tenant_id",)
    assert says in error["msg"]


@pytest.mark.parametrize("tenant", ["", "\ud83d", "a\x00b", "t" * 300, " "])
def test_every_tenant_a_run_accepts_makes_a_key_that_can_be_stored(tenant: str) -> None:
    """The property that decided the outcome: a tenant the run takes gives valid receipt
    keys that serialize; one that would not is refused before the run starts."""
    for candidate in (tenant, "acme", "o'brien", "téñant ✓"):
        try:
            run = RunInput(endpoint="e", model="m", prompt="p", tenant_id=candidate)
        except ValidationError:
            assert identity_problem(candidate) is not None
            continue
        key = receipt_key(run.tenant_id, "wf-1", "note", {"text": "x"})
        key.model_dump_json()  # raises on a lone surrogate
        run.model_dump_json()


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"endpoint": "e\x1b[31m"}, ("endpoint",)),
        ({"model": "m\ud800"}, ("model",)),
        ({"tools": ["note", ""]}, ("tools", 1)),
        ({"prompt": "caf\udce9"}, ("prompt",)),
        ({"system_prompt": "\udcff"}, ("system_prompt",)),
        ({"plugins": {"core": ["a\x00"]}}, ("plugins", "core", 0)),
    ],
)
def test_other_caller_given_names_and_text_are_refused_by_name(
    fields: dict[str, Any], named: tuple[Any, ...]
) -> None:
    base: dict[str, Any] = {"endpoint": "e", "model": "m", "prompt": "p"}
    with pytest.raises(ValidationError) as refused:
        RunInput(**(base | fields))
    assert refused.value.errors()[0]["loc"] == named


def test_control_characters_in_a_prompt_are_text_not_refused() -> None:
    run = RunInput(endpoint="e", model="m", prompt="line one\nline two\ttabbed")
    assert run.prompt == "line one\nline two\ttabbed"


def test_the_shared_rules_say_why() -> None:
    assert seconds_problem(30.0) is None
    assert seconds_problem(0.0, zero_allowed=True) is None
    assert "infinity" in (seconds_problem(math.inf) or "")
    assert "NaN" in (seconds_problem(math.nan) or "")
    assert "1e+12" in (seconds_problem(1e12) or "")
    assert identity_problem("acme") is None
    assert identity_problem("x" * 1000, max_chars=1000) is None


# -- on the wire: the workflow fails by name, its task never does ---------------------------


def _raw_run(body: str) -> RawValue:
    """A run input exactly as written, past every client-side check (JSON `Infinity`
    included, which no Python encoder writes)."""
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=body.encode()))


def _run_json(limits: str = "{}", tenant: str = '"default"') -> str:
    return (
        '{"endpoint": "scripted", "model": "scripted-model", "prompt": "hi", '
        f'"tenant_id": {tenant}, "limits": {limits}}}'
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "named"),
    [
        (_run_json('{"deadline_s": 1e12}'), "deadline_s"),
        (_run_json('{"deadline_s": Infinity}'), "deadline_s"),
        (_run_json('{"deadline_s": NaN}'), "deadline_s"),
        (_run_json('{"model_timeout_s": 1e300}'), "model_timeout_s"),
        (_run_json('{"model_heartbeat_timeout_s": 1e300}'), "model_heartbeat_timeout_s"),
        (_run_json(tenant='""'), "tenant_id"),
    ],
    ids=["deadline-1e12", "deadline-Infinity", "deadline-NaN", "timeout", "heartbeat", "tenant"],
)
async def test_an_input_refused_in_the_workflow_fails_the_run_and_never_its_task(
    body: str, named: str
) -> None:
    answer = text_response("hello")
    async with running_loop([answer]) as loop:
        handle = await loop.client.start_workflow(
            "ToolLoopWorkflow",
            _raw_run(body),
            id=f"bounds-{uuid.uuid4()}",
            task_queue=loop.task_queue,
            execution_timeout=timedelta(seconds=60),  # a wedged task ends the test, not CI
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        text = f"{failed.value.cause}"
        assert named in text, text
        kinds = [event.event_type async for event in handle.fetch_history_events()]
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds
        assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED in kinds
        assert loop.server.requests == []  # refused before any model call


def test_a_delegated_task_the_childs_prompt_would_refuse_is_answered_to_the_model() -> None:
    """The task is the model's value: it is told what to fix; the parent is not failed by
    a child input that cannot be built."""
    delegation = Delegation(to=["writer"], agents={"writer": AgentProfile(description="d")})
    outcome = read_delegate_request({"agent": "writer", "task": "half \ud83d"}, delegation)
    assert isinstance(outcome, ToolOutcome) and outcome.status == "invalid_arguments"
    assert "'task' contains a lone surrogate" in outcome.content
    request = read_delegate_request({"agent": "writer", "task": "ok"}, delegation)
    assert not isinstance(request, ToolOutcome)


# -- sampling knobs per wire --------------------------------------------------


@pytest.mark.parametrize("temperature", [1e300, 2.000001, -0.1, math.inf])
def test_a_temperature_no_wire_takes_is_refused_naming_the_knob_value_and_range(
    temperature: float,
) -> None:
    with pytest.raises(ValidationError) as refused:
        Sampling(temperature=temperature)
    error = refused.value.errors()[0]
    assert error["loc"] == ("temperature",)
    assert "temperature must be a number from 0 to 2 on any endpoint" in error["msg"]
    assert f"got {temperature:g}" in error["msg"]
    assert Sampling(temperature=2.0).temperature == 2.0


def test_each_wire_holds_its_own_range() -> None:
    knobs: dict[Any, float | None] = {"temperature": 1.5, "top_p": 0.5}
    assert sampling_problems(knobs, "chat") == []
    assert sampling_problems(knobs, "responses") == []
    assert sampling_problems(knobs, "anthropic") == [
        "temperature must be a number from 0 to 1 on an Anthropic Messages endpoint; got 1.5"
    ]
    assert sampling_problems({"temperature": None, "top_p": 1.01}, "anthropic") == [
        "top_p must be a number from 0 to 1 on an Anthropic Messages endpoint; got 1.01"
    ]


@pytest.mark.parametrize("value", [1.0000001, 1 + 2**-52, 2.0000000001])
def test_a_value_just_past_the_range_is_said_as_it_is_not_rounded_into_it(value: float) -> None:
    """Rounded to six digits, 1.0000001 reads "got 1", a value the range holds."""
    (problem,) = sampling_problems({"temperature": value}, "anthropic")
    assert problem.endswith(f"; got {value!r}")

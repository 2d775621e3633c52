"""What a caller hands the client API is checked before anything is sent: ids, keys,
prompts, messages and SHAs that no run could carry are refused with a reason naming
them, and `RunOptions` stays `RunInput`'s configuration, field for field. No server:
the refusals happen before the first request (the Temporal client is never called)."""

from __future__ import annotations

from typing import Any

import pytest

import steadyloop
from steadyloop._run.models import RunInput
from steadyloop.client import RunOptions, SteadyloopClient
from steadyloop.client._options import CONVERSATION_FIELDS
from steadyloop.client._threads import _Found


class NoTemporal:
    """A Temporal client that must never be reached (a handle may be made: no request)."""

    def get_workflow_handle(self, *args: Any, **kwargs: Any) -> NoTemporal:
        return NoTemporal()

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the client API called Temporal ({name}) for a refused input")


def client() -> SteadyloopClient:
    return SteadyloopClient(NoTemporal())  # type: ignore[arg-type]


OPTIONS = RunOptions(endpoint="e", model="m")


@pytest.mark.parametrize(
    ("thread_id", "says"),
    [
        ("", "blank"),
        ("   ", "blank"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("\ud800", "lone surrogate"),
        ("t" * 201, "at most 200"),
    ],
)
def test_a_thread_id_no_workflow_could_carry_is_refused(thread_id: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        client().thread(thread_id)


@pytest.mark.parametrize(
    ("key", "says"),
    [("", "blank"), ("k\x07", "control character"), ("\udfff", "surrogate"), ("k" * 201, "200")],
)
async def test_an_idempotency_key_that_cannot_be_an_update_id_is_refused(
    key: str, says: str
) -> None:
    with pytest.raises(ValueError, match=f"key .*{says}"):
        await client().thread("t").start("hi", options=OPTIONS, key=key)


@pytest.mark.parametrize(
    ("prompt", "messages", "says"),
    [
        (None, [], "a prompt or messages"),
        ("bad \ud83d text", [], "lone surrogate"),
        (None, [{"role": "wizard", "content": "x"}], "role"),
        (
            None,
            [{"role": "user", "content": "ok"}, {"role": "user", "content": "\udc80"}],
            r"messages\[1\] cannot be sent",
        ),
    ],
)
async def test_a_conversation_no_run_could_carry_is_refused(
    prompt: str | None, messages: list[Any], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        await client().thread("t").start(prompt, messages=messages, options=OPTIONS)


async def test_a_steering_request_is_checked_before_it_is_sent() -> None:
    run = client().run("t/1")
    with pytest.raises(ValueError, match="blank"):
        await run.send(" \n ")
    with pytest.raises(ValueError, match="bytes"):
        await run.send("x" * (300 * 1024))  # a message is sent with every later request
    with pytest.raises(ValueError, match="SHA"):
        await run.approve("call_0")  # a call id alone may name another call by now
    with pytest.raises(ValueError, match="hex digits"):
        await run.approve("call_0", "not-a-sha")
    with pytest.raises(ValueError, match="reason is blank"):
        await run.reject("call_0", "a" * 12, reason="  ")


def test_run_options_are_run_inputs_configuration_field_for_field() -> None:
    configuration = set(RunInput.model_fields) - CONVERSATION_FIELDS
    assert set(RunOptions.model_fields) == configuration
    for name in configuration:
        assert RunOptions.model_fields[name].annotation == RunInput.model_fields[name].annotation
    run = OPTIONS.run_input(prompt="hi")
    assert RunOptions.of(run) == OPTIONS
    assert run.forwarding.enabled  # the client's one different default


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"limits": {"deadline_s": float("nan")}}, "NaN"),
        ({"limits": {"max_turns": 0}}, "greater than or equal to 1"),
        ({"tools": ["a", "a"]}, "unique"),
        ({"tenant_id": "a\x00"}, "control character"),
        ({"unknown": 1}, "Extra inputs"),
    ],
)
def test_run_options_refuse_hostile_values_by_name(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        RunOptions.model_validate({"endpoint": "e", "model": "m", **fields})


def test_the_client_api_is_exported_from_the_package() -> None:
    for name in ("connect", "SteadyloopClient", "Thread", "RunHandle", "RunOptions"):
        assert name in steadyloop.__all__ and getattr(steadyloop, name) is not None
    for error in ("ThreadBusy", "RunEnded", "NotTheCallReviewed", "NoWorkerAnswered"):
        assert issubclass(getattr(steadyloop, error), steadyloop.ClientError)


async def test_connect_says_what_is_wrong_with_the_settings_or_the_address() -> None:
    with pytest.raises(steadyloop.ConfigError, match="STEADYLOOP_BLOB_THRESHOLD"):
        await steadyloop.connect(environ={"STEADYLOOP_BLOB_THRESHOLD": "lots"})
    with pytest.raises(steadyloop.TemporalUnreachable, match=r"127\.0\.0\.1:1 .*worker --dev"):
        await steadyloop.connect("127.0.0.1:1", environ={})


@pytest.mark.parametrize(("runs", "known"), [(0, 0), (1, 0), (37, 0), (37, 20), (37, 37), (64, 1)])
async def test_the_latest_run_is_found_in_logarithmic_describes(runs: int, known: int) -> None:
    thread = client().thread("t")
    probed: list[int] = []

    async def describe(number: int) -> _Found | None:
        probed.append(number)
        return _Found(number, "completed", None, None) if 1 <= number <= runs else None

    thread._describe = describe  # type: ignore[method-assign]
    thread._known = known
    found = await thread._latest()
    assert (found.number if found else 0) == runs
    assert thread._known == runs
    assert len(probed) <= 2 * max(runs - known, 1).bit_length() + 2


async def test_a_run_the_thread_knew_of_that_is_gone_starts_the_search_over() -> None:
    thread = client().thread("t")

    async def describe(number: int) -> _Found | None:
        return _Found(number, "completed", None, None) if number <= 3 else None

    thread._describe = describe  # type: ignore[method-assign]
    thread._known = 9  # e.g. its runs were deleted by the namespace's retention
    found = await thread._latest()
    assert found is not None and found.number == 3

"""What a caller may put in a run's configuration: durations, counts and identities.

Pure, no I/O. Every value here crosses into workflow code, where an exception that is
not a Temporal failure fails the workflow *task* and Temporal retries it forever. A
duration of 1e12 seconds passes `gt=0`, then `workflow.now() + timedelta(seconds=...)`
raises `OverflowError` in the workflow and the run wedges; an infinite one is written
as JSON `null` by pydantic and silently becomes "no bound"; an empty tenant id makes
every receipt key invalid, and the model is told its arguments were wrong. So each is
refused where the configuration is built, with a message that names the field:

- `Seconds` (and `SecondsOrZero`): a finite number of seconds, above 0 (or 0 and
  above), at most `MAX_SECONDS` (ten years). Well inside what `datetime` (year 9999),
  `timedelta` and Temporal's durations represent, and far beyond any sensible bound
  on an agent run; NaN and infinities are refused by name.
- `Count`, `TokenCount`: whole numbers, at least 1, at most what an int32 (a provider's
  `max_tokens`, a retry count) or a JSON-safe integer (a token budget, bytes) holds.
- `Identity`: a caller-chosen name (tenant, endpoint, model, workflow id): not blank,
  valid Unicode text (no lone surrogates: they cannot be encoded, so the run could not
  even be stored), no control characters, at most `MAX_IDENTITY_CHARS`.
- `Text`: free text a caller sends (a prompt, a system prompt): anything but lone
  surrogates.

- Sampling knobs (`Temperature`, `TopP`): each wire's providers take a range, and a
  value outside it is refused on every attempt (unchecked, `--temperature 1e300` starts
  a run the provider then answers with a 400 per turn). `SAMPLING_RANGES` holds them per
  wire (OpenAI's chat and Responses: temperature 0..2; Anthropic Messages: 0..1; top_p
  0..1 on all three); a run's `Sampling` is held to the widest range when it is built
  (the run does not know which wire its endpoints speak: the worker does), `steadyloop
  run` holds them to each endpoint's wire where it can learn it (`steadyloop._cli.
  wire_bounds`), and the model activity holds a request to its endpoint's wire before
  sending it (`sampling_problems`), a non-retryable error naming the knob, the value
  and the range.

`seconds_problem`, `identity_problem`, `text_problem` and `sampling_problem` say why a
value is refused (None when it is fine), so the command line can check its flags with
the same rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field

__all__ = [
    "MAX_COUNT",
    "MAX_IDENTITY_CHARS",
    "MAX_SECONDS",
    "MAX_TOKENS",
    "SAMPLING_RANGES",
    "Count",
    "Identity",
    "OptionalCount",
    "SamplingKnob",
    "Seconds",
    "SecondsOrZero",
    "Temperature",
    "Text",
    "TokenCount",
    "TopP",
    "WireApi",
    "identity_problem",
    "sampling_problem",
    "sampling_problems",
    "seconds_problem",
    "text_problem",
]

# Ten years: a bound no run, timeout or window needs to exceed, and one that every
# clock sum stays far from overflowing (datetime ends at year 9999).
MAX_SECONDS = 10 * 365 * 86_400
# A count that may reach a provider or a protobuf int32 (max_tokens, attempts, turns).
MAX_COUNT = 2**31 - 1
# A count of tokens or bytes: the largest integer every JSON reader holds exactly.
MAX_TOKENS = 2**53
MAX_IDENTITY_CHARS = 256

WireApi = Literal["chat", "responses", "anthropic"]
SamplingKnob = Literal["temperature", "top_p"]
# The inclusive range each wire's providers take for each knob (documented by OpenAI for
# Chat Completions and Responses, by Anthropic for Messages).
SAMPLING_RANGES: Final[dict[WireApi, dict[SamplingKnob, tuple[float, float]]]] = {
    "chat": {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)},
    "responses": {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)},
    "anthropic": {"temperature": (0.0, 1.0), "top_p": (0.0, 1.0)},
}
_WIRE_NAMES: Final[dict[WireApi, str]] = {
    "chat": "a Chat Completions",
    "responses": "a Responses",
    "anthropic": "an Anthropic Messages",
}

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def seconds_problem(value: float, *, zero_allowed: bool = False) -> str | None:
    """Why `value` is not a usable number of seconds, or None."""
    floor = "0 or more" if zero_allowed else "above 0"
    expected = f"a finite number of seconds {floor}, at most 10 years ({MAX_SECONDS:,} s)"
    if math.isnan(value):
        return f"must be {expected}; got NaN (not a number)"
    if math.isinf(value):
        return f"must be {expected}; got {'-' if value < 0 else ''}infinity"
    if value < 0 or (value == 0 and not zero_allowed):
        return f"must be {expected}; got {value:g}"
    if value > MAX_SECONDS:
        return f"must be {expected}; got {value:g}"
    return None


def _seconds(value: float) -> float:
    problem = seconds_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _seconds_or_zero(value: float) -> float:
    problem = seconds_problem(value, zero_allowed=True)
    if problem is not None:
        raise ValueError(problem)
    return value


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None (only lone surrogates are refused)."""
    found = _SURROGATE.search(value)
    if found is None:
        return None
    return (
        f"contains a lone surrogate ({found.group()!r} at character {found.start()}), "
        "which cannot be encoded as UTF-8: bytes that are not valid UTF-8 (or not valid in "
        "the locale's encoding) were decoded into it; pass valid UTF-8 text"
    )


def identity_problem(value: str, *, max_chars: int = MAX_IDENTITY_CHARS) -> str | None:
    """Why `value` is not a usable name or id, or None."""
    if not value.strip():
        return "must not be blank"
    surrogate = text_problem(value)
    if surrogate is not None:
        return surrogate
    control = _CONTROL.search(value)
    if control is not None:
        return (
            f"contains a control character ({control.group()!r} at character "
            f"{control.start()}); use printable characters"
        )
    if len(value) > max_chars:
        return f"is {len(value):,} characters long; at most {max_chars} are allowed"
    return None


def sampling_problem(knob: SamplingKnob, value: float, api: WireApi | None = None) -> str | None:
    """Why `value` is not a usable `knob` on `api`'s endpoints (None: on any wire's), or
    None when it is fine."""
    if api is None:
        low = min(ranges[knob][0] for ranges in SAMPLING_RANGES.values())
        high = max(ranges[knob][1] for ranges in SAMPLING_RANGES.values())
        where = "on any endpoint"
    else:
        low, high = SAMPLING_RANGES[api][knob]
        where = f"on {_WIRE_NAMES[api]} endpoint"
    if math.isfinite(value) and low <= value <= high:
        return None
    got = "NaN (not a number)" if math.isnan(value) else f"{value:g}"
    if not math.isnan(value) and float(got) != value:  # 1.0000001 is not "got 1"
        got = repr(value)
    return f"{knob} must be a number from {low:g} to {high:g} {where}; got {got}"


def sampling_problems(knobs: Mapping[SamplingKnob, float | None], api: WireApi) -> list[str]:
    """Every knob of `knobs` that `api`'s endpoints refuse, as `sampling_problem` says it."""
    problems = (
        sampling_problem(knob, value, api) for knob, value in knobs.items() if value is not None
    )
    return [problem for problem in problems if problem is not None]


def _sampling_check(knob: SamplingKnob) -> Callable[[float], float]:
    def check(value: float) -> float:
        problem = sampling_problem(knob, value)
        if problem is not None:
            raise ValueError(problem)
        return value

    return check


def _identity(value: str) -> str:
    problem = identity_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _text(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Seconds = Annotated[float, AfterValidator(_seconds)]
SecondsOrZero = Annotated[float, AfterValidator(_seconds_or_zero)]
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
OptionalCount = Annotated[int, Field(ge=0, le=MAX_COUNT)]
TokenCount = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
Identity = Annotated[str, AfterValidator(_identity)]
Temperature = Annotated[float, AfterValidator(_sampling_check("temperature"))]
TopP = Annotated[float, AfterValidator(_sampling_check("top_p"))]
Text = Annotated[str, AfterValidator(_text)]

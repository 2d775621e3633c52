"""The sampling knobs each endpoint's wire takes, checked before a run starts.

A run holds its knobs to the widest range: it does not know which wire its endpoints
speak. The model activity refuses a request its endpoint's wire would refuse, on every
attempt, so `--temperature 1.5` against an Anthropic endpoint would start a run that
fails its first turn (or, on a route, one that never uses that endpoint). Checked here,
before anything starts, it is said once, from the flag. The wire is the serving worker's
word where it was asked (it is the one that sends the requests), else this machine's
configuration; an endpoint neither knows is left to the activity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from steadyloop._run.bounds import (
    SAMPLING_RANGES,
    SamplingKnob,
    WireApi,
    sampling_problem,
    sampling_problems,
)
from steadyloop._run.models import Sampling

__all__ = ["sampling_some_wire_refuses", "wire_refusal"]

KNOB_FLAGS: dict[SamplingKnob, str] = {"temperature": "--temperature", "top_p": "--top-p"}


def _knobs(sampling: Sampling) -> dict[SamplingKnob, float | None]:
    return {"temperature": sampling.temperature, "top_p": sampling.top_p}


def sampling_some_wire_refuses(sampling: Sampling) -> bool:
    """Whether any wire refuses a knob of `sampling`: only then do the wires matter."""
    return any(sampling_problems(_knobs(sampling), api) for api in SAMPLING_RANGES)


def wire_refusal(
    sampling: Sampling, endpoints: Iterable[str], wires: Mapping[str, WireApi]
) -> str | None:
    """Why the run cannot start (each knob named by its flag, with the endpoint whose wire
    refuses it), or None when every endpoint whose wire is known takes every knob."""
    problems: list[str] = []
    for endpoint in dict.fromkeys(endpoints):
        api = wires.get(endpoint)
        if api is None:
            continue
        for knob, value in _knobs(sampling).items():
            problem = None if value is None else sampling_problem(knob, value, api)
            if problem is not None:
                problems.append(f"{KNOB_FLAGS[knob]}: {problem} (endpoint {endpoint!r} speaks it)")
    return "; ".join(problems) or None

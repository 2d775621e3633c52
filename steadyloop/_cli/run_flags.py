"""The run's own rules, reported by the flag that broke them.

`RunInput` validates a run wherever it is built; a command line names the flag the
user typed (`--max-turns: must be at least 1 (got 0)`), not pydantic's field path.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from steadyloop._worker.config import (
    ConfigError,
)

# Which flag or argument sets each field of a run, to name it when the run is refused.
RUN_FIELD_FLAGS: dict[str, str] = {
    "prompt": "PROMPT (resume: --prompt)",
    "system_prompt": "--system",
    "endpoint": "--endpoint (or STEADYLOOP_ENDPOINT)",
    "model": "--model (or STEADYLOOP_MODEL)",
    "route": "--route",
    "tools": "--tool",
    "on_demand": "--plugin",
    "plugins": "--plugin",
    "tenant_id": "--tenant",
    "max_turns": "--max-turns",
    "token_budget": "--token-budget",
    "deadline_s": "--deadline",
    "after_max_tokens": "--continue-cut",
    "after_stream_failure": "--continue-stalled",
    "provider_profile": "--profile",
    "tool_choice": "--tool-choice",
    "prefill": "--prefill",
    "output_type": "--output-schema",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_tokens": "--max-tokens",
    "seed": "--seed",
    "stop": "--stop",
}


def run_not_valid(exc: ValidationError) -> ConfigError:
    """The run's refusal on one line, each problem named by the flag that set it and the
    rule it broke (`--max-turns: must be at least 1 (got 0)`), not pydantic's error list."""
    problems = []
    for error in exc.errors(include_url=False):
        loc = [part for part in error["loc"] if isinstance(part, str)]
        named = next((RUN_FIELD_FLAGS[p] for p in reversed(loc) if p in RUN_FIELD_FLAGS), None)
        message = _rule_text(error)
        if named is None and "prompt" in message:  # the run's own rule: no prompt at all
            named, message = "PROMPT", "must not be empty (a run needs a prompt or messages)"
        where = named or ".".join(str(part) for part in error["loc"]) or "the run"
        problems.append(f"{where}: {message}")
    return ConfigError("; ".join(problems))


def _rule_text(error: Any) -> str:
    """pydantic's error as the rule a flag broke, with the value given."""
    context = error.get("ctx") or {}
    given = error.get("input")
    got = f" (got {given!r})" if isinstance(given, int | float | str) else ""
    rules = {
        "greater_than_equal": "must be at least {ge}",
        "greater_than": "must be more than {gt}",
        "less_than_equal": "must be at most {le}",
        "less_than": "must be less than {lt}",
        "string_too_short": "must not be empty",
        "too_short": "must not be empty",
        "literal_error": "must be one of {expected}",
    }
    rule = rules.get(str(error.get("type")))
    if rule is not None:
        try:
            return rule.format(**context) + got
        except (KeyError, IndexError):
            pass
    message = str(error["msg"]).removeprefix("Value error, ")
    return message + ("" if "got" in message else got)

"""Resuming a run that stopped, as a new run: explicitly, because only a person can decide.

A run that stopped `output_interrupted` was not repeated on purpose (someone had read
part of its answer); one a person interrupted mid-answer kept what they had read too.
Going on is a new run with the same configuration, whose conversation is the stopped
run's transcript, plus the partial answer the person saw (so the model continues from
what was shown instead of starting over), plus a user message asking it to go on. The
stopped run's transcript already begins with its system prompt, so it is not added twice.
Plugins the stopped run activated are core in the new one: its transcript already shows
the model they are active.
"""

from __future__ import annotations

from steadyloop.chat import ChatMessage
from steadyloop.run_models import RunInput, RunPlugins, RunResult

DEFAULT_RESUME_PROMPT = "Your previous answer was cut off. Continue from where it stopped."


def resume_input(
    original: RunInput, result: RunResult, *, prompt: str | None = DEFAULT_RESUME_PROMPT
) -> RunInput:
    """The input of a run that carries on from `result` with `original`'s configuration."""
    messages = list(result.transcript)
    if result.partial is not None and result.partial.text.strip():
        messages.append(ChatMessage(role="assistant", content=result.partial.text))
    if prompt:
        messages.append(ChatMessage(role="user", content=prompt))
    if not messages:
        raise ValueError("the stopped run has no conversation to resume")
    plugins = original.plugins
    if plugins.named:
        plugins = RunPlugins(core=result.active_plugins, on_demand=result.activatable_plugins)
    return original.model_copy(
        update={
            "messages": messages,
            "prompt": None,
            "system_prompt": None,
            "carried": None,
            "plugins": plugins,
        }
    )
